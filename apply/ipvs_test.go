package apply

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/ipvskernel"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsplan "github.com/svcgen/svcgen/ipvs/plan"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// ipvsHead is a configuration that asks for ipvs mode, with a scheduler and excluded
// CIDRs.
const ipvsHead = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
ipvs: {scheduler: rr, excludeCIDRs: [198.51.100.0/24]}
---`

// ipvsCluster is genCluster in ipvs mode; its endpoints are appended.
const ipvsCluster = ipvsHead + genCluster

func ipvsMap(t *testing.T, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	return compileWithEndpoints(t, ipvsCluster, "", "", endpoints...)
}

func whats(p Plan) []string {
	var out []string
	for _, op := range p.(*ipvsPlan).ops {
		out = append(out, op.what)
	}
	return out
}

// fakeIPVS is the IPv4 ipvs backend on a fake kernel whose nat table holds another
// tool's chain, and an Applier that drives it.
func fakeIPVS(t *testing.T) (*Applier, *ipvskernel.Fake, *FakeIPTables) {
	t.Helper()
	tables, fake := fakeBackend(t, "*nat\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\nCOMMIT\n", 0)
	k := ipvskernel.NewFake()
	return &Applier{Backend: &IPVS{kernel: k.Kernel(), tables: tables, maxChains: DefaultMaxChains}}, k, fake
}

func syncIPVS(t *testing.T, a *Applier, sm *ir.ServiceMap, reread bool) *Result {
	t.Helper()
	res, err := a.Sync(context.Background(), sm, SyncOptions{Reread: reread})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func realID(vs, rs string) ipvssyntax.RealID {
	return ipvssyntax.RealID{Service: ipvssyntax.ServiceID{Protocol: model.TCP, Address: netip.MustParseAddrPort(vs)}, Real: netip.MustParseAddrPort(rs)}
}

// The ipvs plan follows ipvs/plan's order, changes only what differs, never deletes
// a virtual server inside excludeCIDRs, and a node in step needs nothing.
func TestIPVSPlan(t *testing.T) {
	a, k, _ := fakeIPVS(t)
	h, err := k.Kernel().OpenIPVS()
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range []string{"198.51.100.7:80", "198.19.0.99:80"} { // excluded: stays; stale: goes
		if err := h.AddService(&ipvssyntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort(vs), Scheduler: "rr"}); err != nil {
			t.Fatal(err)
		}
	}
	b := a.Backend
	from := mustRead(t, b)
	sm := ipvsMap(t, "198.18.1.1", "198.18.1.2")
	p, err := b.Plan(sm, from, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(whats(p), "\n")
	for _, want := range []string{
		"sysctl net.ipv4.vs.conntrack=1\n",
		"ip link add kube-ipvs0 type dummy\nip addr add 198.19.0.10/32 dev kube-ipvs0\nipset restore (sets)\n",
		"-D -t 198.19.0.99:80\n-A -t 198.18.0.1:30080 -s rr\n-A -t 198.19.0.10:80 -s rr\n" +
			"-a -t 198.18.0.1:30080 -r 198.18.1.1:8080 -m -w 1\n-a -t 198.18.0.1:30080 -r 198.18.1.2:8080 -m -w 1\n" +
			"-a -t 198.19.0.10:80 -r 198.18.1.1:8080 -m -w 1\n-a -t 198.19.0.10:80 -r 198.18.1.2:8080 -m -w 1\niptables-restore (companion chains)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "198.51.100.7") {
		t.Errorf("the plan touches a virtual server inside excludeCIDRs:\n%s", got)
	}
	if _, err := b.Load(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// The node as the plan leaves it needs nothing more, read back or remembered.
	for _, st := range []State{p.After(), mustRead(t, b)} {
		if again, err := b.Plan(sm, st, PlanOptions{}); err != nil || !again.Empty() {
			t.Errorf("a node in step: %v, plan %q", err, whats(again))
		}
	}
	// One endpoint goes, with no connection: its hairpin entry (KUBE-LOOP-BACK) and its
	// real servers are deleted, nothing else changes.
	p2, err := b.Plan(ipvsMap(t, "198.18.1.1"), p.After(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "ipset restore (sets)\n-d -t 198.18.0.1:30080 -r 198.18.1.2:8080\n-d -t 198.19.0.10:80 -r 198.18.1.2:8080"
	if got := strings.Join(whats(p2), "\n"); got != want {
		t.Errorf("one endpoint removed:\n%s\nwant\n%s", got, want)
	}
	// The companion chains of the state after keep the other tool's chain.
	var buf bytes.Buffer
	if err := p.After().(*ipvsState).rules.ruleset().Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "-A PREROUTING -j OTHER") || !strings.Contains(buf.String(), "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") {
		t.Errorf("nat after the plan:\n%s", buf.String())
	}
}

func rulesText(t *testing.T, rs *iptsyntax.Ruleset) string {
	t.Helper()
	var b bytes.Buffer
	if err := rs.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustRead(t *testing.T, b Backend) State {
	t.Helper()
	st, err := b.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// drainCluster is web with a TCP and a UDP port, for the drain tests.
const drainCluster = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  clusterIP: 198.19.0.10
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}, {name: dns, port: 53, targetPort: 5353, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 5353, protocol: UDP}]
endpoints:
`

