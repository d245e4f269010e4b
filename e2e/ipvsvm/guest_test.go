package ipvsvm

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/ipvskernel"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// guestNode is node1, the node every guest test's cluster is for (nodeIP).
const guestNode = `
apiVersion: v1
kind: Node
metadata: {name: node1}
status: {addresses: [{type: InternalIP, address: 198.18.0.1}]}
`

// guestHead begins the clusters of the script and apply tests: node1 in ipvs mode
// (round robin; virtual servers in 198.51.100.0/24 are another tool's) and web, a
// NodePort Service.
const guestHead = guestNode + `---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
ipvs: {scheduler: rr, excludeCIDRs: [198.51.100.0/24]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: NodePort
  clusterIP: 198.19.0.10
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP, nodePort: 30080}]
`

// clusterHead is the script tests' cluster without its EndpointSlices: node1 is a
// namespace (198.18.0.1, facing a client namespace), each endpoint a namespace of its
// own behind a veth (internal/netlab). Addresses are in 198.18.0.0/15; nothing leaves
// the guest.
const clusterHead = guestHead + `---
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: demo}
spec:
  clusterIP: 198.19.0.11
  sessionAffinity: ClientIP
  externalIPs: [198.18.5.5]
  ports: [{name: dns, port: 53, targetPort: 5353, protocol: UDP}]
`

// clusterYAML is the script tests' cluster, with or without web's third endpoint.
func clusterYAML(withThird bool) string {
	web := []string{"198.18.1.1@node1", "198.18.1.2@node2"}
	if withThird {
		web = append(web, "198.18.1.3@node2")
	}
	web = append(web, "198.18.1.4@node2!")
	return clusterHead + sliceYAML("demo", "web", "http", 8080, "TCP", web...) + sliceYAML("demo", "sticky", "dns", 5353, "UDP", "198.18.1.1@node1")
}

// serviceYAML is a ClusterIP Service of namespace demo with one TCP port, named tcp.
func serviceYAML(name, clusterIP string, port, targetPort int) string {
	return fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: demo}\n"+
		"spec: {clusterIP: %s, ports: [{name: tcp, port: %d, targetPort: %d, protocol: TCP}]}\n", name, clusterIP, port, targetPort)
}

// sliceYAML is the EndpointSlice of a Service with one port (its name, number and
// protocol) and the endpoints, each "address@node", where a trailing "!" marks one
// that is not ready.
func sliceYAML(namespace, service, port string, number int, proto string, endpoints ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"+
		"metadata: {name: %s-1, namespace: %s, labels: {kubernetes.io/service-name: %s}}\n"+
		"addressType: IPv4\nports: [{name: %s, port: %d, protocol: %s}]\nendpoints:\n", service, namespace, service, port, number, proto)
	for _, e := range endpoints {
		addr, node, _ := strings.Cut(e, "@")
		conditions := ""
		if n, ok := strings.CutSuffix(node, "!"); ok {
			node, conditions = n, ", conditions: {ready: false}"
		}
		fmt.Fprintf(&b, "- {addresses: [%s], nodeName: %s%s}\n", addr, node, conditions)
	}
	return b.String()
}

