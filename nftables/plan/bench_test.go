package plan

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

// BenchmarkPrevious is the command line's --previous for one moved endpoint of the
// generated cluster of each size of benchdata: "parse" reads the previous script back
// (syntax.Parse); "sync" parses it too, then plans the new table against it and
// writes the partial sync (its size reported as "bytes"). go test -run - -bench .
// ./nftables/plan
func BenchmarkPrevious(b *testing.B) {
	settings := pipeline.Settings{Mode: compiler.NFTables}
	for _, n := range benchdata.Sizes {
		c := benchdata.Cluster(b, n)
		var text, out bytes.Buffer
		if err := rules.Write(&text, testkit.CompileCluster(b, c, settings).Map, rules.Options{}); err != nil {
			b.Fatal(err)
		}
		next := testkit.CompileCluster(b, benchdata.MoveEndpoint(c), settings).Map
		sync := func(prev *syntax.Ruleset) error {
			out.Reset()
			return Write(&out, next, Options{Previous: prev})
		}
		for _, step := range []string{"parse", "sync"} {
			b.Run(step+"/"+benchdata.Name(n), func(b *testing.B) {
				b.SetBytes(int64(text.Len()))
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					prev, err := syntax.ParseBytes("previous", text.Bytes())
					if err == nil && step == "sync" {
						err = sync(prev)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if step == "sync" {
					b.ReportMetric(float64(out.Len()), "bytes")
				}
			})
		}
	}
}