// The drain fix: a TCP real server that is no longer wanted but still has
// connections (inactive ones count) is set to weight 0, not deleted, and stays so
// while it has them; the sync that reads it with none deletes it. A UDP real server
// goes at once, connections or not, as in kube-proxy.
func TestIPVSApplyDrains(t *testing.T) {
	a, k, _ := fakeIPVS(t)
	syncIPVS(t, a, compileWithEndpoints(t, drainCluster, "", "", "198.18.1.1", "198.18.1.2"), false)
	tcp := realID("198.19.0.10:80", "198.18.1.2:8080")
	udp := ipvssyntax.RealID{Service: ipvssyntax.ServiceID{Protocol: model.UDP, Address: netip.MustParseAddrPort("198.19.0.10:53")}, Real: netip.MustParseAddrPort("198.18.1.2:5353")}
	k.SetConns(tcp, ipvssyntax.Conns{Inactive: 1})
	k.SetConns(udp, ipvssyntax.Conns{Inactive: 3})
	one := compileWithEndpoints(t, drainCluster, "", "", "198.18.1.1")
	res := syncIPVS(t, a, one, true)
	state := k.State()
	if !strings.Contains(state, "-a -t 198.19.0.10:80 -r 198.18.1.2:8080 -m -w 0\n") {
		t.Errorf("the TCP real server with a connection is not drained at weight 0:\n%s", state)
	}
	if strings.Contains(state, "198.18.1.2:5353") {
		t.Errorf("the UDP real server is still there:\n%s", state)
	}
	if !strings.Contains(res.Summary.Text, "2 real server changes") {
		t.Errorf("summary %q", res.Summary.Text)
	}
	for _, reread := range []bool{true, false} {
		if res := syncIPVS(t, a, one, reread); res.Changed {
			t.Errorf("a sync while the server drains (reread %v) changed %s", reread, res.Summary.Text)
		}
	}
	k.SetConns(tcp, ipvssyntax.Conns{})
	if res := syncIPVS(t, a, one, false); res.Changed {
		t.Errorf("a sync from memory deleted the server it cannot know is idle: %s", res.Summary.Text)
	}
	syncIPVS(t, a, one, true)
	if state := k.State(); strings.Contains(state, "198.18.1.2:8080") {
		t.Errorf("the drained server is still there once it has no connection:\n%s", state)
	}
	if res := syncIPVS(t, a, compileWithEndpoints(t, drainCluster, "", "", "198.18.1.1", "198.18.1.2"), true); !strings.Contains(k.State(), "-a -t 198.19.0.10:80 -r 198.18.1.2:8080 -m -w 1\n") || !res.Changed {
		t.Errorf("the endpoint back:\n%s", k.State())
	}
}

