// Package randcluster writes small random clusters as manifests, for property tests:
// Services of every type and traffic policy (ClusterIP, NodePort, LoadBalancer with
// and without source ranges and ipMode Proxy, external IPs, headless, ExternalName),
// session affinity, several ports of every protocol with numeric and named target
// ports, endpoints in every state (ready, serving or not, terminating, on this node or
// another, with zone hints) from EndpointSlices, from v1 Endpoints and from Pods, and a
// KubeProxyConfiguration and NodeEnvironment with every local-traffic detector and
// node-port address setting. The same seed gives the same bytes; every cluster is valid
// input (svcgen compiles it without errors).
//
// The node the rules are for is node-a (192.168.0.2, pods in 10.1.0.0/24); node-b and
// node-c hold the other endpoints. ClusterIPs come from 172.30.0.0/16, external IPs from
// 198.51.100.0/24, load-balancer IPs from 5.6.7.0/24. An IPv6 cluster has the same
// shape in IPv6 addresses (see ipv6). A dual-stack cluster has both: Nodes, pods,
// the ServiceCIDR and the config's clusterCIDR in both families (the primary one
// first), and Services of every ipFamilyPolicy, each with an EndpointSlice per
// family it has.
package randcluster

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Options shape a cluster.
type Options struct {
	// IPv6 makes an IPv6 cluster (the NodeEnvironment says ipFamily IPv6); with
	// Dual, IPv6 is the primary family.
	IPv6 bool
	// Dual makes a dual-stack cluster (the NodeEnvironment says ipFamily DualStack).
	Dual bool
	// DualHost, without Dual: a cluster of one family on a host that supports both
	// (the NodeEnvironment says ipFamily DualStack), which kube-proxy programs in
	// both families, the other family's node IP being loopback.
	DualHost bool
	// NFAcct: the node has kube-proxy's nfacct counters (a kernel test must create
	// them before loading rules that use them).
	NFAcct bool
}

// Generate writes the cluster of one seed.
func Generate(seed uint64, o Options) []byte {
	g := &gen{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), o: o, seed: seed, a: ipv4}
	if o.IPv6 {
		g.a = ipv6
	}
	g.fams = []plan{g.a}
	if o.Dual {
		g.fams = append(g.fams, map[bool]plan{true: ipv4, false: ipv6}[o.IPv6])
	}
	g.header()
	n := 1 + g.rnd.IntN(8)
	for i := 0; i < n; i++ {
		g.service(i)
	}
	return []byte(g.b.String())
}

type gen struct {
	rnd  *rand.Rand
	o    Options
	seed uint64
	b    strings.Builder
	a    plan   // the primary family's
	fams []plan // the cluster's families: a, then the other one in a dual-stack cluster
	// counters hand out unique addresses and ports.
	clusterIP, nodePort, externalIP, lbIP int
	pod                                   [3]int
}

func (g *gen) printf(format string, args ...any) { fmt.Fprintf(&g.b, format, args...) }

func (g *gen) doc() { g.printf("---\n") }

func (g *gen) chance(percent int) bool { return g.rnd.IntN(100) < percent }

func (g *gen) pick(options ...string) string { return options[g.rnd.IntN(len(options))] }

var nodes = []struct{ name, zone string }{{"node-a", "zone-1"}, {"node-b", "zone-1"}, {"node-c", "zone-2"}}

// plan is one family's addresses. Formats take a number; pod takes the node's index
// (1-3) and a number.
type plan struct {
	family, clusterCIDR, serviceCIDR, lo, eth0        string
	nodeIP, podCIDR, pod, clusterIP, externalIP, lbIP string
	sourceRanges, nodePortAddresses                   []string
}

