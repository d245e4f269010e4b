package syntax

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/knftables"
)

// A small table: chains a (jumps to b) and b, a set s that a names, a verdict map m
// whose element goes to c.
const base = `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy a
add chain ip kube-proxy b
add chain ip kube-proxy c
add set ip kube-proxy s { type ipv4_addr ; }
add map ip kube-proxy m { type ipv4_addr . inet_proto . inet_service : verdict ; }
add rule ip kube-proxy a ip saddr @s jump b
add rule ip kube-proxy b ip daddr . meta l4proto . th dport vmap @m
add element ip kube-proxy s { 10.0.0.1 }
add element ip kube-proxy m { 10.0.0.2 . tcp . 80 : goto c }
`

// dumpOf is a ruleset's IPv4 table as "add" lines ("" when there is none).
func dumpOf(t *testing.T, rs *Ruleset) string {
	t.Helper()
	st := rs.Tables[knftables.IPv4Family]
	if st == nil {
		return ""
	}
	var b bytes.Buffer
	if err := WriteState(&b, st); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func baseRuleset(t *testing.T) *Ruleset {
	t.Helper()
	rs := &Ruleset{}
	if _, err := rs.Run(base); err != nil {
		t.Fatal(err)
	}
	return rs
}

// Run refuses what nf_tables refuses, with the errno nft reports, naming the line; the
// ruleset stays as it was, whatever the transaction did before the refused line.
func TestRunRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		errno        syscall.Errno
	}{
		{"a rule names a missing chain", "add rule ip kube-proxy a goto d\n", syscall.ENOENT},
		{"a rule names a missing set", "add rule ip kube-proxy a ip saddr @t drop\n", syscall.ENOENT},
		{"a rule names a missing map", "add rule ip kube-proxy a ip daddr vmap @s\n", syscall.ENOENT},
		{"a rule in a missing chain", "add rule ip kube-proxy d drop\n", syscall.ENOENT},
		{"a chain a rule jumps to", "delete chain ip kube-proxy b\n", syscall.EBUSY},
		{"a chain a map element goes to", "delete chain ip kube-proxy c\n", syscall.EBUSY},
		{"a set a rule names", "delete set ip kube-proxy s\n", syscall.EBUSY},
		{"a map a rule names", "delete map ip kube-proxy m\n", syscall.EBUSY},
		{"an element of a missing map", "add element ip kube-proxy n { 10.0.0.3 . tcp . 80 : drop }\n", syscall.ENOENT},
		{"an element going to a missing chain", "add element ip kube-proxy m { 10.0.0.3 . tcp . 80 : goto d }\n", syscall.ENOENT},
		{"a key there with another value", "add element ip kube-proxy m { 10.0.0.2 . tcp . 80 : drop }\n", syscall.EEXIST},
		{"a missing element", "delete element ip kube-proxy s { 10.0.0.9 }\n", syscall.ENOENT},
		{"a missing chain deleted", "delete chain ip kube-proxy d\n", syscall.ENOENT},
		{"a missing chain flushed", "flush chain ip kube-proxy d\n", syscall.ENOENT},
		{"a missing set flushed", "flush set ip kube-proxy t\n", syscall.ENOENT},
		{"a missing table", "delete table ip kube-proxy\ndelete table ip kube-proxy\n", syscall.ENOENT},
		{"a chain of a missing table", "delete table ip kube-proxy\nadd chain ip kube-proxy a\n", syscall.ENOENT},
		{"a rule after its chain is deleted", "flush chain ip kube-proxy a\ndelete chain ip kube-proxy a\nadd rule ip kube-proxy a drop\n", syscall.ENOENT},
	} {
		rs := baseRuleset(t)
		before := dumpOf(t, rs)
		// Each refused line comes after a change that would otherwise stay.
		script := "add chain ip kube-proxy new\nadd rule ip kube-proxy a drop\n" + tc.script
		_, err := rs.Run(script)
		var refused *Refused
		var line *LineError
		if !errors.As(err, &refused) || refused.Errno != tc.errno || !errors.As(err, &line) || line.Line != strings.Count(script, "\n") {
			t.Errorf("%s: %v, want errno %v on the last line", tc.name, err, tc.errno)
		}
		if after := dumpOf(t, rs); after != before {
			t.Errorf("%s: the refused transaction changed the ruleset:\n%s\nwas\n%s", tc.name, after, before)
		}
	}
}

