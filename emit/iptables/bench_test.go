package iptables_test

import (
	"bytes"
	"io"
	"net/netip"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/emit/iptables"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

var benchOpts = compiler.Options{Mode: compiler.IPTables, PreferSameTrafficDistribution: true}

func serviceMap(b *testing.B, n int) *ir.ServiceMap {
	return testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{Mode: compiler.IPTables}).Map
}

// BenchmarkWrite streams the complete ruleset (kube-proxy's --noflush payload plus the
// built-in chains and jumps).
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchdata.Sizes {
		sm := serviceMap(b, n)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var size benchdata.Counter
			iptables.Write(&size, sm, iptables.Options{})
			b.SetBytes(size.N)
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if err := iptables.Write(io.Discard, sm, iptables.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// moved is sm after one endpoint of one Service moved, through a Session.
func moved(b *testing.B, n int) (prev, next *ir.ServiceMap, changed []string) {
	c := benchdata.Cluster(b, n)
	sess, _, err := compiler.NewSession(c, compiler.ResolveOptions{}, benchOpts)
	if err != nil {
		b.Fatal(err)
	}
	cur := c.Slices[len(c.Slices)/2]
	nx := *cur
	nx.Endpoints = append([]model.Endpoint(nil), cur.Endpoints...)
	nx.Endpoints[0].Addresses = []netip.Addr{netip.MustParseAddr("10.99.0.1")}
	prev = sess.Map()
	up, err := sess.Apply(compiler.Change{
		Removed: &model.Cluster{Slices: []*model.EndpointSlice{cur}},
		Added:   &model.Cluster{Slices: []*model.EndpointSlice{&nx}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return prev, up.Map, up.Changed
}

// BenchmarkWriteWatch writes apply --watch's restore for one moved endpoint: against
// the ruleset it loaded and the map it loaded it from, kept in memory, "hint" with the
// Session's list of changed Services (what apply --watch does), "compare" without it
// (every Service compared, by pointer first). The output size is reported as "bytes".
func BenchmarkWriteWatch(b *testing.B) {
	for _, n := range benchdata.Sizes {
		prev, next, changed := moved(b, n)
		var text bytes.Buffer
		if err := iptables.Write(&text, prev, iptables.Options{Format: iptables.NoFlush}); err != nil {
			b.Fatal(err)
		}
		loaded, err := iptables.ParseBytes("loaded", text.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		loaded = iptables.WithJumps(loaded)
		for _, hint := range []bool{true, false} {
			name := benchdata.Name(n) + "/compare"
			opts := iptables.Options{Format: iptables.NoFlush, Previous: loaded, PreviousMap: prev, Minimal: true, EnsureJumps: true, MaxChains: 500}
			if hint {
				name, opts.Changed = benchdata.Name(n)+"/hint", changed
			}
			b.Run(name, func(b *testing.B) {
				var out bytes.Buffer
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					out.Reset()
					if err := iptables.Write(&out, next, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(out.Len()), "bytes")
			})
		}
	}
}

// BenchmarkWritePreviousMinimal is the command line's --previous --minimal for the
// same change: the previous ruleset parsed from text, then compared chain by chain.
func BenchmarkWritePreviousMinimal(b *testing.B) {
	for _, n := range benchdata.Sizes {
		prevMap, next, _ := moved(b, n)
		var text bytes.Buffer
		if err := iptables.Write(&text, prevMap, iptables.Options{}); err != nil {
			b.Fatal(err)
		}
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var out bytes.Buffer
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				prev, err := iptables.ParseBytes("previous", text.Bytes())
				if err != nil {
					b.Fatal(err)
				}
				out.Reset()
				if err := iptables.Write(&out, next, iptables.Options{Format: iptables.NoFlush, Previous: prev, Minimal: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "bytes")
		})
	}
}