var ipv4 = plan{
	family: "IPv4", clusterCIDR: "10.0.0.0/8", serviceCIDR: "172.30.0.0/16",
	lo: "127.0.0.1/8", eth0: "192.168.0.2/24, 192.168.1.2/24",
	nodeIP: "192.168.0.%d", podCIDR: "10.%d.0.0/24", pod: "10.%d.0.%d",
	clusterIP: "172.30.0.%d", externalIP: "198.51.100.%d", lbIP: "5.6.7.%d",
	sourceRanges:      []string{`"203.0.113.0/25"`, `"192.168.0.0/16"`, `"10.0.0.0/8", "203.0.113.128/25"`},
	nodePortAddresses: []string{"[192.168.0.0/24]", "[192.168.1.2/32, 127.0.0.0/8]", "[0.0.0.0/0]"},
}

var ipv6 = plan{
	family: "IPv6", clusterCIDR: "fd00:10::/48", serviceCIDR: "fd00:30::/112",
	lo: `"::1/128"`, eth0: `"2001:db8::2/64", "2001:db8:1::2/64"`,
	nodeIP: "2001:db8::%d", podCIDR: "fd00:10:%d::/64", pod: "fd00:10:%d::%d",
	clusterIP: "fd00:30::%d", externalIP: "2001:db8:51::%d", lbIP: "2001:db8:56::%d",
	sourceRanges:      []string{`"2001:db8:ff::/64"`, `"2001:db8::/32"`, `"fd00:10::/48", "2001:db8:fe::/64"`},
	nodePortAddresses: []string{"[\"2001:db8::/64\"]", "[\"2001:db8:1::2/128\", \"::1/128\"]", "[\"::/0\"]"},
}

func (g *gen) header() {
	g.printf("# random cluster, seed %d\n", g.seed)
	g.printf("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: node-a\n")
	clusterCIDR := strings.Join(g.each(func(p plan) string { return p.clusterCIDR }), ",")
	switch g.rnd.IntN(5) {
	case 0:
		g.printf("clusterCIDR: %q\n", clusterCIDR)
	case 1:
		g.printf("clusterCIDR: %q\ndetectLocalMode: NodeCIDR\n", clusterCIDR)
	case 2:
		g.printf("detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: cbr0}\n")
	case 3:
		g.printf("detectLocalMode: InterfaceNamePrefix\ndetectLocal: {interfaceNamePrefix: veth}\n")
	case 4: // no detector
	}
	masqAll := g.chance(15)
	bit := g.pick("14", "14", "3", "30")
	g.printf("iptables: {masqueradeAll: %t, masqueradeBit: %s, localhostNodePorts: %t}\n", masqAll, bit, !g.chance(25))
	g.printf("nftables: {masqueradeAll: %t, masqueradeBit: %s}\n", masqAll, bit)
	if i := g.rnd.IntN(4); i > 0 {
		g.printf("nodePortAddresses: %s\n", g.nodePortAddresses(i-1))
	}
	g.doc()
	family := g.a.family
	if g.o.Dual || g.o.DualHost {
		family = "DualStack"
	}
	g.printf("apiVersion: svcgen/v1alpha1\nkind: NodeEnvironment\nmetadata: {name: node-a}\nipFamily: %s\n", family)
	g.printf("iptables: {randomFully: %t, nfacct: %t}\nconntrack: {tcpBeLiberal: %t}\n", g.chance(50), g.o.NFAcct, g.chance(20))
	g.printf("interfaces: [{name: lo, addresses: [%s]}, {name: eth0, addresses: [%s]}]\n",
		strings.Join(g.each(func(p plan) string { return p.lo }), ", "),
		strings.Join(g.each(func(p plan) string { return p.eth0 }), ", "))
	for i, n := range nodes {
		g.doc()
		g.printf("apiVersion: v1\nkind: Node\nmetadata: {name: %s, labels: {topology.kubernetes.io/zone: %s}}\n", n.name, n.zone)
		if !g.o.Dual {
			g.printf("spec: {podCIDR: %q}\nstatus: {addresses: [{type: InternalIP, address: %q}]}\n",
				fmt.Sprintf(g.a.podCIDR, i+1), fmt.Sprintf(g.a.nodeIP, i+2))
			continue
		}
		g.printf("spec: {podCIDRs: [%s]}\nstatus: {addresses: [%s]}\n",
			strings.Join(g.each(func(p plan) string { return strconv.Quote(fmt.Sprintf(p.podCIDR, i+1)) }), ", "),
			strings.Join(g.each(func(p plan) string {
				return fmt.Sprintf("{type: InternalIP, address: %q}", fmt.Sprintf(p.nodeIP, i+2))
			}), ", "))
	}
	g.doc()
	g.printf("apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\nspec: {cidrs: [%s]}\n",
		strings.Join(g.each(func(p plan) string { return strconv.Quote(p.serviceCIDR) }), ", "))
}

