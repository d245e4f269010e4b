package syntax_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/internal/nfttest"
	"github.com/svcgen/svcgen/nftables/plan"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/trace"
	"sigs.k8s.io/knftables"
)

// The syntax read back from what svcgen writes: its scripts (whole, staged, partial)
// and nft's listing of them.

func script(t *testing.T, sm *ir.ServiceMap, opts rules.Options) []byte {
	t.Helper()
	return nfttest.Text(t, func(w io.Writer) error { return rules.Write(w, sm, opts) })
}

// listings are, by kube-proxy release, testdata/examples-<release>.list: "nft list
// ruleset" of a namespace where the script of ../../examples for that release was
// loaded (nft 1.0.6; v1.36's table is v1.37's for the examples).
var listings = []string{"1.35", "1.37"}

// examplesListing is a release's listing, read back from its file.
func examplesListing(t *testing.T, version string) *syntax.State {
	t.Helper()
	f, err := os.Open("testdata/examples-" + version + ".list")
	if err == nil {
		defer f.Close()
		var rs *syntax.Ruleset
		if rs, err = syntax.Parse(f.Name(), f); err == nil {
			return rs.Tables[knftables.IPv4Family]
		}
	}
	t.Fatal(err)
	return nil
}

// Each listing reads back in knftables' spelling, except what Canonical undoes.
func TestListingSpelledAsWritten(t *testing.T) {
	for _, v := range listings {
		got := examplesListing(t, v)
		want := rules.Build(nfttest.ExamplesFor(t, v))
		if len(got.Chains) != len(want.Chains) {
			t.Errorf("%s: %d chains listed, %d written", v, len(got.Chains), len(want.Chains))
		}
		for name, c := range want.Chains {
			if got.Chains[name] == nil || len(got.Chains[name].Rules) != len(c.Rules) {
				t.Errorf("%s: chain %s listed with other rules", v, name)
				continue
			}
			for i, r := range c.Rules {
				g := got.Chains[name].Rules[i]
				if g.Rule != r.Rule && syntax.Canonical(g.Rule) != syntax.Canonical(r.Rule) {
					t.Errorf("%s: chain %s rule %d: listed %q, written %q", v, name, i, g.Rule, r.Rule)
				}
			}
		}
	}
	got, want := examplesListing(t, "1.35"), rules.Build(nfttest.ExamplesFor(t, "1.35"))
	if got.Chains[syntax.MarkMasqChain].Rules[0].Rule != want.Chains[syntax.MarkMasqChain].Rules[0].Rule {
		t.Errorf("mark rule read back as %q", got.Chains[syntax.MarkMasqChain].Rules[0].Rule)
	}
}

// svcgen's scripts (whole, staged, a partial sync on top of a whole one, a large
// generated one) read as knftables' Fake reads them.
func TestScriptsAsKnftables(t *testing.T) {
	sm := nfttest.Examples(t)
	genMap := nfttest.Compile(t, testkit.GenYAML(t, gen.Options{Services: 300, Endpoints: 3}))
	big := script(t, genMap, rules.Options{})
	prev, err := syntax.ParseBytes("before", big)
	if err != nil {
		t.Fatal(err)
	}
	// The next state deletes every 7th Service and moves an endpoint of every 3rd.
	var partial bytes.Buffer
	if err := plan.Write(&partial, testkit.Without(genMap, 7, 3), plan.Options{Previous: prev}); err != nil {
		t.Fatal(err)
	}
	if partial.Len() == 0 || bytes.Contains(partial.Bytes(), []byte("delete table")) {
		t.Fatalf("want a partial sync, got:\n%s", partial.Bytes())
	}
	for name, text := range map[string]string{
		"whole":     string(script(t, sm, rules.Options{})),
		"staged":    string(script(t, sm, rules.Options{Stages: true})),
		"partial":   string(big) + partial.String(),
		"generated": string(big),
	} {
		want, err := syntax.KnftablesRun(text)
		if err != nil {
			t.Fatalf("%s: knftables: %v", name, err)
		}
		rs, err := syntax.ParseBytes(name, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := syntax.WriteState(&got, rs.Tables[knftables.IPv4Family]); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("%s: read as\n%s\nknftables reads\n%s", name, got.String(), want)
		}
	}
}

