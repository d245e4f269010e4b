package syntax

import (
	"os"
	"path/filepath"
	"testing"
)

// A view keys a plain rule from its line on demand: the key is the one made from the
// rule, on every rule of the golden scripts.
func TestRuleLineKeyIsRuleKey(t *testing.T) {
	paths, err := filepath.Glob("../../golden/*/nftables*.nft")
	if err != nil || len(paths) < 50 {
		t.Fatalf("golden nft files: %d, %v", len(paths), err)
	}
	checked := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ParseBytes(p, data)
		if err != nil {
			continue // a partial sync's script
		}
		for _, st := range rs.Tables {
			f := newLineFormat(st.Family)
			for name, c := range st.Chains {
				for _, r := range c.Rules {
					if !plainRule(r) || r.Chain != name {
						continue
					}
					if got, want := f.ruleLineKey(f.line(Add, r)), name+" "+ruleKey(r); got != want {
						t.Errorf("%s: key of %q = %q, want %q", p, f.line(Add, r), got, want)
					}
					checked++
				}
			}
		}
	}
	if checked < 1000 {
		t.Errorf("only %d rules checked", checked)
	}
}
