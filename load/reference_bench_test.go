package load_test

import (
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/load"
)

// The loader with yaml.v3 alone, the reference reader, against the fast reader: the
// whole load, manifests to model, on the generated clusters. These figures are the
// case for fast.go (BENCHMARKS.md; load/alternatives measures other libraries):
//
//	go test -run - -bench 'Reader' ./load
func BenchmarkReader(b *testing.B) {
	for _, format := range []gen.Format{gen.YAML, gen.JSON} {
		for _, n := range benchdata.Sizes {
			src := string(benchdata.Manifests(b, n, format))
			for _, r := range []struct {
				name string
				load func(l *load.Loader)
			}{
				{"fast", func(l *load.Loader) { l.Text("generated", src) }},
				{"fast-one-core", func(l *load.Loader) {
					if !load.FastOneCore(l, "generated", src) {
						b.Fatal("the fast reader gave up")
					}
				}},
				{"yaml.v3", func(l *load.Loader) { load.Slow(l, "generated", src) }},
				{"yaml.v3-every-core", func(l *load.Loader) { load.SlowPieces(l, "generated", src) }},
			} {
				b.Run(string(format)+"/"+benchdata.Name(n)+"/"+r.name, func(b *testing.B) {
					b.SetBytes(int64(len(src)))
					b.ReportAllocs()
					defer benchdata.CPU(b)()
					for b.Loop() {
						l := &load.Loader{}
						r.load(l)
						if l.Errors.Len() > 0 || len(l.Cluster.Services) != n {
							b.Fatalf("%d services, errors: %v", len(l.Cluster.Services), l.Errors.Err())
						}
					}
				})
			}
		}
	}
}