// each is f of each of the cluster's families, the primary one first.
func (g *gen) each(f func(plan) string) []string {
	out := make([]string, len(g.fams))
	for i, p := range g.fams {
		out[i] = f(p)
	}
	return out
}

// nodePortAddresses is the i-th choice of the primary family; in a dual-stack
// cluster, half the time with the other family's i-th choice as well (kube-proxy
// then limits NodePorts in both families).
func (g *gen) nodePortAddresses(i int) string {
	if !g.o.Dual || g.chance(50) {
		return g.a.nodePortAddresses[i]
	}
	return "[" + strings.Join(g.each(func(p plan) string {
		return strings.Trim(p.nodePortAddresses[i], "[]")
	}), ", ") + "]"
}

// families writes a Service's ipFamilyPolicy and ipFamilies in a dual-stack
// cluster and returns its families as the API server gives them, the first the
// primary: no policy (the cluster's primary family), SingleStack of either
// family, PreferDualStack, RequireDualStack with or without ipFamilies (the
// secondary family first).
func (g *gen) families() []plan {
	if !g.o.Dual {
		return g.fams
	}
	primary, other := g.fams[0], g.fams[1]
	switch g.rnd.IntN(6) {
	case 0:
		return []plan{primary}
	case 1, 2:
		p := []plan{primary, other}[g.rnd.IntN(2)]
		g.printf("  ipFamilyPolicy: SingleStack\n  ipFamilies: [%s]\n", p.family)
		return []plan{p}
	case 3:
		g.printf("  ipFamilyPolicy: PreferDualStack\n")
		return g.fams
	case 4:
		g.printf("  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [%s, %s]\n", other.family, primary.family)
		return []plan{other, primary}
	}
	g.printf("  ipFamilyPolicy: RequireDualStack\n")
	return g.fams
}

// port is one service port as generated.
type port struct {
	name, proto string
	port        int
	target      int    // endpoint port
	named       string // targetPort name, "" for numeric
}

