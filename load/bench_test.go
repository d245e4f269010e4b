package load_test

import (
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/load"
)

// BenchmarkLoad reads generated clusters (10 endpoints a Service) from YAML as kubectl
// prints it and from a JSON List as "kubectl get -o json" prints it.
func BenchmarkLoad(b *testing.B) {
	for _, format := range []gen.Format{gen.YAML, gen.JSON} {
		for _, n := range benchdata.Sizes {
			data := benchdata.Manifests(b, n, format)
			b.Run(string(format)+"/"+benchdata.Name(n), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					l := &load.Loader{}
					l.Bytes("generated", data)
					if l.Errors.Len() > 0 {
						b.Fatal(l.Errors.Err())
					}
				}
			})
		}
	}
}
