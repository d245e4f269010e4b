package nft

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// portPlan is one service port's names and kube-proxy's decisions for it. It is all a
// port's chains, rules, sets and elements are made from, one object at a time: Build
// keeps them, the script writer writes each as it comes (see table).
type portPlan struct {
	p                                  *ir.Port
	spn, proto, port, cip              string
	cluster, local, external, firewall string
	endpoints                          []string // by index of p.Endpoints; "" if unreachable
	usesCluster, usesLocal, usesExt    bool
	usesFW                             bool
	internalChain, externalPolicyChain string
	internalVerdict, externalVerdict   string // "" when traffic has somewhere to go
}

// chainKind says which of a port's chains a chain is.
type chainKind uint8

const (
	endpointChain chainKind = iota // one endpoint: DNAT
	clusterChain                   // Cluster traffic policy: pick an endpoint
	localChain                     // Local traffic policy: pick a local endpoint
	externalChain                  // external destinations
	firewallChain                  // loadBalancerSourceRanges
)

// portChain is one chain of a port: its kind and, for an endpoint chain, the
// endpoint's index in p.Endpoints.
type portChain struct {
	kind chainKind
	ep   int
}

func (b *builder) plan(p *ir.Port) *portPlan {
	proto := p.Protocol.Lower()
	base := portBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port)
	pp := &portPlan{
		p: p, spn: p.Name.String(), proto: proto, port: strconv.Itoa(int(p.Port)), cip: p.ClusterIP.String(),
		cluster: prefixService + base, local: prefixLocal + base, external: prefixExternal + base, firewall: prefixFirewall + base,
		endpoints: make([]string, len(p.Endpoints)),
	}
	for _, i := range p.Reachable {
		pp.endpoints[i] = prefixEndpoint + endpointBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port, p.Endpoints[i].String())
	}
	pp.usesCluster = len(p.Cluster) > 0 && p.UsesCluster()
	pp.usesLocal = len(p.Local) > 0 && p.UsesLocal()
	pp.usesExt = p.HasEndpoints && p.ExternallyAccessible()
	pp.usesFW = p.HasSourceRanges()
	pp.internalChain, pp.externalPolicyChain = pp.cluster, pp.cluster
	if p.InternalPolicyLocal {
		pp.internalChain = pp.local
	}
	if p.ExternalPolicyLocal {
		pp.externalPolicyChain = pp.local
	}
	pp.internalVerdict, pp.externalVerdict = verdict(p.Internal()), verdict(p.External())
	return pp
}

// affinitySet is the ClientIP affinity set of an endpoint: its chain's name with the
// affinity prefix.
func (pp *portPlan) affinitySet(i int) string {
	return prefixAffinity + pp.endpoints[i][len(prefixEndpoint):]
}

// verdict is what the no-endpoint maps do with traffic that has nowhere to go.
func verdict(r ir.Route) string {
	switch r {
	case ir.Reject:
		return goTo(rejectChain)
	case ir.Drop:
		return "drop"
	}
	return ""
}

// eachChain calls f with every chain of the port. (Internal traffic with somewhere to
// go goes to the Cluster or Local chain, which the port then has: see ir.Port.Internal.)
func (pp *portPlan) eachChain(f func(name string, c portChain)) {
	for _, i := range pp.p.Reachable {
		f(pp.endpoints[i], portChain{endpointChain, i})
	}
	if pp.usesCluster {
		f(pp.cluster, portChain{kind: clusterChain})
	}
	if pp.usesLocal {
		f(pp.local, portChain{kind: localChain})
	}
	if pp.usesExt {
		f(pp.external, portChain{kind: externalChain})
	}
	if pp.usesFW {
		f(pp.firewall, portChain{kind: firewallChain})
	}
}