func (g *gen) service(i int) {
	name := fmt.Sprintf("svc-%d", i)
	ns := g.pick("default", "shop")
	kind := g.pick("ClusterIP", "ClusterIP", "NodePort", "LoadBalancer", "LoadBalancer", "ExternalIPs", "Headless", "ExternalName")
	g.doc()
	g.printf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec:\n", name, ns)
	switch kind {
	case "ExternalName":
		g.printf("  type: ExternalName\n  externalName: example.com\n")
		return
	case "Headless":
		g.printf("  clusterIP: None\n  selector: {app: %s}\n  ports: [{name: http, port: 80}]\n", name)
		return
	case "ExternalIPs":
		g.printf("  type: ClusterIP\n")
	default:
		g.printf("  type: %s\n", kind)
	}
	fams := g.families()
	if g.chance(70) {
		g.clusterIP++
		ips := make([]string, len(fams))
		for i, p := range fams {
			ips[i] = strconv.Quote(fmt.Sprintf(p.clusterIP, 10+g.clusterIP))
		}
		g.printf("  clusterIP: %s\n", ips[0])
		if g.o.Dual {
			g.printf("  clusterIPs: [%s]\n", strings.Join(ips, ", "))
		}
	}
	external := kind != "ClusterIP"
	if external && g.chance(45) {
		g.printf("  externalTrafficPolicy: Local\n")
	}
	if g.chance(25) {
		g.printf("  internalTrafficPolicy: Local\n")
	}
	if g.chance(25) {
		g.printf("  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: %d}}\n", 10+g.rnd.IntN(10800))
	}
	if kind == "ExternalIPs" || (external && g.chance(20)) {
		g.externalIP++
		g.printf("  externalIPs: [%q]\n", fmt.Sprintf(g.some(g.fams).externalIP, g.externalIP))
	}
	if kind == "LoadBalancer" && g.chance(50) {
		ranges := g.pick(fams[0].sourceRanges...)
		if g.o.Dual && g.chance(50) {
			ranges += ", " + g.pick(g.some(g.fams).sourceRanges...)
		}
		g.printf("  loadBalancerSourceRanges: [%s]\n", ranges)
	}
	ports := g.ports(kind)
	g.printf("  ports:\n")
	for _, p := range ports {
		g.printf("  - {name: %q, protocol: %s, port: %d", p.name, p.proto, p.port)
		if p.named != "" {
			g.printf(", targetPort: %s", p.named)
		} else {
			g.printf(", targetPort: %d", p.target)
		}
		if kind != "ClusterIP" && kind != "ExternalIPs" && g.chance(80) {
			g.nodePort++
			g.printf(", nodePort: %d", 30000+g.nodePort)
		}
		g.printf("}\n")
	}
	usesPods := g.chance(35)
	if usesPods {
		g.printf("  selector: {app: %s}\n", name)
	}
	if kind == "LoadBalancer" {
		g.lbIP++
		mode := ""
		if g.chance(15) {
			mode = ", ipMode: Proxy"
		}
		ingress := make([]string, len(fams))
		for i, p := range fams {
			ingress[i] = fmt.Sprintf("{ip: %q%s}", fmt.Sprintf(p.lbIP, g.lbIP), mode)
		}
		g.printf("status: {loadBalancer: {ingress: [%s]}}\n", strings.Join(ingress, ", "))
	}
	switch {
	case usesPods:
		g.pods(name, ns, ports)
	case g.chance(15):
		g.endpoints(name, ns, ports, fams[0])
	default:
		g.slices(name, ns, ports, fams)
	}
}

// some is one of fams: the only one, else either. (A Service's external IPs and
// source ranges may be of a family it has no ClusterIP of: the API server takes
// them, and each family's proxier uses those of its own family.)
func (g *gen) some(fams []plan) plan {
	if len(fams) == 1 {
		return fams[0]
	}
	return fams[g.rnd.IntN(len(fams))]
}

// ports makes one to three ports; named target ports only where Pods can name them.
func (g *gen) ports(kind string) []port {
	n := 1 + g.rnd.IntN(3)
	var out []port
	for j := 0; j < n; j++ {
		p := port{name: fmt.Sprintf("p%d", j), proto: g.pick("TCP", "TCP", "TCP", "UDP", "SCTP"), port: 80 + j, target: 8000 + g.rnd.IntN(3)*10 + j}
		if n == 1 && g.chance(40) {
			p.name = ""
		}
		if g.chance(30) {
			p.named = fmt.Sprintf("tp%d", j)
		}
		out = append(out, p)
	}
	return out
}

// endpoint is one backend as generated: its node and conditions.
type endpoint struct {
	n                         int // the pod's number on its node
	node                      int
	ready, serving, terminate bool
}

func (g *gen) endpointSet() []endpoint {
	n := g.rnd.IntN(5)
	var out []endpoint
	for i := 0; i < n; i++ {
		e := endpoint{node: g.rnd.IntN(3), ready: true, serving: true}
		switch g.rnd.IntN(6) {
		case 0:
			e.ready, e.serving = false, false
		case 1:
			e.ready, e.terminate = false, true
		case 2:
			e.ready, e.serving, e.terminate = false, false, true
		}
		g.pod[e.node]++
		e.n = 10 + g.pod[e.node]
		out = append(out, e)
	}
	return out
}

// ip is the endpoint's address in a family.
func (e endpoint) ip(p plan) string { return fmt.Sprintf(p.pod, e.node+1, e.n) }

