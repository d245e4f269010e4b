package iptables

import (
	"strings"
	"testing"

	"github.com/svcgen/svcgen/ruleview"
)

// The rules' own comments name every hashed chain as the service map does, also in
// large-cluster mode, where endpoint rules carry no comment.
func TestFindOwners(t *testing.T) {
	for _, tc := range []struct {
		services, endpoints int
		large               bool
	}{{30, 3, false}, {300, 5, true}} {
		sm := genMap(t, tc.services, tc.endpoints, 3)
		if sm.LargeCluster != tc.large {
			t.Fatalf("%d x %d: large-cluster mode %v, want %v", tc.services, tc.endpoints, sm.LargeCluster, tc.large)
		}
		rs := mustParse(t, string(write(t, sm, Options{Format: NoFlush})))
		want := MapOwners(sm)
		got := FindOwners(rs)
		n := 0
		for _, c := range rs.Table("nat").Chains {
			if !IsServiceChain(c.Name) {
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
	a := genMap(t, 10, 2, 1)
	b := without(a, 4, 3)
	ra := mustParse(t, string(write(t, a, Options{Format: NoFlush})))
	rb := mustParse(t, string(write(t, b, Options{Format: NoFlush})))
	owners := FindOwners(ra, rb)
	d := string(ruleview.Unified("a", ra.View(owners, Everything), "b", rb.View(owners, Everything)))
	if d == "" {
		t.Fatal("no diff")
	}
	for _, line := range strings.Split(d, "\n") {
		for _, w := range strings.Fields(line) {
			w = strings.TrimRight(strings.TrimLeft(w, "+-:"), `"`)
			if IsServiceChain(w) && !strings.Contains(line, w+" (") && !strings.Contains(line, w+`" (`) {
				t.Errorf("%s not annotated in %q", w, line)
			}
		}
	}
	sep := FindOwners(ra)
	for name, o := range sep {
		if strings.HasPrefix(name, prefixSEP) && strings.Contains(d, name) && !strings.Contains(d, name+" ("+o.Port+" -> "+o.Endpoint+")") {
			t.Errorf("%s is not shown with its endpoint", name)
		}
	}

	// The same rules as iptables-save prints them.
	saved := mustParse(t, `*nat
:KUBE-SVC-X - [0:0]
-A KUBE-SVC-X -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 -> 10.0.0.1:80" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A
COMMIT
`)
	ours := mustParse(t, `*nat
:KUBE-SVC-X - [0:0]
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 -> 10.0.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-A
COMMIT
`)
	if d := ruleview.Unified("saved", saved.View(nil, Everything), "ours", ours.View(nil, Everything)); d != nil {
		t.Errorf("spelling counted as a difference:\n%s", d)
	}
}

// An owner is taken only when its hash is the chain's name: a comment naming another
// Service labels nothing. An endpoint chain's port may come from the comment of the
// rule that jumps to it, even when the jumping chain itself is not kube-proxy's hash.
func TestFindOwnersVerified(t *testing.T) {
	rs := mustParse(t, `*nat
:KUBE-SVC-BYHAND - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
:KUBE-SEP-UKSFD7AGPMPPLUHC - [0:0]
-A KUBE-SVC-BYHAND -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
-A KUBE-SEP-SXIVWICOYRO3J4NJ -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
-A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns9/other:p80 cluster IP" -j KUBE-SEP-UKSFD7AGPMPPLUHC
-A KUBE-SEP-UKSFD7AGPMPPLUHC -m comment --comment "ns9/other:p80" -m tcp -p tcp -j DNAT --to-destination 10.180.0.4:80
COMMIT
`)
	got := FindOwners(rs)
	for chain, want := range map[string]string{
		"KUBE-SVC-BYHAND":           "",
		"KUBE-SEP-SXIVWICOYRO3J4NJ": "ns1/svc1:p80 -> 10.180.0.1:80",
		"KUBE-SVC-GNZBNJ2PO5MGZ6GT": "", // the hash of ns2/svc2:p80
		"KUBE-SEP-UKSFD7AGPMPPLUHC": "", // the hash of ns4/svc4:p80 -> 10.180.0.4:80
	} {
		if l := got.Label(chain); l != want {
			t.Errorf("%s: %q, want %q", chain, l, want)
		}
	}
}
