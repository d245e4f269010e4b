package plan

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
)

// generated compiles the generated cluster of benchdata for nftables mode, as the
// command does; move changes one endpoint of one Service first.
func generated(b *testing.B, services int, move bool) *ir.ServiceMap {
	b.Helper()
	c := benchdata.Cluster(b, services)
	if move {
		c = benchdata.MoveEndpoint(c)
	}
	return testkit.CompileCluster(b, c, pipeline.Settings{Mode: compiler.NFTables}).Map
}

// BenchmarkWritePrevious is the command line's --previous for one moved endpoint: the
// previous script parsed, the new table built and compared, the partial sync written
// (its size reported as "bytes").
func BenchmarkWritePrevious(b *testing.B) {
	for _, n := range benchdata.Sizes {
		var text bytes.Buffer
		if err := rules.Write(&text, generated(b, n, false), rules.Options{}); err != nil {
			b.Fatal(err)
		}
		next := generated(b, n, true)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var out bytes.Buffer
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				prev, err := syntax.ParseBytes("previous", text.Bytes())
				if err != nil {
					b.Fatal(err)
				}
				out.Reset()
				if err := Write(&out, next, Options{Previous: prev}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "bytes")
		})
	}
}
