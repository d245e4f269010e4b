package compiler_test

import (
	"net/netip"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/model"
)

var benchOpts = compiler.Options{Mode: compiler.IPTables}

func BenchmarkResolve(b *testing.B) {
	for _, n := range benchdata.Sizes {
		c := benchdata.Cluster(b, n)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if _, err := compiler.Resolve(c, compiler.ResolveOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, n := range benchdata.Sizes {
		res, err := compiler.Resolve(benchdata.Cluster(b, n), compiler.ResolveOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(benchdata.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if _, err := compiler.Compile(res.Cluster, benchOpts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSessionOneEndpoint is apply --watch's step: one endpoint of one Service
// moves, and the Session recompiles (the emitter's part is emit/iptables' BenchmarkWriteWatch).
func BenchmarkSessionOneEndpoint(b *testing.B) {
	for _, n := range benchdata.Sizes {
		c := benchdata.Cluster(b, n)
		sess, _, err := compiler.NewSession(c, compiler.ResolveOptions{}, benchOpts)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(benchdata.Name(n), func(b *testing.B) {
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			cur := c.Slices[len(c.Slices)/2]
			i := 0
			for b.Loop() {
				next := *cur
				next.Endpoints = append([]model.Endpoint(nil), cur.Endpoints...)
				i++
				next.Endpoints[0].Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)})}
				up, err := sess.Apply(compiler.Change{
					Removed: &model.Cluster{Slices: []*model.EndpointSlice{cur}},
					Added:   &model.Cluster{Slices: []*model.EndpointSlice{&next}},
				})
				if err != nil || up.All || len(up.Changed) != 1 {
					b.Fatalf("update %+v, %v", up, err)
				}
				cur = &next
			}
		})
	}
}