// eachAffinitySet calls f with the port's ClientIP affinity sets, one per reachable
// endpoint.
func (b *builder) eachAffinitySet(pp *portPlan, f func(*knftables.Set)) {
	if pp.p.AffinitySeconds == 0 {
		return
	}
	timeout := time.Duration(pp.p.AffinitySeconds) * time.Second
	for _, i := range pp.p.Reachable {
		f(&knftables.Set{
			Name:    pp.affinitySet(i),
			Type:    b.addrType,
			Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
			Timeout: &timeout,
		})
	}
}

// ruleSink receives a chain's rules in order: the rule's text, only valid during the
// call, and its comment ("" for none).
type ruleSink func(chain string, text []byte, comment string)

// chainRules makes the rules of one of a port's chains.
func (b *builder) chainRules(pp *portPlan, c portChain, out ruleSink) {
	switch c.kind {
	case endpointChain:
		b.endpointRules(pp, c.ep, out)
	case clusterChain:
		b.policyRules(pp, pp.cluster, pp.p.Cluster, out)
	case localChain:
		b.policyRules(pp, pp.local, pp.p.Local, out)
	case externalChain:
		b.externalRules(pp, out)
	case firewallChain:
		b.firewallRule(pp, out)
	}
}

// policyRules: the chain internal traffic goes to first masquerades cluster-IP traffic
// from outside the cluster (or all of it); then every policy chain picks an endpoint.
func (b *builder) policyRules(pp *portPlan, chain string, idx []int, out ruleSink) {
	if chain == pp.internalChain && pp.internalVerdict == "" {
		switch {
		case b.sm.MasqueradeAll:
			out(chain, b.text.reset().w(b.ipX, "daddr", pp.cip, "jump", markMasqChain).b, "")
		case b.sm.LocalDetector.Implemented():
			out(chain, b.text.reset().w(b.ipX, "daddr", pp.cip, b.notLocal, "jump", markMasqChain).b, "")
		}
	}
	b.dispatch(pp, chain, idx, out)
}

// externalRules: Cluster policy masquerades everything; Local policy keeps client
// addresses but short-circuits pod and node traffic to every endpoint.
func (b *builder) externalRules(pp *portPlan, out ruleSink) {
	t := &b.text
	if !pp.p.ExternalPolicyLocal {
		out(pp.external, t.reset().w("jump", markMasqChain).b, "")
	} else {
		if b.sm.LocalDetector.Implemented() {
			out(pp.external, t.reset().w(b.local, "goto", pp.cluster).b, "short-circuit pod traffic")
		}
		out(pp.external, t.reset().w("fib saddr type local jump", markMasqChain).b, "masquerade local traffic")
		out(pp.external, t.reset().w("fib saddr type local goto", pp.cluster).b, "short-circuit local traffic")
	}
	if pp.externalVerdict == "" {
		out(pp.external, t.reset().w("goto", pp.externalPolicyChain).b, "")
	}
}

// firewallRule drops sources outside loadBalancerSourceRanges (and the node's own
// load-balancer IPs when a range holds the node's address):
// "ip saddr != { 192.0.2.0/24 , 198.51.100.7 } drop".
func (b *builder) firewallRule(pp *portPlan, out ruleSink) {
	t := b.text.reset().w(b.ipX, "saddr != {")
	for i, r := range pp.p.SourceRanges {
		if i > 0 {
			t.w(",")
		}
		t.prefix(r)
	}
	if pp.p.FirewallAllowsNode(b.sm.Node.IP) {
		for _, ip := range pp.p.LoadBalancerIPs {
			t.w(",").addr(ip)
		}
	}
	out(pp.firewall, t.w("}", "drop").b, "")
}

// dispatch spreads a policy chain over endpoints with "numgen random mod N vmap",
// after the affinity checks.
func (b *builder) dispatch(pp *portPlan, chain string, idx []int, out ruleSink) {
	t := &b.text
	if pp.p.AffinitySeconds > 0 {
		for _, i := range idx {
			out(chain, t.reset().w(b.ipX, "saddr").at(pp.affinitySet(i)).w("goto", pp.endpoints[i]).b, "")
		}
	}
	t.reset().w("numgen random mod").int(len(idx)).w("vmap {")
	for k, i := range idx {
		if k > 0 {
			t.w(",")
		}
		t.int(k).w(":", "goto", pp.endpoints[i])
	}
	out(chain, t.w("}").b, "")
}

