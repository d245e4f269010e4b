package rules

import (
	"io"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
)

// generated compiles the generated cluster of benchdata for ipvs mode, as the command
// does.
func generated(b *testing.B, services int) *ir.ServiceMap {
	b.Helper()
	return testkit.CompileCluster(b, benchdata.Cluster(b, services), pipeline.Settings{Mode: compiler.IPVS}).Map
}

// BenchmarkScript measures Build and WriteScript, what "compile -m ipvs" does after
// the compile: go test -run - -bench Script ./ipvs/rules
func BenchmarkScript(b *testing.B) {
	for _, n := range benchdata.Sizes {
		sm := generated(b, n)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var size benchdata.Counter
			if err := syntax.WriteScript(&size, Build(sm), syntax.Header{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size.N)
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if err := syntax.WriteScript(io.Discard, Build(sm), syntax.Header{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
