package syntax

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// referenceSplit is splitWords as it was before quoted words were cut from the line:
// every quoted word copied, escapes undone.
func referenceSplit(l string) ([]string, error) {
	var words []string
	for i := 0; i < len(l); {
		switch {
		case l[i] == ' ' || l[i] == '\t':
			i++
		case l[i] == '"':
			var sb strings.Builder
			j := i + 1
			for ; j < len(l) && l[j] != '"'; j++ {
				if l[j] == '\\' && j+1 < len(l) {
					j++
				}
				sb.WriteByte(l[j])
			}
			if j >= len(l) {
				return nil, fmt.Errorf("unterminated quote in %q", l)
			}
			words = append(words, sb.String())
			i = j + 1
		default:
			j := i
			for j < len(l) && l[j] != ' ' && l[j] != '\t' {
				j++
			}
			words = append(words, l[i:j])
			i = j
		}
	}
	return words, nil
}

// The parser cuts rules and words from chunks: every rule of the golden files and of
// random text has the words the reference splitter gives, and a chain or a rule's
// words grown afterwards leave their neighbours alone.
func TestChunkedParseAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{" ", "  ", "\t", "-j", "X", `"a b"`, `"a\"b c"`, `"a\\b"`, `""`, `"x`, "-m comment --comment"}
	p := &parser{}
	for i := range 20000 {
		var b strings.Builder
		for range rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
			b.WriteByte(' ')
		}
		l := b.String()
		want, wantErr := referenceSplit(l)
		got, err := splitWords(l)
		got2, err2 := p.splitWords(l)
		if (err != nil) != (wantErr != nil) || (err2 != nil) != (wantErr != nil) || !slices.Equal(got, want) || !slices.Equal(got2, want) {
			t.Fatalf("line %d %q: words %q (%v) and %q (%v), the reference %q (%v)", i, l, got, err, got2, err2, want, wantErr)
		}
	}
	for name, rs := range goldenRulesets(t) {
		for _, tb := range rs.Tables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					if r.Raw == "" {
						continue
					}
					words, err := referenceSplit(r.Raw)
					if err != nil || words[1] != r.Chain || !slices.Equal(words[2:], r.Args) || cap(r.Args) != len(r.Args) {
						t.Fatalf("%s: rule %q has words %q (capacity %d), the reference %q", name, r.Raw, r.Args, cap(r.Args), words)
					}
				}
			}
		}
	}
	rs, err := ParseBytes("sample", []byte("*nat\n:A - [0:0]\n:B - [0:0]\n-A A -j X\n-A A -j Y\n-A B -j Z\n-A A -j W\nCOMMIT\n"))
	if err != nil {
		t.Fatal(err)
	}
	nat := rs.Table("nat")
	a, bc := nat.Chain("A"), nat.Chain("B")
	if len(a.Rules) != 3 || a.Rules[2].Args[1] != "W" || len(bc.Rules) != 1 {
		t.Fatalf("A %+v, B %+v", a.Rules, bc.Rules)
	}
	a.Rules[0].Args = append(a.Rules[0].Args, "--extra")
	a.Rules = append(a.Rules[:1], Rule{Chain: "A", Args: []string{"-j", "V"}})
	if bc.Rules[0].Args[1] != "Z" || a.Rules[1].Args[1] != "V" || len(a.Rules[0].Args) != 3 {
		t.Errorf("appending to A changed its neighbours: A %+v, B %+v", a.Rules, bc.Rules)
	}
	bc.Rules = append(bc.Rules, Rule{Chain: "B", Args: []string{"-j", "U"}})
	if a.Rules[1].Args[1] != "V" {
		t.Errorf("appending to B changed A: %+v", a.Rules)
	}
}

// A light parse gives the rules a parse gives, words read again from their lines:
// the golden files, and a text with inserted and deleted rules.
func TestParseLightAgreesWithParse(t *testing.T) {
	texts := map[string]string{"edits": "*nat\n:A - [0:0]\n-A A -j X\n-A A -m comment --comment \"a b\" -j Y\n-I A 1 -j Z\n-D A -j X\n-A A -j W\n-D A 2\nCOMMIT\n"}
	for _, glob := range []string{"../../golden/*/*.rules"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			texts[p] = string(data)
		}
	}
	for name, text := range texts {
		want, err := ParseBytes(name, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseLight(name, text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if full, err := ParseString(name, text); err != nil || !reflect.DeepEqual(full, want) {
			t.Errorf("%s: ParseString gives another ruleset than Parse (%v)", name, err)
		}
		if len(got.Tables) != len(want.Tables) {
			t.Fatalf("%s: %d tables, want %d", name, len(got.Tables), len(want.Tables))
		}
		for i, wt := range want.Tables {
			gt := got.Tables[i]
			if gt.Name != wt.Name || len(gt.Chains) != len(wt.Chains) || !slices.Equal(gt.Deleted, wt.Deleted) {
				t.Fatalf("%s: table %s: %d chains, want %d", name, gt.Name, len(gt.Chains), len(wt.Chains))
			}
			for j, wc := range wt.Chains {
				gc := gt.Chains[j]
				if gc.Name != wc.Name || gc.Policy != wc.Policy || gc.Declared != wc.Declared || len(gc.Rules) != len(wc.Rules) {
					t.Fatalf("%s: chain %+v, want %+v", name, gc, wc)
				}
				for k := range wc.Rules {
					g, w := &gc.Rules[k], &wc.Rules[k]
					if g.Raw != "" && g.Args != nil {
						t.Errorf("%s: rule %q kept its words", name, g.Raw)
					}
					if g.Raw != w.Raw || g.Chain != w.Chain || g.Line != w.Line || !slices.Equal(g.Words(), w.Args) {
						t.Errorf("%s: rule %q %q, want %q %q", name, g.Raw, g.Words(), w.Raw, w.Args)
					}
				}
			}
		}
	}
}