// endpointRules: masquerade hairpin traffic, remember the client for affinity, DNAT.
func (b *builder) endpointRules(pp *portPlan, i int, out ruleSink) {
	ep, chain, t := pp.p.Endpoints[i], pp.endpoints[i], &b.text
	out(chain, t.reset().w(b.ipX, "saddr").addr(ep.IP).w("jump", markMasqChain).b, "")
	if pp.p.AffinitySeconds > 0 {
		out(chain, t.reset().w("update").at(pp.affinitySet(i)).w("{", b.ipX, "saddr", "}").b, "")
	}
	out(chain, t.reset().w("meta l4proto", pp.proto, "dnat to").addrPort(netip.AddrPortFrom(ep.IP, ep.Port)).b, "")
}

// elementContainers are the sets and maps that service ports fill.
var elementContainers = []string{clusterIPsSet, serviceIPsMap, noEndpointServicesMap, firewallIPsMap, serviceNodePortsMap, noEndpointNodePorts}

// elements makes the port's elements of one set or map (kube-proxy writes these on
// every sync): for each, the cluster IP first, then external IPs, then load-balancer
// IPs, as kube-proxy visits them.
func (b *builder) elements(pp *portPlan, container string, out func(*knftables.Element)) {
	p := pp.p
	key := func(addr string) []string { return []string{addr, pp.proto, pp.port} }
	external := func(f func(ip string, lb bool)) {
		for _, ip := range p.ExternalIPs {
			f(ip.String(), false)
		}
		for _, ip := range p.LoadBalancerIPs {
			f(ip.String(), true)
		}
	}
	switch container {
	case clusterIPsSet:
		out(&knftables.Element{Set: clusterIPsSet, Key: []string{pp.cip}})
	case serviceIPsMap:
		if pp.internalVerdict == "" {
			out(&knftables.Element{Map: serviceIPsMap, Key: key(pp.cip), Value: []string{goTo(pp.internalChain)}})
		}
		if p.HasEndpoints {
			external(func(ip string, _ bool) {
				out(&knftables.Element{Map: serviceIPsMap, Key: key(ip), Value: []string{goTo(pp.external)}})
			})
		}
	case noEndpointServicesMap:
		if pp.internalVerdict != "" {
			out(&knftables.Element{Map: noEndpointServicesMap, Key: key(pp.cip), Value: []string{pp.internalVerdict}, Comment: &pp.spn})
		}
		if pp.externalVerdict != "" {
			external(func(ip string, _ bool) {
				out(&knftables.Element{Map: noEndpointServicesMap, Key: key(ip), Value: []string{pp.externalVerdict}, Comment: &pp.spn})
			})
		}
	case firewallIPsMap:
		if pp.usesFW {
			for _, ip := range p.LoadBalancerIPs {
				out(&knftables.Element{Map: firewallIPsMap, Key: key(ip.String()), Value: []string{goTo(pp.firewall)}})
			}
		}
	case serviceNodePortsMap:
		if p.NodePort != 0 && p.HasEndpoints {
			out(&knftables.Element{Map: serviceNodePortsMap, Key: []string{pp.proto, strconv.Itoa(int(p.NodePort))}, Value: []string{goTo(pp.external)}})
		}
	case noEndpointNodePorts:
		if p.NodePort != 0 && pp.externalVerdict != "" {
			out(&knftables.Element{Map: noEndpointNodePorts, Key: []string{pp.proto, strconv.Itoa(int(p.NodePort))}, Value: []string{pp.externalVerdict}, Comment: &pp.spn})
		}
	}
}