// tables are svcgen's tables of the examples, of random clusters of both families,
// and of every golden case's whole script.
func tables(t *testing.T) map[string]*syntax.State {
	t.Helper()
	out := map[string]*syntax.State{"examples": rules.Build(nfttest.Examples(t))}
	for seed := uint64(1); seed <= 30; seed++ {
		for _, v6 := range []bool{false, true} {
			sm := nfttest.Compile(t, string(randcluster.Generate(seed, randcluster.Options{IPv6: v6})))
			out[fmt.Sprintf("seed %d (IPv6 %v)", seed, v6)] = rules.Build(sm)
		}
	}
	paths, _ := filepath.Glob("../../golden/*/nftables.nft")
	if len(paths) < 40 {
		t.Fatalf("found only %d golden nftables.nft files", len(paths))
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err == nil && !bytes.HasPrefix(data, []byte("add table ")) {
			continue // a partial sync: it needs the table before it
		}
		var rs *syntax.Ruleset
		if err == nil {
			rs, err = syntax.ParseBytes(p, data)
		}
		if err != nil {
			t.Fatal(err)
		}
		for family, st := range rs.Tables {
			out[p+" "+string(family)] = st
		}
	}
	return out
}

// Round trip: every rule svcgen writes parses into a meaning (syntax.ParseRule) that
// names only objects of its table, as the lexer finds them too, and that the tracer
// takes: a table of them is one it can trace.
func TestWrittenRulesParse(t *testing.T) {
	for name, st := range tables(t) {
		for chain, c := range st.Chains {
			for _, r := range c.Rules {
				meaning, err := syntax.ParseRule(r.Rule, st.Family)
				if err != nil {
					t.Errorf("%s: chain %s: %v", name, chain, err)
					continue
				}
				for _, ref := range meaning.Refs() {
					if !exists(st, ref) {
						t.Errorf("%s: chain %s: %q names %s %s, which the table lacks", name, chain, r.Rule, ref.Kind, ref.Name)
					}
				}
			}
		}
		if _, err := trace.NewNFT(st, trace.Host{}); err != nil {
			t.Errorf("%s: the tracer refuses the table: %v", name, err)
		}
	}
}

func exists(st *syntax.State, ref syntax.Ref) bool {
	switch ref.Kind {
	case syntax.RefChain:
		return st.Chains[ref.Name] != nil
	case syntax.RefMap:
		return st.Maps[ref.Name] != nil
	}
	return st.Container(ref.Name) != nil
}

// listedRules are the rules of a release's listing as nft printed them, by chain,
// comments off: what the listing parser reads before it respells them.
func listedRules(t *testing.T, version string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("testdata/examples-" + version + ".list")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	chain := ""
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "chain "):
			chain = strings.TrimSuffix(strings.TrimPrefix(l, "chain "), " {")
		case l == "}" || l == "" || strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "comment "):
			if l == "}" {
				chain = ""
			}
		case chain != "":
			rule, _, _ := strings.Cut(l, ` comment "`)
			out[chain] = append(out[chain], rule)
		}
	}
	return out
}

// nft's listing of each rule svcgen wrote means what the written rule means, as the
// listing spells it and as the listing parser respells it.
func TestListedRulesMeanTheSame(t *testing.T) {
	for _, v := range listings {
		listedMeansWritten(t, v)
	}
}

func listedMeansWritten(t *testing.T, version string) {
	written := rules.Build(nfttest.ExamplesFor(t, version))
	read := examplesListing(t, version)
	n := 0
	for chain, listed := range listedRules(t, version) {
		for i, l := range listed {
			w := written.Chains[chain].Rules[i].Rule
			want, err1 := syntax.ParseRule(w, written.Family)
			got, err2 := syntax.ParseRule(l, written.Family)
			again, err3 := syntax.ParseRule(read.Chains[chain].Rules[i].Rule, written.Family)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("chain %s rule %d: %v %v %v", chain, i, err1, err2, err3)
			}
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(again, want) {
				t.Errorf("%s: chain %s rule %d: listed %q means %+v, written %q %+v", version, chain, i, l, got, w, want)
			}
			n++
		}
	}
	if n < 30 {
		t.Errorf("%s: compared %d rules; the listing has more", version, n)
	}
}

// A table written as nft lists it reads back as the same table: what apply's fake
// kernel lists is what Read reads from a real one.
func TestListingRoundTrip(t *testing.T) {
	for name, st := range tables(t) {
		var b bytes.Buffer
		if err := syntax.WriteListing(&b, st); err != nil {
			t.Fatal(err)
		}
		rs, err := syntax.ParseBytes(name, b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b.Bytes())
		}
		if got := rs.Tables[st.Family]; got == nil || !plan.Equivalent(got, st) {
			t.Errorf("%s: the listing reads back as another table:\n%s", name, b.Bytes())
		}
	}
}