var (
	nodeIP    = netip.MustParseAddr("198.18.0.1")
	clientIP  = netip.MustParseAddr("198.18.0.2")
	clusterIP = netip.MustParseAddrPort("198.19.0.10:80")
	nodePort  = netip.MustParseAddrPort("198.18.0.1:30080")
	servers   = []netip.Addr{netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.2"), netip.MustParseAddr("198.18.1.3")}
)

func insideGuest(t *testing.T) {
	if os.Getenv(guestEnv) == "" {
		t.Skip("runs inside the qemu guest that TestIPVSInQEMU boots")
	}
}

// compile builds the node's state from the cluster, with or without the third
// web endpoint.
func compile(t *testing.T, withThird bool) *ipvssyntax.Node {
	t.Helper()
	return ipvsrules.Build(testkit.Compile(t, "guest.yaml", clusterYAML(withThird), pipeline.Settings{}).Map)
}

func writeScript(t *testing.T, n *ipvssyntax.Node, path string) {
	t.Helper()
	var b bytes.Buffer
	if err := ipvssyntax.WriteScript(&b, n, ipvssyntax.Header{Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

// guest is the topology of TestGuest.
type guest struct {
	l            *netlab.Lab
	node, client string
	servers      []string // the namespace of each address in servers, which it answers with
}

// runScript runs the script in the node namespace and returns the changes it made to
// IPVS.
func (g *guest) runScript(t *testing.T, path string) []string {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", g.node, "dash", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", path, err, out, stderr.String())
	}
	var changes []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if c, ok := strings.CutPrefix(l, "svcgen: ipvsadm "); ok {
			changes = append(changes, c)
		} else if strings.TrimSpace(l) != "" {
			t.Errorf("%s said on stderr: %s", path, l)
		}
	}
	return changes
}

// TestGuest is the whole story on one kernel, in order: topology, the script twice,
// what the kernel holds, real traffic, netlink through moby/ipvs, then a changed
// cluster converging.
func TestGuest(t *testing.T) {
	insideGuest(t)
	if err := ipvskernel.Check(); err != nil {
		t.Fatalf("ipvskernel.Check in a kernel with ip_vs loaded: %v", err)
	}
	g := topology(t)
	state := compile(t, true)
	writeScript(t, state, "/tmp/a.sh")
	first := g.runScript(t, "/tmp/a.sh")
	if len(first) == 0 {
		t.Fatal("the first run changed nothing in IPVS")
	}
	if again := g.runScript(t, "/tmp/a.sh"); len(again) != 0 {
		t.Fatalf("the second run changed IPVS again: %q", again)
	}
	t.Run("kernel state", func(t *testing.T) { g.checkKernel(t, state) })
	t.Run("round robin", g.roundRobin)
	t.Run("moby/ipvs", func(t *testing.T) { g.netlinkState(t, state) })
	t.Run("converge", g.converge)
}

// newGuest makes a lab of its own: the node namespace (nodeIP) and a client beside it
// (clientIP), routed through the node. It returns the client's end of the link.
func newGuest(t *testing.T) (*guest, string) {
	l := netlab.New(t)
	g := &guest{l: l, node: l.NS("node"), client: l.NS("client")}
	_, clientDev := l.Link(g.node, nodeIP.String()+"/24", g.client, clientIP.String()+"/24")
	l.In(g.client, "ip", "route", "add", "default", "via", nodeIP.String())
	return g, clientDev
}

// topology makes the node, the client and the endpoint namespaces.
func topology(t *testing.T) *guest {
	g, _ := newGuest(t)
	for _, ip := range servers {
		ns := g.l.Pod(g.node, nodeIP, ip)
		g.l.Serve(ns, netip.AddrPortFrom(ip, 8080), ns)
		g.servers = append(g.servers, ns)
	}
	return g
}

// in runs a command in the node namespace.
func (g *guest) in(args ...string) string { return g.l.In(g.node, args...) }

// checkKernel reads the node back with the tools and svcgen's parsers.
func (g *guest) checkKernel(t *testing.T, want *ipvssyntax.Node) {
	got, err := ipvssyntax.ParseRulesBytes("ipvsadm -Sn", []byte(g.in("ipvsadm", "-Sn")))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := rulesText(t, want.Services), rulesText(t, got); a != b {
		t.Errorf("ipvsadm -Sn differs from the script's state:\nwant:\n%s\ngot:\n%s", a, b)
	}
	sets, err := ipvssyntax.ParseSetsBytes("ipset save", []byte(g.in("ipset", "save")))
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != len(want.Sets) {
		t.Errorf("ipset save has %d sets, want %d (no scratch set left)", len(sets), len(want.Sets))
	}
	for _, ws := range want.Sets {
		var gs *ipvssyntax.Set
		for _, s := range sets {
			if s.Name == ws.Name {
				gs = s
			}
		}
		switch {
		case gs == nil:
			t.Errorf("set %s missing", ws.Name)
		case gs.Type != ws.Type || strings.Join(gs.Entries, " ") != strings.Join(ws.Entries, " "):
			t.Errorf("set %s: %s %q, want %s %q", ws.Name, gs.Type, gs.Entries, ws.Type, ws.Entries)
		}
	}
	var addrs []string
	for _, l := range strings.Split(g.in("ip", "-o", "-4", "addr", "show", "dev", ipvssyntax.DummyInterface), "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			addrs = append(addrs, f[3])
		}
	}
	var wantAddrs []string
	for _, a := range want.Addresses {
		wantAddrs = append(wantAddrs, a.String())
	}
	if strings.Join(addrs, " ") != strings.Join(wantAddrs, " ") {
		t.Errorf("kube-ipvs0 has %q, want %q", addrs, wantAddrs)
	}
	for _, tbl := range []ipvssyntax.Table{want.NAT, want.Filter} {
		rs, err := iptsyntax.ParseBytes("iptables-save", []byte(g.in("iptables-save", "-t", tbl.Name)))
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, r := range tbl.Rules {
			count[r.Chain]++
		}
		for _, c := range tbl.Chains {
			got := rs.Table(tbl.Name).Chain(c)
			if got == nil || len(got.Rules) != count[c] {
				t.Errorf("%s %s: %v, want %d rules", tbl.Name, c, got, count[c])
			}
		}
	}
	for _, j := range ipvssyntax.Jumps {
		rs, _ := iptsyntax.ParseBytes("iptables-save", []byte(g.in("iptables-save", "-t", j.Table)))
		n := 0
		for _, r := range rs.Table(j.Table).Chain(j.From).Rules {
			if r.Args[len(r.Args)-1] == j.To {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s %s has %d jumps to %s after two runs, want 1", j.Table, j.From, n, j.To)
		}
	}
}

func rulesText(t *testing.T, vss []*ipvssyntax.VirtualServer) string {
	var b bytes.Buffer
	if err := ipvssyntax.WriteRules(&b, vss); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// roundRobin connects from the client namespace: rr must hand consecutive
// connections to different real servers, each the same number of times.
func (g *guest) roundRobin(t *testing.T) {
	const n = 9
	var ids []string
	for i := 0; i < n; i++ {
		id, err := netlab.Dial(g.client, clusterIP, 3*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s: %v", i+1, clusterIP, err)
		}
		ids = append(ids, id)
	}
	count := map[string]int{}
	for i, id := range ids {
		count[id]++
		if i >= len(servers) && ids[i-len(servers)] != id {
			t.Errorf("connection %d went to %s, not to %s like connection %d: rr does not rotate", i+1, id, ids[i-len(servers)], i+1-len(servers))
		}
		if i > 0 && ids[i-1] == id {
			t.Errorf("connections %d and %d both went to %s", i, i+1, id)
		}
	}
	if len(count) != len(servers) {
		t.Errorf("connections reached %v, want every one of %d real servers", count, len(servers))
	}
	if _, err := netlab.Dial(g.client, nodePort, 3*time.Second); err != nil {
		t.Errorf("node port %s: %v", nodePort, err)
	}
	t.Logf("cluster IP connections went to %v", ids)
}

// netlinkState programs the same virtual servers through ipvskernel (apply's way in,
// github.com/moby/ipvs) in a fresh namespace and reads them back, through it and
// through ipvsadm.
func (g *guest) netlinkState(t *testing.T, want *ipvssyntax.Node) {
	// A namespace with no address has no local routing table, and the kernel then
	// takes every real-server address for a broadcast one and refuses it (EINVAL):
	// NS sets loopback up.
	ns := g.l.NS("netlink")
	h, err := ipvskernel.OpenIPVS("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, vs := range want.Services {
		if err := h.AddService(vs); err != nil {
			t.Fatalf("AddService %s: %v", vs.Key(), err)
		}
		for _, rs := range vs.Reals {
			if err := h.AddReal(vs, rs); err != nil {
				t.Fatalf("AddReal %s %s: %v", vs.Key(), rs.Address, err)
			}
		}
	}
	back, conns, err := h.Services() // it refuses a service without the kernel's HASHED flag
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 0 {
		t.Errorf("connections counted where there were none: %v", conns)
	}
	if a, b := rulesText(t, want.Services), rulesText(t, back); a != b {
		t.Errorf("ipvskernel's Services differ:\nwant:\n%s\ngot:\n%s", a, b)
	}
	saved, err := ipvssyntax.ParseRulesBytes("ipvsadm -Sn (netlink)", []byte(g.l.In(ns, "ipvsadm", "-Sn")))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := rulesText(t, want.Services), rulesText(t, saved); a != b {
		t.Errorf("ipvsadm -Sn of the netlink-programmed namespace differs:\nwant:\n%s\ngot:\n%s", a, b)
	}
}

// converge changes the node under the script's feet and the cluster under the node:
// a stale service, services svcgen does not own, a real server at weight 0, and an
// endpoint gone while its connections linger.
func (g *guest) converge(t *testing.T) {
	g.in("ipvsadm", "-A", "-t", "198.19.0.99:80", "-s", "rr")                                 // stale: deleted
	g.in("ipvsadm", "-A", "-t", "198.51.100.7:80", "-s", "rr")                                // in excludeCIDRs: kept
	g.in("ipvsadm", "-A", "-t", "[2001:db8::7]:80", "-s", "rr")                               // other family: kept
	g.in("ipvsadm", "-A", "-f", "7", "-s", "rr")                                              // firewall mark: kept
	g.in("ipvsadm", "-e", "-t", clusterIP.String(), "-r", "198.18.1.2:8080", "-m", "-w", "0") // as after a restart mid-drain
	state := compile(t, false)
	writeScript(t, state, "/tmp/b.sh")
	changes := strings.Join(g.runScript(t, "/tmp/b.sh"), "\n")
	for _, want := range []string{
		"-D -t 198.19.0.99:80",
		"-e -t 198.19.0.10:80 -r 198.18.1.2:8080 -m -w 1",
		"-e -t 198.19.0.10:80 -r 198.18.1.3:8080 -m -w 0",
	} {
		if !strings.Contains(changes, want) {
			t.Errorf("changes lack %q:\n%s", want, changes)
		}
	}
	for _, never := range []string{"198.51.100.7", "2001:db8::7", "-f 7"} {
		if strings.Contains(changes, never) {
			t.Errorf("changes touch %s, which svcgen does not own:\n%s", never, changes)
		}
	}
	if again := g.runScript(t, "/tmp/b.sh"); len(again) != 0 {
		t.Errorf("a second run while 198.18.1.3 drains changed IPVS again: %q", again)
	}
	saved := g.in("ipvsadm", "-Sn")
	for _, want := range []string{"-A -t 198.51.100.7:80 -s rr", "-A -t [2001:db8::7]:80 -s rr", "-a -t 198.19.0.10:80 -r 198.18.1.3:8080 -m -w 0"} {
		if !strings.Contains(saved, want) {
			t.Errorf("ipvsadm -Sn lacks %q:\n%s", want, saved)
		}
	}
	for i := 0; i < 4; i++ { // weight 0: new connections avoid the draining server
		if id, err := netlab.Dial(g.client, clusterIP, 3*time.Second); err != nil || id == g.servers[2] {
			t.Errorf("connection %d after the change: %q, %v", i+1, id, err)
		}
	}
}
