package verify

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
)

// BenchmarkVerify1k verifies a generated cluster of 1,000 Services with 10 endpoints
// each (svcgen gen), every mode.
func BenchmarkVerify1k(b *testing.B) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 1000, Endpoints: 10}); err != nil {
		b.Fatal(err)
	}
	res := testkit.Compile(b, "gen.yaml", buf.String(), pipeline.Settings{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Run(res.Resolved.Cluster, Options{})
		if err != nil || !r.OK() {
			b.Fatal(err)
		}
	}
}
