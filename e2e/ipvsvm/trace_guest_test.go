package ipvsvm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/ruleview"
	"github.com/svcgen/svcgen/trace"
)

// traceYAML is a cluster with a case of each kind the ipvs tracer decides: node1
// (198.18.0.1) with pods in 198.18.1.0/24, the cluster CIDR. Every endpoint is a
// namespace behind the node (internal/netlab's Pod); nodeName says which are local.
// Addresses are in 198.18.0.0/15; nothing leaves the guest.
const traceYAML = guestNode + `---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
clusterCIDR: 198.18.1.0/24
ipvs: {scheduler: rr}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: t}
spec: {type: NodePort, clusterIP: 198.19.0.10, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]}
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: t}
spec: {type: LoadBalancer, externalTrafficPolicy: Local, clusterIP: 198.19.0.11, externalIPs: [198.18.5.6],
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081}]}
status: {loadBalancer: {ingress: [{ip: 198.18.6.8}]}}
---
apiVersion: v1
kind: Service
metadata: {name: fallback, namespace: t}
spec: {type: NodePort, externalTrafficPolicy: Local, clusterIP: 198.19.0.12, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30082}]}
---
apiVersion: v1
kind: Service
metadata: {name: itp, namespace: t}
spec: {internalTrafficPolicy: Local, clusterIP: 198.19.0.13, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: itp-remote, namespace: t}
spec: {internalTrafficPolicy: Local, clusterIP: 198.19.0.14, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: empty, namespace: t}
spec: {clusterIP: 198.19.0.15, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: t}
spec: {type: LoadBalancer, clusterIP: 198.19.0.16, loadBalancerSourceRanges: [198.18.0.2/32],
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30083}]}
status: {loadBalancer: {ingress: [{ip: 198.18.6.6}]}}
---
apiVersion: v1
kind: Service
metadata: {name: lb-empty, namespace: t}
spec: {type: LoadBalancer, clusterIP: 198.19.0.17, loadBalancerSourceRanges: [198.18.0.2/32],
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30084}]}
status: {loadBalancer: {ingress: [{ip: 198.18.6.7}]}}
---
apiVersion: v1
kind: Service
metadata: {name: lb-node, namespace: t}
spec: {type: LoadBalancer, clusterIP: 198.19.0.20, loadBalancerSourceRanges: [198.18.0.0/24],
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30085}]}
status: {loadBalancer: {ingress: [{ip: 198.18.6.9}]}}
---
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: t}
spec: {sessionAffinity: ClientIP, clusterIP: 198.19.0.18, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: t}
spec: {clusterIP: 198.19.0.19, externalIPs: [198.18.5.5], ports: [{name: http, port: 80, targetPort: 8080}]}
`

// traceEndpoints are the Services' endpoints, each "address@node", all on port 8080
// (named http like the Services' ports: kube-proxy passes over a slice port without a
// name). empty and lb-empty have none.
var traceEndpoints = map[string][]string{
	"web":        {"198.18.1.1@node1", "198.18.1.2@node2", "198.18.1.3@node2"},
	"local":      {"198.18.1.1@node1", "198.18.1.2@node2"},
	"fallback":   {"198.18.1.2@node2", "198.18.1.3@node2"},
	"itp":        {"198.18.1.1@node1", "198.18.1.3@node2"},
	"itp-remote": {"198.18.1.2@node2"},
	"lb":         {"198.18.1.1@node1", "198.18.1.3@node2"},
	"lb-node":    {"198.18.1.2@node2"},
	"sticky":     {"198.18.1.1@node1", "198.18.1.2@node2", "198.18.1.3@node2"},
	"ext":        {"198.18.1.2@node2", "198.18.1.3@node2"},
}

// traceCluster is traceYAML with an EndpointSlice for each Service of traceEndpoints.
func traceCluster() string {
	var b strings.Builder
	b.WriteString(traceYAML)
	for _, svc := range slices.Sorted(maps.Keys(traceEndpoints)) {
		b.WriteString(sliceYAML("t", svc, "http", 8080, "TCP", traceEndpoints[svc]...))
	}
	return b.String()
}

// A traceSource is where a probe's connections start.
type traceSource struct {
	ns string
	// addr is the packet's source as svcgen trace is told it (--src); the connections
	// are made from it, except the node's, whose source the kernel picks as it would
	// for any program on the node.
	addr     netip.Addr
	fromNode bool // svcgen trace --from-node
}

