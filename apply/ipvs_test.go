package apply

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
)

// ipvsCluster is genCluster on a node whose configuration asks for ipvs mode, with a
// scheduler and excluded CIDRs; its endpoints are appended.
const ipvsCluster = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
ipvs: {scheduler: rr, excludeCIDRs: [198.51.100.0/24]}
---` + genCluster

func ipvsMap(t *testing.T, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	return compileWithEndpoints(t, ipvsCluster, "", endpoints...)
}

func whats(p Plan) []string {
	var out []string
	for _, op := range p.(*ipvsPlan).ops {
		out = append(out, op.what)
	}
	return out
}

// The ipvs plan follows kube-proxy's order, changes only what differs, never deletes
// a virtual server inside excludeCIDRs, and a node in step needs nothing.
func TestIPVSPlan(t *testing.T) {
	b := NewIPVS("IPv4", 0)
	other, err := iptsyntax.ParseBytes("node", []byte("*nat\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\nCOMMIT\n"))
	if err != nil {
		t.Fatal(err)
	}
	empty := &ipvsState{sysctls: map[string]string{}, rules: &ipState{rs: other},
		services: []*ipvssyntax.VirtualServer{
			{Protocol: "TCP", Address: mustAddrPort("198.51.100.7:80"), Scheduler: "rr"}, // excluded: stays
			{Protocol: "TCP", Address: mustAddrPort("198.19.0.99:80"), Scheduler: "rr"},  // stale: goes
		}}
	sm := ipvsMap(t, "198.18.1.1", "198.18.1.2")
	p, err := b.Plan(sm, empty, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(whats(p), "\n")
	for _, want := range []string{
		"sysctl net.ipv4.vs.conntrack=1\n",
		"ip link add kube-ipvs0 type dummy\nip addr add 198.19.0.10/32 dev kube-ipvs0\nipset restore (sets)\n",
		"-A -t 198.18.0.1:30080 -s rr\n-a -t 198.18.0.1:30080 -r 198.18.1.1:8080 -m -w 1\n",
		"-A -t 198.19.0.10:80 -s rr\n-a -t 198.19.0.10:80 -r 198.18.1.1:8080 -m -w 1\n-a -t 198.19.0.10:80 -r 198.18.1.2:8080 -m -w 1\n-D -t 198.19.0.99:80\niptables-restore (companion chains)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "198.51.100.7") {
		t.Errorf("the plan touches a virtual server inside excludeCIDRs:\n%s", got)
	}
	if op := p.(*ipvsPlan).ops[len(p.(*ipvsPlan).ops)-1]; !strings.HasPrefix(op.what, "iptables-restore") {
		t.Errorf("last op %q; want the companion chains last (no address to unbind)", op.what)
	}

	// The node as the plan leaves it needs nothing more.
	after := p.After()
	if again, err := b.Plan(sm, after, PlanOptions{}); err != nil || !again.Empty() {
		t.Errorf("a node in step: %v, plan %q", err, whats(again))
	}
	// One endpoint goes: its hairpin entry (KUBE-LOOP-BACK) and its real servers are
	// deleted, nothing else changes.
	p2, err := b.Plan(ipvsMap(t, "198.18.1.1"), after, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "ipset restore (sets)\n-d -t 198.18.0.1:30080 -r 198.18.1.2:8080\n-d -t 198.19.0.10:80 -r 198.18.1.2:8080"
	if got := strings.Join(whats(p2), "\n"); got != want {
		t.Errorf("one endpoint removed:\n%s\nwant\n%s", got, want)
	}
	// The companion chains of the state after keep the other tool's chain.
	var buf bytes.Buffer
	after.(*ipvsState).rules.ruleset().Write(&buf)
	if !strings.Contains(buf.String(), "-A PREROUTING -j OTHER") || !strings.Contains(buf.String(), "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") {
		t.Errorf("nat after the plan:\n%s", buf.String())
	}
}

// Cleanup deletes the virtual servers kube-proxy's records name (bound addresses,
// node-port sets) and nothing else.
func TestIPVSCleanupOwnership(t *testing.T) {
	st := &ipvsState{
		link:      true,
		addresses: []netip.Prefix{mustPrefix("198.19.0.10/32")},
		sets: []*ipvssyntax.Set{
			{Name: "KUBE-NODE-PORT-TCP", Type: ipvssyntax.BitmapPort, Range: "0-65535", Entries: []string{"30080"}},
		},
		services: []*ipvssyntax.VirtualServer{
			{Protocol: "TCP", Address: mustAddrPort("198.19.0.10:80"), Scheduler: "rr"},
			{Protocol: "TCP", Address: mustAddrPort("198.18.0.1:30080"), Scheduler: "rr"},
			{Protocol: "TCP", Address: mustAddrPort("198.18.0.1:8443"), Scheduler: "rr"},
			{Protocol: "UDP", Address: mustAddrPort("198.18.0.1:30080"), Scheduler: "rr"},
		},
		rules: &ipState{rs: &iptsyntax.Ruleset{}},
	}
	p, err := NewIPVS("IPv4", 0).Cleanup(st)
	if err != nil {
		t.Fatal(err)
	}
	want := "-D -t 198.19.0.10:80\n-D -t 198.18.0.1:30080\nipset destroy (kube-proxy's sets)\nip link del kube-ipvs0"
	if got := strings.Join(whats(p), "\n"); got != want {
		t.Errorf("cleanup:\n%s\nwant\n%s", got, want)
	}
}

func mustPrefix(s string) netip.Prefix     { return netip.MustParsePrefix(s) }
func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// The summary counts in the noun's form that the number takes.
func TestIPVSSummaryText(t *testing.T) {
	c := ipvsCount{addrs: 1, setEntries: 2, vsAdded: 1, vsUpdated: 3, rsChanged: 1}
	c.chains.Chains, c.chains.Blocks = 1, 1
	want := "1 virtual server added, 3 updated, 0 deleted, 1 real server change, 2 set entries, 1 address; iptables: 1 chain written, 0 rules written, 0 rules and 0 chains deleted, in 1 block"
	if got := c.summary().Text; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
