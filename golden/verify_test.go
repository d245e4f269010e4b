package golden

import (
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/verify"
)

// runVerify checks that the case's rules in every mode verify knows implement its
// service map for every frontend and every kind of source (svcgen verify), beyond the
// flows upstream lists.
func runVerify(t *testing.T, res *pipeline.Result) {
	t.Helper()
	for _, m := range verify.Modes() {
		sm, err := compiler.Compile(res.Resolved.Cluster, compiler.Options{Mode: m})
		if err != nil {
			t.Fatalf("compiling for %s: %v", m, err)
		}
		mr, err := verifyMode(m, sm, res)
		if err != nil {
			t.Fatalf("verify %s: %v", m, err)
		}
		t.Logf("verify %s: %d frontends %d probes %v", m, mr.Frontends, mr.Probes, mr.Applied)
		if len(mr.Disagreements) > 0 {
			var b strings.Builder
			for _, d := range mr.Disagreements {
				b.WriteString(d.String())
			}
			t.Errorf("verify %s: %d of %d probes disagree:\n%s", m, len(mr.Disagreements), mr.Probes, b.String())
		}
	}
}

func verifyMode(m compiler.Mode, sm *ir.ServiceMap, res *pipeline.Result) (*verify.ModeReport, error) {
	return verify.CheckMode(m, sm, res.Resolved.Cluster)
}