// slices writes the EndpointSlices of a Service's families: the same endpoints
// (pods with an address of each family), in slices of that addressType.
func (g *gen) slices(name, ns string, ports []port, fams []plan) {
	eps := g.endpointSet()
	hints := g.chance(20)
	for _, fam := range fams {
		g.familySlices(name, ns, ports, fam, eps, hints)
	}
}

func (g *gen) familySlices(name, ns string, ports []port, fam plan, eps []endpoint, hints bool) {
	for k, group := range [][]port{ports[:1], ports[1:]} {
		if len(group) == 0 {
			continue
		}
		slice := fmt.Sprintf("%s-%d", name, k)
		if g.o.Dual {
			slice += "-" + strings.ToLower(fam.family)
		}
		g.doc()
		g.printf("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s, namespace: %s, labels: {kubernetes.io/service-name: %s}}\n", slice, ns, name)
		g.printf("addressType: %s\nports:\n", fam.family)
		for _, p := range group {
			g.printf("- {name: %q, protocol: %s, port: %d}\n", p.name, p.proto, p.target)
		}
		g.printf("endpoints:\n")
		for _, e := range eps {
			g.printf("- addresses: [%q]\n  nodeName: %s\n  zone: %s\n", e.ip(fam), nodes[e.node].name, nodes[e.node].zone)
			g.printf("  conditions: {ready: %t, serving: %t, terminating: %t}\n", e.ready, e.serving, e.terminate)
			if hints {
				g.printf("  hints: {forZones: [{name: %s}]}\n", nodes[e.node].zone)
			}
		}
	}
}

// endpoints writes a v1 Endpoints object (svcgen mirrors it into a slice), with
// the addresses of the Service's primary family, as the Endpoints controller
// lists them.
func (g *gen) endpoints(name, ns string, ports []port, fam plan) {
	eps := g.endpointSet()
	g.doc()
	g.printf("apiVersion: v1\nkind: Endpoints\nmetadata: {name: %s, namespace: %s}\nsubsets:\n- ports:\n", name, ns)
	for _, p := range ports {
		g.printf("  - {name: %q, protocol: %s, port: %d}\n", p.name, p.proto, p.target)
	}
	var ready, notReady []string
	for _, e := range eps {
		a := fmt.Sprintf("{ip: %q, nodeName: %s}", e.ip(fam), nodes[e.node].name)
		if e.ready {
			ready = append(ready, a)
		} else {
			notReady = append(notReady, a)
		}
	}
	g.printf("  addresses: [%s]\n  notReadyAddresses: [%s]\n", strings.Join(ready, ", "), strings.Join(notReady, ", "))
}

// pods writes the Pods a selector picks, with container ports for named target ports
// (some pods lack a name, so they give no endpoint for that port).
func (g *gen) pods(name, ns string, ports []port) {
	for i, e := range g.endpointSet() {
		g.doc()
		g.printf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s-%d\n  namespace: %s\n  labels: {app: %s}\n", name, i, ns, name)
		if e.terminate {
			g.printf("  deletionTimestamp: \"2024-01-01T00:00:00Z\"\n")
		}
		g.printf("spec:\n  nodeName: %s\n  containers:\n  - name: c\n    ports:\n", nodes[e.node].name)
		for _, p := range ports {
			if p.named != "" && g.chance(85) {
				g.printf("    - {name: %s, containerPort: %d, protocol: %s}\n", p.named, p.target, p.proto)
			}
		}
		g.printf("    - {containerPort: 9999}\n")
		cond := "True"
		if !e.serving {
			cond = "False"
		}
		g.printf("status:\n  phase: Running\n  podIP: %q\n", e.ip(g.a))
		if g.o.Dual {
			g.printf("  podIPs: [%s]\n", strings.Join(g.each(func(p plan) string { return fmt.Sprintf("{ip: %q}", e.ip(p)) }), ", "))
		}
		g.printf("  conditions: [{type: Ready, status: \"%s\"}]\n", cond)
	}
}