// A traceProbe is one (source, destination) pair, with what the cluster is meant to
// do with it, in expectation's form: the endpoints that answer, the destination itself
// when no rule changes it, or the verdict.
type traceProbe struct {
	from, dst, want, why string
}

const (
	web3   = "198.18.1.1:8080 198.18.1.2:8080 198.18.1.3:8080"
	local1 = "198.18.1.1:8080"
	remote = "198.18.1.2:8080 198.18.1.3:8080"
	lbEps  = "198.18.1.1:8080 198.18.1.3:8080"
)

var traceProbes = []traceProbe{
	{"outside", "198.19.0.10:80", web3, "cluster IP with several real servers; masqueraded from outside the cluster CIDR"},
	{"outside", "198.18.0.1:30080", web3, "node port on the node's address"},
	{"outside", "198.18.0.1:30081", local1, "externalTrafficPolicy Local with a local endpoint, not masqueraded"},
	{"outside", "198.18.5.6:80", local1, "external IP of an externalTrafficPolicy Local Service"},
	{"outside", "198.18.6.8:80", local1, "load-balancer IP of an externalTrafficPolicy Local Service"},
	{"outside", "198.18.0.1:30082", remote, "externalTrafficPolicy Local without a local endpoint falls back to every endpoint"},
	{"outside", "198.19.0.13:80", local1, "internalTrafficPolicy Local: only the local endpoint"},
	{"outside", "198.19.0.14:80", "REJECT", "internalTrafficPolicy Local without a local endpoint: no real server"},
	{"outside", "198.19.0.15:80", "REJECT", "a Service without endpoints"},
	{"outside", "198.19.0.10:81", "REJECT", "a port of a cluster IP that no Service has (KUBE-IPVS-FILTER)"},
	{"outside", "198.18.6.6:80", lbEps, "load-balancer IP from an allowed source"},
	{"outside2", "198.18.6.6:80", "DROP", "load-balancer IP from a source loadBalancerSourceRanges do not allow"},
	{"outside2", "198.18.0.1:30083", lbEps, "the node port of that Service: source ranges hold for the load-balancer IP only"},
	{"outside", "198.18.6.7:80", "REJECT", "load-balancer IP without endpoints, allowed source"},
	{"outside2", "198.18.6.7:80", "DROP", "load-balancer IP without endpoints, source not allowed"},
	{"outside2", "198.18.6.9:80", "198.18.1.2:8080", "load-balancer IP whose source ranges hold the node's network"},
	{"outside", "198.19.0.18:80", "affinity " + web3, "ClientIP session affinity: one real server for the client"},
	{"outside2", "198.19.0.18:80", "affinity " + web3, "the same for another client"},
	{"outside", "198.18.5.5:80", remote, "external IP"},
	{"outside3", "198.18.5.5:80", "198.18.1.3:8080 REJECT", "another tool's rules: filter OUTPUT sees what IPVS scheduled, FORWARD does not"},

	{"pod", "198.19.0.10:80", web3, "a pod to a cluster IP: not masqueraded"},
	{"pod", "198.18.0.1:30080", web3, "a pod to a node port"},
	{"pod", "198.18.0.1:30081", local1, "externalTrafficPolicy Local holds for pods too"},
	{"pod", "198.18.6.8:80", local1, "the same through the load-balancer IP"},
	{"pod", "198.19.0.13:80", local1, "internalTrafficPolicy Local"},
	{"pod", "198.19.0.14:80", "REJECT", "internalTrafficPolicy Local without a local endpoint"},
	{"pod", "198.18.5.5:80", remote, "a pod to an external IP: masqueraded"},
	{"pod", "198.18.6.6:80", "DROP", "a pod outside the source ranges to a load-balancer IP"},
	{"pod", "198.18.6.9:80", "DROP", "the same, ranges that hold the node"},
	{"pod", "198.19.0.18:80", "affinity " + web3, "session affinity"},

	{"hairpin", "198.19.0.10:80", web3, "a local endpoint through its own Service: masqueraded when it reaches itself"},
	{"hairpin", "198.19.0.13:80", local1, "a local endpoint to itself through internalTrafficPolicy Local"},

	{"node", "198.19.0.10:80", web3, "the node to a cluster IP: leaves from it, masqueraded"},
	{"node", "198.18.0.1:30080", web3, "the node to its own node port"},
	{"node", "198.18.0.1:30081", local1, "externalTrafficPolicy Local holds for the node too"},
	{"node", "198.18.6.8:80", local1, "the same through the load-balancer IP"},
	{"node", "198.18.0.1:30082", remote, "the Local fallback from the node"},
	{"node", "198.19.0.13:80", local1, "internalTrafficPolicy Local from the node"},
	{"node", "198.19.0.14:80", "REJECT", "no real server, from the node"},
	{"node", "198.18.5.5:80", remote, "the node to an external IP"},
	{"node", "198.18.6.6:80", "DROP", "the node to a load-balancer IP whose ranges leave it out (KUBE-IPVS-OUT-FILTER)"},
	{"node", "198.18.6.7:80", "REJECT", "the node to a load-balancer IP without endpoints: IPVS refuses before any filter"},
	{"node", "198.18.6.9:80", "198.18.1.2:8080", "the node to a load-balancer IP whose ranges hold it (KUBE-LOAD-BALANCER-SOURCE-IP)"},
	{"node", "127.0.0.1:30080", "127.0.0.1:30080", "no node ports on localhost: the node's own listener answers"},
	{"node", "198.19.0.18:80", "affinity " + web3, "session affinity from the node"},
}

