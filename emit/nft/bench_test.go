package nft

import (
	"bytes"
	"io"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
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

func benchWrite(b *testing.B, opts Options) {
	for _, n := range benchdata.Sizes {
		sm := generated(b, n, false)
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

// BenchmarkWrite streams the whole table (44 MB at 10k): go test -run - -bench . ./emit/nft
func BenchmarkWrite(b *testing.B)       { benchWrite(b, Options{}) }
func BenchmarkWriteStages(b *testing.B) { benchWrite(b, Options{Stages: true}) }

// BenchmarkWritePrevious is the command line's --previous for one moved endpoint: the
// previous script parsed, the new table built and compared, the partial sync written
// (its size reported as "bytes").
func BenchmarkWritePrevious(b *testing.B) {
	for _, n := range benchdata.Sizes {
		var text bytes.Buffer
		if err := Write(&text, generated(b, n, false), Options{}); err != nil {
			b.Fatal(err)
		}
		next := generated(b, n, true)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var out bytes.Buffer
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				prev, err := ParseBytes("previous", text.Bytes())
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

func BenchmarkParse(b *testing.B) {
	for _, n := range benchdata.Sizes {
		var script bytes.Buffer
		if err := Write(&script, generated(b, n, false), Options{}); err != nil {
			b.Fatal(err)
		}
		b.Run(benchdata.Name(n), func(b *testing.B) {
			b.SetBytes(int64(script.Len()))
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if _, err := ParseBytes("script", script.Bytes()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
