package syntax

import (
	"testing"
)

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

func mustParse(t *testing.T, text string) *Ruleset {
	t.Helper()
	rs, err := ParseBytes("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