// What the kernel accepts: a chain no longer named can go; adding a table, chain,
// set, map or element that is there changes nothing; a changed value is a delete and an add; "delete chain" takes the
// chain's rules; "flush table" empties chains and keeps everything else.
func TestRunAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		has, hasNot  []string
		sameAsBase   bool
	}{
		{name: "a chain once nothing jumps to it", script: "flush chain ip kube-proxy a\ndelete chain ip kube-proxy b\n",
			hasNot: []string{"chain ip kube-proxy b\n", "rule ip kube-proxy b "}},
		{name: "a chain once the map element is deleted", script: "delete element ip kube-proxy m { 10.0.0.2 . tcp . 80 }\ndelete chain ip kube-proxy c\n",
			hasNot: []string{"chain ip kube-proxy c\n", "10.0.0.2"}},
		{name: "a set once no rule names it", script: "flush chain ip kube-proxy a\ndelete set ip kube-proxy s\n",
			hasNot: []string{"set ip kube-proxy s", "10.0.0.1"}},
		{name: "what is there, again (but rules, which are always new)", script: noRules(base), sameAsBase: true},
		{name: "a value changed", script: "delete element ip kube-proxy m { 10.0.0.2 . tcp . 80 }\nadd element ip kube-proxy m { 10.0.0.2 . tcp . 80 : drop }\n",
			has: []string{"add element ip kube-proxy m { 10.0.0.2 . tcp . 80 : drop }\n"}, hasNot: []string{"goto c"}},
		{name: "flush table", script: "flush table ip kube-proxy\n",
			has: []string{"add chain ip kube-proxy a\n", "add set ip kube-proxy s", "add element ip kube-proxy s { 10.0.0.1 }"}, hasNot: []string{"add rule"}},
		{name: "a rule after index 0", script: "add rule ip kube-proxy a drop\nadd rule ip kube-proxy a index 0 accept\n",
			has: []string{"add rule ip kube-proxy a ip saddr @s jump b\nadd rule ip kube-proxy a accept\nadd rule ip kube-proxy a drop\n"}},
	} {
		rs := baseRuleset(t)
		if _, err := rs.Run(tc.script); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := dumpOf(t, rs)
		if tc.sameAsBase && got != dumpOf(t, baseRuleset(t)) {
			t.Errorf("%s: the table changed:\n%s", tc.name, got)
		}
		for _, s := range tc.has {
			if !strings.Contains(got, s) {
				t.Errorf("%s: lacks %q:\n%s", tc.name, s, got)
			}
		}
		for _, s := range tc.hasNot {
			if strings.Contains(got, s) {
				t.Errorf("%s: has %q:\n%s", tc.name, s, got)
			}
		}
	}
}

// noRules is a script without its rule lines.
func noRules(script string) string {
	var b strings.Builder
	for l := range strings.Lines(script) {
		if !strings.HasPrefix(l, "add rule ") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// Parse applies a script as Run does: a script nft would refuse does not parse.
func TestParseRefusesWhatRunRefuses(t *testing.T) {
	if _, err := ParseBytes("script", []byte(base+"delete chain ip kube-proxy b\n")); err == nil || !strings.Contains(err.Error(), "line 11: ") {
		t.Errorf("deleting a chain a rule jumps to: %v", err)
	}
	if _, err := ParseBytes("script", []byte(base)); err != nil {
		t.Error(err)
	}
}

// A transaction commits (moves nf_tables' generation) only when it changes something:
// adding what is there, or flushing what is empty, changes nothing; the commit mark
// always does.
func TestRunCommits(t *testing.T) {
	for script, want := range map[string]bool{
		noRules(base):                                false,
		"flush chain ip kube-proxy c\n":              false,
		"flush set ip kube-proxy s\n":                true,
		"add rule ip kube-proxy c accept\n":          true,
		"add element ip kube-proxy s { 10.0.0.1 }\n": false,
		"add element ip kube-proxy s { 10.0.0.1 }\n" + "add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n": true,
	} {
		rs := baseRuleset(t)
		if got, err := rs.Run(script); err != nil || got != want {
			t.Errorf("%q: commits %v, %v; want %v", script, got, err, want)
		}
	}
}
