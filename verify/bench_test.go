package verify

import (
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
)

// BenchmarkVerify verifies a generated cluster (svcgen gen, 10 endpoints a Service)
// in each mode, at every benchmark size: Check, which writes the mode's rules, reads
// them back and traces every probe.
func BenchmarkVerify(b *testing.B) {
	for _, n := range benchdata.Sizes {
		res := testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{})
		c := res.Resolved.Cluster
		for _, m := range Modes() {
			b.Run(benchdata.Name(n)+"/"+string(m), func(b *testing.B) {
				sm, err := compiler.Compile(c, compiler.Options{Mode: m, Release: res.Map.Target.Release, Gates: res.Map.Target.Gates})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				defer benchdata.CPU(b)()
				for i := 0; i < b.N; i++ {
					mr, err := CheckMode(m, sm, c)
					if err != nil || len(mr.Disagreements) > 0 {
						b.Fatal(err, mr.Disagreements)
					}
				}
			})
		}
	}
}
