package golden

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/modes"
)

// modeExt is the extension of each mode's expected files.
var modeExt = map[string]string{"iptables": ".rules", "ipvs": ".sh", "nftables": ".nft"}

// runDualCase checks a case whose input gives a dual-stack run: in every mode, what
// compile -o writes for it (nftables: one script with both tables, "nftables.nft";
// iptables and ipvs: an output per family, "iptables.v4.rules", "iptables.v6.rules")
// byte for byte, the same bytes with the documents reversed, and every family's rules
// verified against its service map.
func runDualCase(t *testing.T, c goldenCase) {
	for _, m := range modes.All() {
		t.Run(m.Name, func(t *testing.T) {
			res := compileCaseMode(t, c, false, compiler.Mode(m.Name))
			again := compileCaseMode(t, c, true, compiler.Mode(m.Name))
			for i, out := range dualOutputs(m, res.Maps) {
				file := m.Name + modeExt[m.Name]
				if !m.OneScript() {
					file = m.Name + "." + out[0].Family.Suffix() + modeExt[m.Name]
				}
				got := writeMaps(t, m, out)
				testkit.CompareGolden(t, c.file(file), got, *update)
				if rev := writeMaps(t, m, dualOutputs(m, again.Maps)[i]); !bytes.Equal(rev, got) {
					t.Errorf("%s: documents in reverse order give other bytes:\n%s", file, lineDiff("forward", got, "reversed", rev))
				}
			}
			for _, sm := range res.Maps {
				verifyMap(t, compiler.Mode(m.Name), sm, res)
			}
		})
	}
}

// dualOutputs groups a run's maps as compile writes them: all in one output, or one
// output per family.
func dualOutputs(m modes.Mode, maps []*ir.ServiceMap) [][]*ir.ServiceMap {
	if m.OneScript() {
		return [][]*ir.ServiceMap{maps}
	}
	var out [][]*ir.ServiceMap
	for i := range maps {
		out = append(out, maps[i:i+1])
	}
	return out
}

func writeMaps(t *testing.T, m modes.Mode, maps []*ir.ServiceMap) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteAll(&b, maps, modes.Options{}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// verifyMap is runVerify for one family's map in one mode.
func verifyMap(t *testing.T, m compiler.Mode, sm *ir.ServiceMap, res *pipeline.Result) {
	t.Helper()
	mr, err := verifyMode(m, sm, res)
	if err != nil {
		t.Fatalf("verify %s (%s): %v", m, sm.Family, err)
	}
	if mr.Probes == 0 {
		t.Errorf("verify %s (%s): no probes", m, sm.Family)
	}
	for _, d := range mr.Disagreements {
		t.Errorf("verify %s (%s): %s", m, sm.Family, d.String())
	}
}
