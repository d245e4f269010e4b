package syntax

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/ruleview"
)

const sample = `*filter
:KUBE-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
-A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-STALE - [0:0]
-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment ns1/svc1:p80 -j KUBE-SEP-SXIVWICOYRO3J4NJ
-X KUBE-SEP-STALE
COMMIT
`

func TestParse(t *testing.T) {
	rs, err := ParseBytes("sample", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Tables) != 2 || rs.Tables[0].Name != "filter" || rs.Tables[1].Name != "nat" {
		t.Fatalf("tables = %v", rs.Tables)
	}
	svc := rs.Table("filter").Chain("KUBE-SERVICES")
	if svc == nil || len(svc.Rules) != 1 {
		t.Fatalf("filter KUBE-SERVICES = %+v", svc)
	}
	want := []string{"-m", "comment", "--comment", "ns6/svc6:p80 has no endpoints", "-m", "tcp", "-p", "tcp", "-d", "172.30.0.46", "--dport", "80", "-j", "REJECT"}
	if !reflect.DeepEqual(svc.Rules[0].Args, want) {
		t.Errorf("args = %q", svc.Rules[0].Args)
	}
	nat := rs.Table("nat")
	if nat.Chain("KUBE-SEP-STALE") != nil || !reflect.DeepEqual(nat.Deleted, []string{"KUBE-SEP-STALE"}) {
		t.Errorf("-X not applied: chains %v deleted %v", nat.Chains, nat.Deleted)
	}
}

// Write prints chain by chain; parsing that again gives the same ruleset, and printing
// it again gives the same bytes.
func TestParseWriteRoundTrip(t *testing.T) {
	rs, err := ParseBytes("sample", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	var once bytes.Buffer
	if err := rs.Write(&once); err != nil {
		t.Fatal(err)
	}
	rs2, err := ParseBytes("once", once.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var twice bytes.Buffer
	rs2.Write(&twice)
	if once.String() != twice.String() {
		t.Errorf("not stable:\n%s\n---\n%s", once.String(), twice.String())
	}
	if !strings.Contains(once.String(), `--comment "ns1/svc1:p80 cluster IP"`) || !strings.Contains(once.String(), "--comment ns1/svc1:p80 -j") {
		t.Errorf("comments not quoted as kube-proxy quotes them:\n%s", once.String())
	}
}

func TestParseErrors(t *testing.T) {
	for name, text := range map[string]string{
		"no table":    "-A KUBE-SERVICES -j ACCEPT\n",
		"no commit":   "*nat\n:KUBE-SERVICES - [0:0]\n",
		"bad quote":   "*nat\n-A X -m comment --comment \"open\nCOMMIT\n",
		"bad command": "*nat\n-Z X\nCOMMIT\n",
	} {
		if _, err := ParseBytes(name, []byte(text)); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), name+": line ") {
			t.Errorf("%s: error %q does not name the line", name, err)
		}
	}
}

