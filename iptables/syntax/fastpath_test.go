package syntax

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenRulesets are the iptables rules files of the golden cases, svcgen's and
// upstream's.
func goldenRulesets(t *testing.T) map[string]*Ruleset {
	t.Helper()
	var paths []string
	for _, glob := range []string{"../../golden/*/*.rules", "../../golden/*/upstream.iptables"} {
		p, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	if len(paths) < 100 {
		t.Fatalf("only %d golden rules files", len(paths))
	}
	out := map[string]*Ruleset{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ParseBytes(p, data)
		if err != nil {
			continue // upstream's expectations are not all restore input
		}
		out[p] = rs
	}
	return out
}

// Text takes a rule's line as read when the writer would spell it so: it agrees with
// the writer on every rule of the golden files and on random lines of every spelling.
func TestTextAsReadAgreesWithWriter(t *testing.T) {
	check := func(where string, r Rule) {
		t.Helper()
		want := r.built()
		if got := r.Text(); got != want {
			t.Errorf("%s: Text of %q = %q, the writer says %q", where, r.Raw, got, want)
		}
		if asRaw := r.spelledAsRaw(); asRaw != (r.Raw == want) {
			t.Errorf("%s: spelledAsRaw(%q) = %v, the writer says %q", where, r.Raw, asRaw, want)
		}
	}
	fast := 0
	for name, rs := range goldenRulesets(t) {
		for _, tb := range rs.Tables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					check(name, r)
					if r.spelledAsRaw() {
						fast++
					}
				}
			}
		}
	}
	if fast == 0 {
		t.Error("no golden rule is spelled as the writer spells it")
	}
	words := []string{"-m", "comment", "--comment", `"a b"`, `"ab"`, "ab", `"a\"b c"`, `"x\\y z"`, `""`,
		"-j", "KUBE-SVC-X", "-d", "10.0.0.1/32", "  ", "\t", "--append", "-A", "C", `"a`}
	rng := rand.New(rand.NewPCG(1, 2))
	asRead := map[bool]int{}
	for i := range 20000 {
		var b strings.Builder
		b.WriteString([]string{"-A C", "-A  C", "--append C", "-A C2"}[rng.IntN(4)])
		for range rng.IntN(8) {
			b.WriteString([]string{" ", "  ", "\t"}[rng.IntN(3)])
			if rng.IntN(3) == 0 {
				b.WriteString("-m comment --comment ")
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		line := strings.TrimSpace(b.String())
		r, err := ParseRuleLine(line)
		if err != nil {
			continue
		}
		check(fmt.Sprintf("random line %d", i), r)
		asRead[r.spelledAsRaw()]++
	}
	if asRead[true] < 1000 || asRead[false] < 1000 {
		t.Errorf("random lines spelled as the writer spells them: %v; want both kinds", asRead)
	}
}
