package plan_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/iptables/plan"
	"github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

var benchOpts = compiler.Options{Mode: compiler.IPTables}

// moved is sm after one endpoint of one Service moved, through a Session.
func moved(b *testing.B, n int) (prev, next *ir.ServiceMap, changed []string) {
	c := benchdata.Cluster(b, n)
	sess, _, err := compiler.NewSession(c, compiler.ResolveOptions{}, benchOpts)
	if err != nil {
		b.Fatal(err)
	}
	cur := c.Slices[len(c.Slices)/2]
	nx := *cur
	nx.Endpoints = append([]model.Endpoint(nil), cur.Endpoints...)
	nx.Endpoints[0].Addresses = []netip.Addr{netip.MustParseAddr("10.99.0.1")}
	prev = sess.Maps()[0]
	up, err := sess.Apply(compiler.Change{
		Removed: &model.Cluster{Slices: []*model.EndpointSlice{cur}},
		Added:   &model.Cluster{Slices: []*model.EndpointSlice{&nx}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return prev, up.Maps[0], up.Changed
}

// BenchmarkPartialWatch writes apply --watch's restore for one moved endpoint: against
// the ruleset it loaded and the map it loaded it from, kept in memory, "hint" with the
// Session's list of changed Services (what apply --watch does), "compare" without it
// (every Service compared, by pointer first). The output size is reported as "bytes".
func BenchmarkPartialWatch(b *testing.B) {
	for _, n := range benchdata.Sizes {
		prev, next, changed := moved(b, n)
		var text bytes.Buffer
		if err := rules.Write(&text, prev, rules.Options{Format: rules.NoFlush}); err != nil {
			b.Fatal(err)
		}
		loaded, err := syntax.ParseBytes("loaded", text.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		loaded = syntax.WithJumps(loaded)
		for _, hint := range []bool{true, false} {
			name := benchdata.Name(n) + "/compare"
			opts := plan.Options{Previous: loaded, PreviousMap: prev, Minimal: true, EnsureJumps: true}
			if hint {
				name, opts.Changed = benchdata.Name(n)+"/hint", changed
			}
			b.Run(name, func(b *testing.B) {
				var out bytes.Buffer
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					out.Reset()
					c, err := plan.Partial(next, opts)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Write(&out, plan.Blocks{MaxChains: 500, MarkCommits: true}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(out.Len()), "bytes")
			})
		}
	}
}

// BenchmarkPartialPreviousMinimal is the command line's --previous --minimal for the
// same change: the previous ruleset parsed from text, then compared chain by chain.
func BenchmarkPartialPreviousMinimal(b *testing.B) {
	for _, n := range benchdata.Sizes {
		prevMap, next, _ := moved(b, n)
		var text bytes.Buffer
		if err := rules.Write(&text, prevMap, rules.Options{}); err != nil {
			b.Fatal(err)
		}
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
				if err := plan.Write(&out, next, plan.Options{Previous: prev, Minimal: true}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "bytes")
		})
	}
}