// Every spelling of one rule has one key: kube-proxy's restore input and what
// iptables-save (nf_tables backend, v1.8.9) prints for it.
func TestRuleKeyMatchesIPTablesSave(t *testing.T) {
	for _, pair := range [][2]string{
		{`-m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-X`,
			`-d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-X`},
		{`-j MARK --or-mark 0x00004000`, `-j MARK --set-xmark 0x4000/0x4000`},
		{`-j MARK --xor-mark 0x00004000`, `-j MARK --set-xmark 0x4000/0x0`},
		{`-m mark ! --mark 0x00004000/0x00004000 -j RETURN`, `-m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{`-m comment --comment x -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-A`,
			`-m comment --comment "x" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A`},
		{`-m comment --comment ns/s:p -m recent --name KUBE-SEP-A --set -m tcp -p tcp -j DNAT --to-destination 10.0.0.1:80`,
			`-p tcp -m comment --comment "ns/s:p" -m recent --set --name KUBE-SEP-A --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.0.0.1:80`},
		{`-m recent --name KUBE-SEP-A --rcheck --seconds 10800 --reap -j KUBE-SEP-A`,
			`-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-A --mask 255.255.255.255 --rsource -j KUBE-SEP-A`},
		{`-m tcp -p tcp -d 1.2.3.4 --dport 80 -j REJECT`, `-d 1.2.3.4/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable`},
		{`-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`, `-m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`},
		{`-m tcp -p tcp -d 10.0.0.1 --dport 80 ! -s 10.0.0.0/8 -j X`, `! -s 10.0.0.0/8 -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j X`},
		{`-p tcp --dport 80 -j X`, `-p tcp -m tcp --dport 80 -j X`},
		// KUBE-IPVS-OUT-FILTER, as svcgen's ipvs mode writes it and as the qemu guest's
		// iptables-save printed it (e2e/ipvsvm).
		{`-s 198.18.6.6 -m ipvs --vaddr 198.18.6.6 --vproto tcp --vport 80 -j DROP`,
			`-s 198.18.6.6/32 -m ipvs --vproto 6 --vaddr 198.18.6.6 --vport 80 -j DROP`},
		{`-m ipvs --vaddr 10.0.0.0/8 --vproto sctp -j X`, `-m ipvs --vproto 132 --vaddr 10.0.0.0/8 -j X`},
	} {
		a, b := mustWords(t, pair[0]), mustWords(t, pair[1])
		if RuleKey(a) != RuleKey(b) {
			t.Errorf("keys differ:\n  %s\n  %s", RuleKey(a), RuleKey(b))
		}
	}
	if RuleKey(mustWords(t, "-s 10.0.0.1 -j X")) == RuleKey(mustWords(t, "-s 10.0.0.2 -j X")) {
		t.Error("different rules share a key")
	}
	if RuleKey(mustWords(t, "-m ipvs --vproto 6 -j X")) == RuleKey(mustWords(t, "-m ipvs --vproto 17 -j X")) {
		t.Error("different ipvs protocols share a key")
	}
	if RuleKey(mustWords(t, "-m mark --mark 0x4000/0x4000 -j X")) == RuleKey(mustWords(t, "-m mark ! --mark 0x4000/0x4000 -j X")) {
		t.Error("negation lost")
	}
}

func mustWords(t *testing.T, s string) []string {
	t.Helper()
	w, err := splitWords(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// kube-proxy's flush monitor makes an empty KUBE-PROXY-CANARY in mangle, nat and
// filter of every node it runs on; the views diff and audit compare leave it out, so a
// node kube-proxy programmed is in step with the same rules without it. A canary that
// holds rules is not kube-proxy's, and shows.
func TestCanaryIsNoRule(t *testing.T) {
	const rules = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.0.0.1/32 -j RETURN\nCOMMIT\n"
	const canaries = "*mangle\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n*nat\n:KUBE-PROXY-CANARY - [0:0]\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d 10.0.0.1/32 -j RETURN\nCOMMIT\n*filter\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
	view := func(text string, scope Scope) *ruleview.View {
		rs, err := ParseBytes("t", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return rs.View(nil, scope)
	}
	for _, scope := range []Scope{Everything, KubeProxyOnly} {
		if d := ruleview.Unified("rules", view(rules, scope), "node", view(canaries, scope)); d != nil {
			t.Errorf("scope %v: the canaries differ:\n%s", scope, d)
		}
	}
	used := strings.Replace(canaries, "*filter\n:KUBE-PROXY-CANARY - [0:0]\n", "*filter\n:KUBE-PROXY-CANARY - [0:0]\n-A KUBE-PROXY-CANARY -j DROP\n", 1)
	if d := ruleview.Unified("rules", view(rules, Everything), "node", view(used, Everything)); d == nil {
		t.Error("a canary holding a rule was left out")
	}
}
