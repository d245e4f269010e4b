package plan

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
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

// BenchmarkPartialWatch plans apply --watch's transaction for one moved endpoint (a
// Session's change) against the table loaded from the map before, held in memory:
// "hint" with the Session's list of changed Services (Since, what apply does; the key
// counts made once, outside the loop), "whole" without it (Partial: the wanted table
// compared with the held one, every Service). The transaction's size is reported as
// "bytes". "keys" counts the held table's element keys, as apply does once before
// the first hinted plan after a whole one.
func BenchmarkPartialWatch(b *testing.B) {
	for _, n := range benchdata.Sizes {
		prev, next, changed := moved(b, n)
		held := syntax.Of(rules.Build(prev))
		keys := NewKeys(rules.NewTable(prev))
		b.Run(benchdata.Name(n)+"/keys", func(b *testing.B) {
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				NewKeys(rules.NewTable(prev))
			}
		})
		for _, hint := range []bool{true, false} {
			name := benchdata.Name(n) + "/whole"
			if hint {
				name = benchdata.Name(n) + "/hint"
			}
			b.Run(name, func(b *testing.B) {
				var size int
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					var c *Change
					if hint {
						var ok bool
						if c, ok = Since(prev, keys, next, changed, true); !ok {
							b.Skipf("Since declined a moved endpoint (%d map keys written twice)", keys.shared)
						}
					} else {
						c = Partial(rules.NewTable(next), Options{Previous: held, Minimal: true})
					}
					txs, err := c.Transactions(Load{MarkCommits: true})
					if err != nil || len(txs) != 1 {
						b.Fatalf("%d transactions, %v", len(txs), err)
					}
					size = len(txs[0].Text)
				}
				b.ReportMetric(float64(size), "bytes")
			})
		}
	}
}

// moved is a cluster of n Services compiled by a Session, before and after one
// endpoint moved, and the Services the Session says changed.
func moved(b *testing.B, n int) (prev, next *ir.ServiceMap, changed []string) {
	c := benchdata.Cluster(b, n)
	sess, _, err := compiler.NewSession(c, compiler.ResolveOptions{}, compiler.Options{Mode: compiler.NFTables})
	if err != nil {
		b.Fatal(err)
	}
	cur := c.Slices[len(c.Slices)/2]
	nx := *cur
	nx.Endpoints = slices.Clone(cur.Endpoints)
	nx.Endpoints[0].Addresses = []netip.Addr{netip.MustParseAddr("10.99.0.1")}
	prev = sess.Maps()[0]
	up, err := sess.Apply(compiler.Change{
		Removed: &model.Cluster{Slices: []*model.EndpointSlice{cur}},
		Added:   &model.Cluster{Slices: []*model.EndpointSlice{&nx}},
	})
	if err != nil || up.All {
		b.Fatal(err, up.All)
	}
	return prev, up.Maps[0], up.Changed
}
