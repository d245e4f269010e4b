package ruleview_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/ruleview"
	"sigs.k8s.io/knftables"
)

// drift changes a rules file as a node's rules drift: a rule (a line starting with
// prefix) dropped, respelled by one of respell, two rules swapped, an address changed.
func drift(rng *rand.Rand, text []byte, prefix string, respell ...func([]byte) []byte) []byte {
	lines := bytes.SplitAfter(text, []byte("\n"))
	var rules []int
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte(prefix)) {
			rules = append(rules, i)
		}
	}
	for range 1 + rng.IntN(4) {
		if len(rules) < 2 {
			break
		}
		i := rules[rng.IntN(len(rules))]
		switch k := rng.IntN(3 + len(respell)); k {
		case 0:
			lines[i] = nil
		case 1:
			j := rules[rng.IntN(len(rules))]
			lines[i], lines[j] = lines[j], lines[i]
		case 2:
			lines[i] = bytes.Replace(lines[i], []byte("10."), []byte("11."), 1)
		default:
			lines[i] = respell[k-3](lines[i])
		}
	}
	return bytes.Join(lines, nil)
}

// nftMutate drifts an nft script; a rule is respelled with extra spaces.
func nftMutate(rng *rand.Rand, text []byte) []byte {
	return drift(rng, text, "add rule ", func(l []byte) []byte {
		return bytes.Replace(l, []byte(" "), []byte("  "), 5)
	})
}

// mutate drifts an iptables rules file; a rule is respelled with a comment added, or
// as iptables-save spells it (a host address with its /32).
func mutate(rng *rand.Rand, text []byte) []byte {
	return drift(rng, text, "-A ", func(l []byte) []byte {
		return bytes.Replace(l, []byte(" -j "), []byte(" -m comment --comment \"x y\" -j "), 1)
	}, func(l []byte) []byte {
		f := strings.Fields(string(l))
		for k := 2; k+1 < len(f); k++ {
			if (f[k] == "-d" || f[k] == "-s") && !strings.Contains(f[k+1], "/") {
				return bytes.Replace(l, []byte(" "+f[k]+" "+f[k+1]+" "), []byte(" "+f[k]+" "+f[k+1]+"/32 "), 1)
			}
		}
		return l
	})
}

// Keys made only for lines that differ give the diff and the audit that keys made for
// every line give: golden files against each other and against drifted copies.
func TestKeysOnDemandAgreeWithEveryKey(t *testing.T) {
	paths, err := filepath.Glob("../golden/*/iptables*.rules")
	if err != nil || len(paths) < 50 {
		t.Fatalf("golden rules files: %d, %v", len(paths), err)
	}
	view := func(name string, data []byte) *ruleview.View {
		rs, err := iptsyntax.ParseBytes(name, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rs.View(iptsyntax.FindOwners(rs), iptsyntax.Everything)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	differ := 0
	for i, p := range paths {
		a, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		others := [][]byte{a, mutate(rng, a), mutate(rng, a)}
		if b, err := os.ReadFile(paths[(i+1)%len(paths)]); err == nil {
			others = append(others, b)
		}
		for _, b := range others {
			got := ruleview.Unified("a", view("a", a), "b", view("b", b))
			want := ruleview.UnifiedEager("a", view("a", a), "b", view("b", b))
			if !bytes.Equal(got, want) {
				t.Errorf("%s: diff with keys on demand:\n%s\nwith every key:\n%s", p, got, want)
			}
			if got != nil {
				differ++
			}
			gotDrift := ruleview.Audit(view("a", a), view("b", b))
			wantDrift := ruleview.AuditEager(view("a", a), view("b", b))
			if !reflect.DeepEqual(gotDrift, wantDrift) {
				t.Errorf("%s: audit with keys on demand %+v, with every key %+v", p, gotDrift, wantDrift)
			}
		}
	}
	if differ < len(paths) {
		t.Errorf("only %d of the pairs differ", differ)
	}
}

// The same for nftables scripts: keys made from the lines that differ give the diff
// and the audit that every key gives.
func TestNFTKeysOnDemandAgreeWithEveryKey(t *testing.T) {
	paths, err := filepath.Glob("../golden/*/nftables*.nft")
	if err != nil || len(paths) < 50 {
		t.Fatalf("golden nft files: %d, %v", len(paths), err)
	}
	view := func(name string, data []byte) *ruleview.View {
		rs, err := nftsyntax.ParseBytes(name, data)
		if err != nil {
			return nil
		}
		if st := rs.Tables[knftables.IPv4Family]; st != nil {
			return st.View()
		}
		return rs.Tables[knftables.IPv6Family].View()
	}
	rng := rand.New(rand.NewPCG(7, 8))
	differ := 0
	for i, p := range paths {
		a, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if view("a", a) == nil {
			continue // a partial sync's script, read only on top of a table
		}
		others := [][]byte{a, nftMutate(rng, a), nftMutate(rng, a)}
		if b, err := os.ReadFile(paths[(i+1)%len(paths)]); err == nil {
			others = append(others, b)
		}
		for _, b := range others {
			if view("b", b) == nil {
				continue // a mutation nft would refuse
			}
			got := ruleview.Unified("a", view("a", a), "b", view("b", b))
			want := ruleview.UnifiedEager("a", view("a", a), "b", view("b", b))
			if !bytes.Equal(got, want) {
				t.Errorf("%s: diff with keys on demand:\n%s\nwith every key:\n%s", p, got, want)
			}
			if got != nil {
				differ++
			}
			gotDrift := ruleview.Audit(view("a", a), view("b", b))
			wantDrift := ruleview.AuditEager(view("a", a), view("b", b))
			if !reflect.DeepEqual(gotDrift, wantDrift) {
				t.Errorf("%s: audit with keys on demand %+v, with every key %+v", p, gotDrift, wantDrift)
			}
		}
	}
	if differ < len(paths) {
		t.Errorf("only %d of the pairs differ", differ)
	}
}