// changeMaps are the two states of the failure tests: from before to after, one
// endpoint is replaced (real servers, hairpin entries) and a Service added (a virtual
// server, set entries, an address).
func changeMaps(t *testing.T) (before, after *ir.ServiceMap) {
	return ipvsMap(t, "198.18.1.1", "198.18.1.2"), compileWithEndpoints(t, ipvsHead+idleService+genCluster, "", "", "198.18.1.1", "198.18.1.3")
}

// A load that fails at any of its changes, or at the companion chains, leaves the
// kernel as it was: every change before it is undone, and the set change, which ipset
// may have made in part, too. A sync after it converges. Both from an empty node
// (sysctls, the link, the chains) and from one in use (real servers, a new Service).
func TestIPVSLoadFailsAnywhere(t *testing.T) {
	before, after := changeMaps(t)
	t.Run("empty node", func(t *testing.T) { checkFailures(t, nil, before, 13, true) })
	t.Run("node in use", func(t *testing.T) { checkFailures(t, before, after, 7, false) })
}

// checkFailures makes the load from the state from (nil: an empty node) to to fail at
// each of its calls to the kernel (calls of them, as the test expects), then, when it
// loads chains, at the chains.
func checkFailures(t *testing.T, from, to *ir.ServiceMap, calls int, chains bool) {
	node := func() (*Applier, *ipvskernel.Fake, *FakeIPTables) {
		a, k, tables := fakeIPVS(t)
		if from != nil {
			syncIPVS(t, a, from, false)
		}
		return a, k, tables
	}
	a, k, tables := node()
	start := len(k.Calls())
	syncIPVS(t, a, to, false)
	want, wantTables := k.State(), tables.Text()
	if n := len(k.Calls()) - start; n != calls {
		t.Fatalf("the change made %d calls, want %d: %q", n, calls, k.Calls()[start:])
	}
	last := calls
	if chains {
		last++
	}
	for i := 1; i <= last; i++ {
		a, k, tables := node()
		was, wasTables := k.State(), tables.Text()
		if i <= calls {
			k.FailAt(i, errors.New("refused"))
		} else {
			tables.FailLine = 1
		}
		_, err := a.Sync(context.Background(), to, SyncOptions{})
		var le *LoadError
		if !errors.As(err, &le) || le.Rollback != nil || le.Rule == "" {
			t.Fatalf("call %d refused: %v", i, err)
		}
		if k.State() != was || tables.Text() != wasTables {
			t.Errorf("call %d (%s) refused: the node is not as it was:\n%s\nwant\n%s", i, le.Rule, k.State(), was)
		}
		if syncIPVS(t, a, to, false); k.State() != want || tables.Text() != wantTables {
			t.Errorf("call %d refused, then a sync: the node does not converge:\n%s\nwant\n%s", i, k.State(), want)
		}
	}
}

