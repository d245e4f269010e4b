package rules

import (
	"io"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
)

// benchWrite streams the table of the generated cluster of each size of benchdata,
// compiled as the command compiles it.
func benchWrite(b *testing.B, opts Options) {
	for _, n := range benchdata.Sizes {
		sm := testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{Mode: compiler.NFTables}).Map
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var size benchdata.Counter
			if err := Write(&size, sm, opts); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size.N)
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if err := Write(io.Discard, sm, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWrite streams the whole table (44 MB at 10k): go test -run - -bench . ./nftables/rules
func BenchmarkWrite(b *testing.B)       { benchWrite(b, Options{}) }
func BenchmarkWriteStages(b *testing.B) { benchWrite(b, Options{Stages: true}) }
