package rules_test

import (
	"io"
	"testing"

	"github.com/svcgen/svcgen/iptables/rules"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/benchdata"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
)

var benchOpts = compiler.Options{Mode: compiler.IPTables}

func serviceMap(b *testing.B, n int) *ir.ServiceMap {
	return testkit.CompileCluster(b, benchdata.Cluster(b, n), pipeline.Settings{Mode: compiler.IPTables}).Map
}

// BenchmarkWrite streams the complete ruleset (kube-proxy's --noflush payload plus the
// built-in chains and jumps).
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchdata.Sizes {
		sm := serviceMap(b, n)
		b.Run(benchdata.Name(n), func(b *testing.B) {
			var size benchdata.Counter
			rules.Write(&size, sm, rules.Options{})
			b.SetBytes(size.N)
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				if err := rules.Write(io.Discard, sm, rules.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