// traceLab is the topology of TestGuestTrace.
type traceLab struct {
	*guest
	sources map[string]traceSource
	dummy   map[netip.Addr]bool // the addresses on kube-ipvs0, as the kernel lists them
}

// traceTopology makes the node; a host beside it with three addresses (198.18.0.2 and
// .3, one inside the source ranges of lb and one outside, and .4, which another tool's
// rules on the node single out); the endpoints, each serving on 8080; a pod that is no
// endpoint; and a listener on the node's loopback.
func traceTopology(t *testing.T) *traceLab {
	g, clientDev := newGuest(t)
	l := g.l
	tl := &traceLab{guest: g, sources: map[string]traceSource{"node": {ns: g.node, addr: nodeIP, fromNode: true}}}
	for i, name := range []string{"outside", "outside2", "outside3"} {
		a := netip.AddrFrom4([4]byte{198, 18, 0, byte(2 + i)})
		if i > 0 {
			l.In(g.client, "ip", "addr", "add", a.String()+"/24", "dev", clientDev)
		}
		tl.sources[name] = traceSource{ns: g.client, addr: a}
	}
	// Every REJECT probe waits for an ICMP error from the node: none held back.
	l.In(g.node, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")
	l.In(g.node, "iptables", "-A", "OUTPUT", "-s", "198.18.0.4", "-d", "198.18.1.2", "-p", "tcp", "--dport", "8080", "-j", "REJECT")
	l.In(g.node, "iptables", "-A", "FORWARD", "-s", "198.18.0.4", "-d", "198.18.1.3", "-j", "DROP")
	for _, ip := range []string{"198.18.1.1", "198.18.1.2", "198.18.1.3"} {
		a := netip.MustParseAddr(ip)
		ns := l.Pod(g.node, nodeIP, a)
		l.ServeSeen(ns, netip.AddrPortFrom(a, 8080))
		if ip == "198.18.1.1" {
			tl.sources["hairpin"] = traceSource{ns: ns, addr: a}
		}
	}
	pod := netip.MustParseAddr("198.18.1.100")
	tl.sources["pod"] = traceSource{ns: l.Pod(g.node, nodeIP, pod), addr: pod}
	l.ServeSeen(g.node, netip.MustParseAddrPort("127.0.0.1:30080"))
	return tl
}

// TestGuestTrace holds the ipvs tracer to the kernel. svcgen's script programs a
// cluster with a case of each kind; the tracer is built from the node's own ipvsadm
// -Sn, ipset save and iptables-save, as svcgen trace --rules builds it; and for each
// probe, real connections must end as the trace says: answered by exactly its
// endpoints, each as often as its probability says (round robin is exact), all by one
// under session affinity, masqueraded or not as it says; refused for REJECT;
// unanswered for DROP; answered by the destination itself when no rule decides.
func TestGuestTrace(t *testing.T) {
	insideGuest(t)
	lab := traceTopology(t)
	res := testkit.Compile(t, "trace.yaml", traceCluster(), pipeline.Settings{})
	writeScript(t, ipvsrules.Build(res.Map), "/tmp/trace.sh")
	lab.runScript(t, "/tmp/trace.sh")

	files := []trace.File{
		{Name: "ipvsadm -Sn", Data: []byte(lab.in("ipvsadm", "-Sn"))},
		{Name: "ipset save", Data: []byte(lab.in("ipset", "save"))},
		{Name: "iptables-save", Data: []byte(lab.in("iptables-save"))},
	}
	lab.dummy = map[netip.Addr]bool{}
	for _, line := range strings.Split(lab.in("ip", "-o", "-4", "addr", "show", "dev", ipvssyntax.DummyInterface), "\n") {
		if f := strings.Fields(line); len(f) > 3 {
			lab.dummy[netip.MustParsePrefix(f[3]).Addr()] = true
		}
	}
	var table []string
	for _, p := range traceProbes {
		t.Run(p.from+"_"+p.dst, func(t *testing.T) {
			src := lab.sources[p.from]
			dst := netip.MustParseAddrPort(p.dst)
			r := traceRules(t, files, src, dst)
			e := expect(r, dst)
			if e.String() != p.want {
				t.Errorf("%s: the tracer says %q, the cluster means %q\n%s", p.why, e, p.want, textOf(r))
			}
			got := lab.check(t, src, dst, e)
			if t.Failed() {
				t.Logf("the trace:\n%s", textOf(r))
			}
			table = append(table, fmt.Sprintf("%-8s -> %-16s tracer %-48s kernel %s", p.from, p.dst, e, got))
		})
	}
	t.Logf("probes:\n%s", strings.Join(table, "\n"))
	t.Run("audit", func(t *testing.T) { lab.audit(t, res) })
	if t.Failed() {
		for _, f := range files {
			t.Logf("the node's %s:\n%s", f.Name, f.Data)
		}
	}
}

// traceRules traces a packet through the node's saved state as svcgen trace --rules
// does: the node's addresses are only what --from-node (the source) and --to-local (a
// destination on the node, as a node port's is) tell it.
func traceRules(t *testing.T, files []trace.File, src traceSource, dst netip.AddrPort) *trace.Result {
	t.Helper()
	host := trace.Host{}
	if src.fromNode {
		host.Local = append(host.Local, src.addr)
	}
	if dst.Addr() == nodeIP {
		host.Local = append(host.Local, dst.Addr())
	}
	tr, err := trace.Open(files, host)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.Trace(trace.Packet{Src: src.addr, Dst: dst.Addr(), DPort: dst.Port(), Proto: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func textOf(r *trace.Result) string {
	var b strings.Builder
	if err := trace.WriteText(&b, r); err != nil {
		return err.Error()
	}
	return b.String()
}

// expectation is a trace read as connections show it. Each outcome has a key: the
// endpoint that answers, the destination itself when no rule changed the packet, or
// the verdict (REJECT: refused; DROP: no answer).
type expectation struct {
	share    map[string]*big.Rat // probability by key
	masq     map[string]bool     // by key, for the keys that answer
	affinity bool
}

func expect(r *trace.Result, dst netip.AddrPort) expectation {
	e := expectation{share: map[string]*big.Rat{}, masq: map[string]bool{}}
	for _, o := range r.Outcomes {
		key := string(o.Verdict)
		switch o.Verdict {
		case trace.DNAT:
			key = o.Endpoint
			e.affinity = o.Affinity
		case trace.None, trace.Accept:
			key = dst.String()
		}
		if e.share[key] == nil {
			e.share[key] = new(big.Rat)
		}
		e.share[key].Add(e.share[key], o.Probability)
		e.masq[key] = o.Masquerade
	}
	return e
}

// String is the keys in order, after "affinity" under session affinity.
func (e expectation) String() string {
	keys := slices.Sorted(maps.Keys(e.share))
	if e.affinity {
		keys = append([]string{"affinity"}, keys...)
	}
	return strings.Join(keys, " ")
}

// Timeouts of one connection: one that should be answered, and one of a probe where
// the trace says some are dropped (waiting that long for an answer that never comes).
const (
	answerTimeout = 3 * time.Second
	dropTimeout   = 1500 * time.Millisecond
)

// check makes a bounded number of connections for a probe and fails the test where
// the kernel ends them otherwise than e says. It returns what the kernel did, for the
// log.
func (lab *traceLab) check(t *testing.T, src traceSource, dst netip.AddrPort, e expectation) string {
	t.Helper()
	n := 2 * len(e.share) // round robin: each outcome twice
	timeout := answerTimeout
	switch {
	case e.affinity:
		n = 3
	case e.share["DROP"] != nil:
		timeout = dropTimeout
		if len(e.share) == 1 {
			n = 1
		}
	}
	from := src.addr
	if src.fromNode {
		from = netip.Addr{} // a program on the node binds no address
	}
	// The source an endpoint sees unless the packet is masqueraded: a connection the
	// node makes to an address on kube-ipvs0 leaves from that address.
	pre := src.addr
	if src.fromNode && lab.dummy[dst.Addr()] {
		pre = dst.Addr()
	}
	count := map[string]int{}
	for i := 0; i < n; i++ {
		key, seen := dialKey(src.ns, from, dst, timeout)
		count[key]++
		switch masq, answers := e.masq[key]; {
		case !seen.IsValid() || !answers:
		case !masq && seen != pre:
			t.Errorf("connection %d to %s came from %s: masqueraded, the trace says not (source %s)", i+1, key, seen, pre)
		case masq && seen == pre && pre != nodeIP: // masquerading the node's address may keep it
			t.Errorf("connection %d to %s came from %s: not masqueraded, the trace says it is", i+1, key, seen)
		}
	}
	var got []string
	for _, key := range slices.Sorted(maps.Keys(count)) {
		got = append(got, fmt.Sprintf("%s×%d", key, count[key]))
	}
	for key := range count {
		if e.share[key] == nil {
			t.Errorf("%d connections ended %v; the trace says %s", n, got, e)
			return strings.Join(got, " ")
		}
	}
	if e.affinity {
		if len(count) != 1 {
			t.Errorf("session affinity: %d connections ended %v, want all at one real server", n, got)
		}
		return strings.Join(got, " ")
	}
	for key, p := range e.share {
		if want := new(big.Rat).Mul(p, big.NewRat(int64(n), 1)); !want.IsInt() || want.Num().Int64() != int64(count[key]) {
			t.Errorf("%d connections ended %v; the trace gives %s probability %s", n, got, key, p.RatString())
		}
	}
	return strings.Join(got, " ")
}

// dialKey makes one connection and names how it ended, as expectation names
// outcomes: the endpoint that answered (with the source it saw), REJECT, DROP, or the
// error.
func dialKey(ns string, from netip.Addr, to netip.AddrPort, timeout time.Duration) (string, netip.Addr) {
	line, err := netlab.DialFrom(ns, from, to, timeout)
	var ne net.Error
	switch {
	case errors.Is(err, netlab.ErrRefused):
		return string(trace.Reject), netip.Addr{}
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, syscall.EPERM):
		return string(trace.Drop), netip.Addr{}
	case err != nil:
		return "error: " + err.Error(), netip.Addr{}
	}
	id, s, _ := strings.Cut(line, " ")
	seen, err := netip.ParseAddr(s)
	if err != nil {
		return "answer " + strconv.Quote(line), netip.Addr{}
	}
	return id, seen
}

// audit is svcgen audit --live on the node the script programmed: the kernel's own
// spelling of every rule, set and virtual server (iptables-save prints -m ipvs
// options in another order, the protocol as a number) is no drift.
func (lab *traceLab) audit(t *testing.T, res *pipeline.Result) {
	m, err := modes.Lookup(string(res.Mode))
	if err != nil {
		t.Fatal(err)
	}
	b := m.Backend(res.Map.Family, 5*time.Second)
	want, err := b.Want(res.Map)
	if err != nil {
		t.Fatal(err)
	}
	var have apply.State
	if err := netlab.InNS(lab.node, func() (err error) {
		have, err = b.Read(context.Background())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	v := apply.ViewOptions{Map: res.Map}
	for _, d := range ruleview.Audit(want.View(v), have.View(v)) {
		t.Errorf("%s %s: the node lacks %q, has %q", d.Kind, d.Port, d.Missing, d.Extra)
	}
}
