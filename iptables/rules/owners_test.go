package rules_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/ruleview"
)

// noflush is the map's --noflush payload, read back.
func noflush(t *testing.T, sm *ir.ServiceMap) *syntax.Ruleset {
	t.Helper()
	var b bytes.Buffer
	if err := rules.Write(&b, sm, rules.Options{Format: rules.NoFlush}); err != nil {
		t.Fatal(err)
	}
	return parse(t, b.String())
}

func parse(t *testing.T, text string) *syntax.Ruleset {
	t.Helper()
	rs, err := syntax.ParseBytes("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// The rules' own comments name every hashed chain as the service map does, also in
// large-cluster mode, where endpoint rules carry no comment.
func TestFindOwners(t *testing.T) {
	for _, tc := range []struct {
		services, endpoints int
		large               bool
	}{{30, 3, false}, {300, 5, true}} {
		sm := testkit.GenMap(t, tc.services, tc.endpoints, 3)
		if sm.LargeCluster != tc.large {
			t.Fatalf("%d x %d: large-cluster mode %v, want %v", tc.services, tc.endpoints, sm.LargeCluster, tc.large)
		}
		rs := noflush(t, sm)
		want := rules.MapOwners(sm)
		got := syntax.FindOwners(rs)
		n := 0
		for _, c := range rs.Table("nat").Chains {
			if !syntax.IsServiceChain(c.Name) {
				continue
			}
			n++
			if got[c.Name] != want[c.Name] {
				t.Errorf("%s: found %q, want %q", c.Name, got[c.Name], want[c.Name])
			}
		}
		if n == 0 || len(got) != n {
			t.Errorf("%d service chains, %d owners found", n, len(got))
		}
	}
}

// A diff of two rulesets names every hashed chain's Service, and iptables-save's
// spelling of a rule is no difference.
func TestUnifiedDiffAnnotated(t *testing.T) {
	a := testkit.GenMap(t, 10, 2, 1)
	b := testkit.Without(a, 4, 3)
	ra := noflush(t, a)
	rb := noflush(t, b)
	owners := syntax.FindOwners(ra, rb)
	d := string(ruleview.Unified("a", ra.View(owners, syntax.Everything), "b", rb.View(owners, syntax.Everything)))
	if d == "" {
		t.Fatal("no diff")
	}
	for _, line := range strings.Split(d, "\n") {
		for _, w := range strings.Fields(line) {
			w = strings.TrimRight(strings.TrimLeft(w, "+-:"), `"`)
			if syntax.IsServiceChain(w) && !strings.Contains(line, w+" (") && !strings.Contains(line, w+`" (`) {
				t.Errorf("%s not annotated in %q", w, line)
			}
		}
	}
	sep := syntax.FindOwners(ra)
	for name, o := range sep {
		if strings.HasPrefix(name, syntax.PrefixSEP) && strings.Contains(d, name) && !strings.Contains(d, name+" ("+o.Port+" -> "+o.Endpoint+")") {
			t.Errorf("%s is not shown with its endpoint", name)
		}
	}

	// The same rules as iptables-save prints them.
	saved := parse(t, `*nat
:KUBE-SVC-X - [0:0]
-A KUBE-SVC-X -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 -> 10.0.0.1:80" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A
COMMIT
`)
	ours := parse(t, `*nat
:KUBE-SVC-X - [0:0]
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 -> 10.0.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-A
COMMIT
`)
	if d := ruleview.Unified("saved", saved.View(nil, syntax.Everything), "ours", ours.View(nil, syntax.Everything)); d != nil {
		t.Errorf("spelling counted as a difference:\n%s", d)
	}
}
