// Package benchdata gives benchmarks the generated clusters they run on (package gen),
// made in memory once per process: a 10,000-service cluster is 18 MB of YAML, too
// large to commit and quick enough to make.
package benchdata

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/model"
)

// Sizes are the cluster sizes benchmarks run at: services, each with 10 endpoints.
var Sizes = []int{1000, 10000}

// Name is a sub-benchmark name for a size: "1k", "10k".
func Name(services int) string { return fmt.Sprintf("%dk", services/1000) }

type key struct {
	services int
	format   gen.Format
}

var (
	mu       sync.Mutex
	manifest = map[key][]byte{}
)

// Manifests returns the generated cluster of that size as YAML or JSON.
func Manifests(tb testing.TB, services int, format gen.Format) []byte {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	k := key{services, format}
	if data, ok := manifest[k]; ok {
		return data
	}
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: services, Endpoints: 10, Seed: 1, Format: format}); err != nil {
		tb.Fatal(err)
	}
	manifest[k] = buf.Bytes()
	return buf.Bytes()
}

// Cluster returns the generated cluster of that size, loaded.
func Cluster(tb testing.TB, services int) *model.Cluster {
	tb.Helper()
	l := &load.Loader{}
	l.Bytes("generated.yaml", Manifests(tb, services, gen.YAML))
	if err := l.Err(); err != nil {
		tb.Fatal(err)
	}
	return &l.Cluster
}

// MoveEndpoint returns the cluster with one endpoint of one Service moved: the first
// address of the middle EndpointSlice becomes 10.99.0.1. The cluster itself is not
// changed.
func MoveEndpoint(c *model.Cluster) *model.Cluster {
	moved := *c
	moved.Slices = slices.Clone(c.Slices)
	i := len(c.Slices) / 2
	s := *c.Slices[i]
	s.Endpoints = slices.Clone(s.Endpoints)
	s.Endpoints[0].Addresses = []netip.Addr{netip.MustParseAddr("10.99.0.1")}
	moved.Slices[i] = &s
	return &moved
}

// Counter is a writer that only counts bytes: a benchmark reports the size of its
// output (b.SetBytes) without keeping it.
type Counter struct{ N int64 }

func (c *Counter) Write(p []byte) (int, error) { c.N += int64(len(p)); return len(p), nil }

// CPU starts measuring the process's CPU time (user and system, every thread: GC
// included) and returns a function that reports it per operation as "cpu-ms/op".
// On a shared machine CPU time varies much less than wall time.
func CPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