// When putting things back fails too, the error says so and the kernel holds part
// of the change; the next sync reads it again and converges.
func TestIPVSRollbackFails(t *testing.T) {
	before, after := changeMaps(t)
	a, k, _ := fakeIPVS(t)
	syncIPVS(t, a, before, false)
	was := k.State()
	// The load makes 7 calls (an address, the sets, a virtual server, two real servers
	// deleted and two added): the last fails. Undoing, the 4th call takes the new
	// virtual server away again: that one fails too.
	k.FailAt(7, errors.New("refused"))
	k.FailAt(7+4, errors.New("undo refused"))
	_, err := a.Sync(context.Background(), after, SyncOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.Rollback == nil || le.Rule != "-a -t 198.19.0.10:80 -r 198.18.1.3:8080 -m -w 1" || le.Service != "demo/web:http cluster IP" {
		t.Fatalf("a failed load whose rollback fails: %v", err)
	}
	if calls := strings.Join(k.Calls(), "\n"); !strings.Contains(calls, "ipvsadm -D -t 198.19.0.20:80: undo refused") {
		t.Fatalf("the undo that failed is not the one meant:\n%s", calls)
	}
	left := k.State()
	if left == was {
		t.Error("the failed rollback left nothing changed")
	}
	if !strings.Contains(left, "-A -t 198.19.0.20:80 -s rr") {
		t.Errorf("the virtual server whose removal failed is gone:\n%s", left)
	}
	syncIPVS(t, a, after, false)
	fresh, kf, _ := fakeIPVS(t)
	syncIPVS(t, fresh, after, false)
	if k.State() != kf.State() {
		t.Errorf("after the next sync:\n%s\nwant the state of a node that took the change:\n%s", k.State(), kf.State())
	}
}

// An ipset restore that stops partway (a set gone behind the applier's back) is
// undone: the entries it changed before the failing line are put back, and the sets
// are as the applier knew them.
func TestIPVSPartialSetChangeUndone(t *testing.T) {
	before, after := changeMaps(t)
	a, k, _ := fakeIPVS(t)
	syncIPVS(t, a, before, false)
	sets := k.Kernel().Sets
	if err := sets.Restore(context.Background(), []byte("destroy KUBE-IPVS-IPS\n")); err != nil {
		t.Fatal(err)
	}
	was := k.State()
	_, err := a.Sync(context.Background(), after, SyncOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.Rule != "ipset restore (sets)" || !strings.Contains(err.Error(), "KUBE-IPVS-IPS: the set does not exist") {
		t.Fatalf("a restore into a missing set: %v", err)
	}
	if le.Rollback != nil {
		t.Fatalf("rollback: %v", le.Rollback)
	}
	// KUBE-LOOP-BACK and KUBE-CLUSTER-IP changed before the failing line: back as
	// they were; KUBE-IPVS-IPS is made again, with its entry.
	got := k.State()
	if !strings.Contains(got, "add KUBE-LOOP-BACK 198.18.1.2,tcp:8080,198.18.1.2\n") || strings.Contains(got, "198.18.1.3") ||
		strings.Contains(got, "198.19.0.20") || !strings.Contains(got, "add KUBE-IPVS-IPS 198.19.0.10\n") {
		t.Errorf("after the undo:\n%s\nwas\n%s", got, was)
	}
}

// Cleanup deletes the virtual servers kube-proxy's records name, in one restore for
// the sets, and the link.
func TestIPVSCleanupOwnership(t *testing.T) {
	st := &ipvsState{
		have: ipvsplan.Have{
			Link:      true,
			Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.0.10/32")},
			Sets: []*ipvssyntax.Set{
				{Name: "KUBE-NODE-PORT-TCP", Type: ipvssyntax.BitmapPort, Range: "0-65535", Entries: []string{"30080"}},
				{Name: "KUBE-CLUSTER-IP", Type: ipvssyntax.HashIPPort, Family: "inet", HashSize: 1024, MaxElem: 65536},
			},
			Services: []*ipvssyntax.VirtualServer{
				{Protocol: "TCP", Address: netip.MustParseAddrPort("198.19.0.10:80"), Scheduler: "rr"},
				{Protocol: "TCP", Address: netip.MustParseAddrPort("198.18.0.1:8443"), Scheduler: "rr"},
			},
		},
		rules: &ipState{rs: &iptsyntax.Ruleset{}},
	}
	p, err := NewIPVS("IPv4", 0).Cleanup(st)
	if err != nil {
		t.Fatal(err)
	}
	want := "-D -t 198.19.0.10:80\nipset destroy (kube-proxy's sets)\nip link del kube-ipvs0"
	if got := strings.Join(whats(p), "\n"); got != want {
		t.Errorf("cleanup:\n%s\nwant\n%s", got, want)
	}
	if !strings.HasPrefix(p.Summary().Text, "0 virtual servers added, 0 updated, 1 deleted, 0 real server changes, 2 set entries") {
		t.Errorf("summary %q", p.Summary().Text)
	}
}

// The summary counts in the noun's form that the number takes.
func TestIPVSSummaryText(t *testing.T) {
	c := ipvsCount{addrs: 1, setEntries: 2, vsAdded: 1, vsUpdated: 3, rsChanged: 1}
	c.chains.Chains, c.chains.Blocks = 1, 1
	want := "1 virtual server added, 3 updated, 0 deleted, 1 real server change, 2 set entries, 1 address; iptables: 1 chain written, 0 rules written, 0 rules and 0 chains deleted, in 1 block"
	if got := c.summary().Text; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
