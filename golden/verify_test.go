package golden

import (
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/verify"
)

// runVerify checks that the case's iptables rules implement its service map for every
// frontend and every kind of source (svcgen verify), beyond the flows upstream lists.
func runVerify(t *testing.T, res *pipeline.Result) {
	t.Helper()
	mr, err := verify.CheckMode(compiler.IPTables, res.Map, res.Resolved.Cluster)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	t.Logf("verify: %d frontends %d probes %v", mr.Frontends, mr.Probes, mr.Applied)
	if len(mr.Disagreements) > 0 {
		var b strings.Builder
		for _, d := range mr.Disagreements {
			b.WriteString(d.String())
		}
		t.Errorf("verify: %d of %d probes disagree:\n%s", len(mr.Disagreements), mr.Probes, b.String())
	}
}
