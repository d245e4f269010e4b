package syntax_test

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
)

// BenchmarkParse reads svcgen's whole script of the generated cluster back.
func BenchmarkParse(b *testing.B) {
	for _, n := range benchdata.Sizes {
		var script bytes.Buffer
		sm := testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{Mode: compiler.NFTables}).Map
		if err := rules.Write(&script, sm, rules.Options{}); err != nil {
			b.Fatal(err)
		}
		b.Run(benchdata.Name(n), func(b *testing.B) {
			b.SetBytes(int64(script.Len()))
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if _, err := syntax.ParseBytes("script", script.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
