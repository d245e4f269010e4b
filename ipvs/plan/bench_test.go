package plan

import (
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ipvs/rules"
)

// BenchmarkPlan measures what apply -m ipvs plans at each sync of a generated
// cluster: loading it on an empty node, and the next sync, on the node it left
// (nothing to do, every virtual and real server compared):
// go test -run - -bench Plan ./ipvs/plan
func BenchmarkPlan(b *testing.B) {
	for _, n := range benchdata.Sizes {
		want := rules.Build(testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{Mode: compiler.IPVS}).Map)
		first, err := Plan(&Have{}, want, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			have *Have
		}{{"empty", &Have{}}, {"in-step", first.After}} {
			b.Run(benchdata.Name(n)+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					if _, err := Plan(c.have, want, Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
