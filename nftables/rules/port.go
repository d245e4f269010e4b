package rules

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/syntax"
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
	endpointChains                     bool   // see builder.endpointChains
	// comment is the comment of the port's no-endpoint elements: the service port
	// (v1.37 cuts it to knftables.CommentLengthMax).
	comment *string
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
	base := syntax.PortBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port)
	pp := &portPlan{
		p: p, spn: p.Name.String(), proto: proto, port: strconv.Itoa(int(p.Port)), cip: p.ClusterIP.String(),
		cluster: syntax.PrefixService + base, local: syntax.PrefixLocal + base, external: syntax.PrefixExternal + base, firewall: syntax.PrefixFirewall + base,
		endpoints: make([]string, len(p.Endpoints)),
	}
	for _, i := range p.Reachable {
		pp.endpoints[i] = syntax.PrefixEndpoint + syntax.EndpointBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port, p.Endpoints[i].String())
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
	comment := pp.spn
	if max := b.sm.Target.Layout.NFTElementCommentMax; max > 0 && len(comment) > max {
		comment = comment[:max] // v1.37: knftables.CommentLengthMax
	}
	pp.comment = &comment
	pp.endpointChains = b.endpointChains(pp)
	return pp
}

// endpointChains: the port's endpoints have chains of their own. From v1.36 only
// ClientIP affinity needs them; otherwise the policy chain DNATs itself.
func (b *builder) endpointChains(pp *portPlan) bool {
	return !b.sm.Target.Layout.NFTNumgenDNAT || pp.p.AffinitySeconds > 0
}

// affinitySet is the ClientIP affinity set of an endpoint: its chain's name with the
// affinity prefix.
func (pp *portPlan) affinitySet(i int) string {
	return syntax.PrefixAffinity + pp.endpoints[i][len(syntax.PrefixEndpoint):]
}

// verdict is what the no-endpoint maps do with traffic that has nowhere to go.
func verdict(r ir.Route) string {
	switch r {
	case ir.Reject:
		return goTo(syntax.RejectChain)
	case ir.Drop:
		return "drop"
	}
	return ""
}

// eachChain calls f with every chain of the port. (Internal traffic with somewhere to
// go goes to the Cluster or Local chain, which the port then has: see ir.Port.Internal.)
func (pp *portPlan) eachChain(f func(name string, c portChain)) {
	if pp.endpointChains {
		for _, i := range pp.p.Reachable {
			f(pp.endpoints[i], portChain{endpointChain, i})
		}
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

// chainRules makes the rules of one of a port's chains.
func (b *builder) chainRules(pp *portPlan, c portChain, out syntax.RuleSink) {
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

// masquerade appends what marks a packet for masquerading to a rule: v1.34/v1.35 jump
// to mark-for-masquerade, v1.36 sets the mark in the rule. It is the one place a
// port's rules do it.
func (b *builder) masquerade(t *syntax.Text) *syntax.Text {
	if b.sm.Target.Layout.NFTInlineMasquerade {
		return t.W("mark set mark or", b.mark)
	}
	return t.W("jump", syntax.MarkMasqChain)
}

// policyRules: the chain internal traffic goes to first masquerades cluster-IP traffic
// from outside the cluster (or all of it); then every policy chain picks an endpoint.
func (b *builder) policyRules(pp *portPlan, chain string, idx []int, out syntax.RuleSink) {
	// (From v1.36 one rule in the services chain does it for every cluster IP.)
	if chain == pp.internalChain && pp.internalVerdict == "" && !b.sm.Target.Layout.NFTInlineMasquerade {
		switch {
		case b.sm.MasqueradeAll:
			out(chain, b.masquerade(b.text.Reset().W(b.ipX, "daddr", pp.cip)).Bytes(), "")
		case b.sm.LocalDetector.Implemented():
			out(chain, b.masquerade(b.text.Reset().W(b.ipX, "daddr", pp.cip, b.notLocal)).Bytes(), "")
		}
	}
	b.dispatch(pp, chain, idx, out)
}

// externalRules: Cluster policy masquerades everything; Local policy keeps client
// addresses but short-circuits pod and node traffic to every endpoint.
func (b *builder) externalRules(pp *portPlan, out syntax.RuleSink) {
	t := &b.text
	if !pp.p.ExternalPolicyLocal {
		comment := ""
		if b.sm.Target.Layout.NFTInlineMasquerade {
			comment = "masquerade"
		}
		out(pp.external, b.masquerade(t.Reset()).Bytes(), comment)
	} else {
		if b.sm.LocalDetector.Implemented() {
			out(pp.external, t.Reset().W(b.local, "goto", pp.cluster).Bytes(), "short-circuit pod traffic")
		}
		out(pp.external, b.masquerade(t.Reset().W("fib saddr type local")).Bytes(), "masquerade local traffic")
		out(pp.external, t.Reset().W("fib saddr type local goto", pp.cluster).Bytes(), "short-circuit local traffic")
	}
	if pp.externalVerdict == "" {
		out(pp.external, t.Reset().W("goto", pp.externalPolicyChain).Bytes(), "")
	}
}

// firewallRule drops sources outside loadBalancerSourceRanges (and the node's own
// load-balancer IPs when a range holds the node's address):
// "ip saddr != { 192.0.2.0/24 , 198.51.100.7 } drop".
func (b *builder) firewallRule(pp *portPlan, out syntax.RuleSink) {
	t := b.text.Reset().W(b.ipX, "saddr != {")
	for i, r := range pp.p.SourceRanges {
		if i > 0 {
			t.W(",")
		}
		t.Prefix(r)
	}
	if pp.p.FirewallAllowsNode(b.sm.Node.IP) {
		for _, ip := range pp.p.LoadBalancerIPs {
			t.W(",").Addr(ip)
		}
	}
	out(pp.firewall, t.W("}", "drop").Bytes(), "")
}

// dispatch spreads a policy chain over endpoints with "numgen random mod N vmap",
// after the affinity checks. It is the one place that picks an endpoint: from v1.36,
// without affinity, it DNATs itself with a numgen map (v1.37: a lone endpoint
// directly, "dnat to IP:port").
func (b *builder) dispatch(pp *portPlan, chain string, idx []int, out syntax.RuleSink) {
	t := &b.text
	if !pp.endpointChains {
		b.dnat(pp, chain, idx, out)
		return
	}
	if pp.p.AffinitySeconds > 0 {
		for _, i := range idx {
			out(chain, t.Reset().W(b.ipX, "saddr").At(pp.affinitySet(i)).W("goto", pp.endpoints[i]).Bytes(), "")
		}
	}
	t.Reset().W("numgen random mod").Int(len(idx)).W("vmap {")
	for k, i := range idx {
		if k > 0 {
			t.W(",")
		}
		t.Int(k).W(":", "goto", pp.endpoints[i])
	}
	out(chain, t.W("}").Bytes(), "")
}

// dnat DNATs to the endpoints without endpoint chains (v1.36): "meta l4proto tcp dnat
// ip addr . port to numgen random mod 2 map { 0 : 10.1.0.5 . 80 , 1 : ... }", or, in
// v1.37, for one endpoint, "meta l4proto tcp dnat to 10.1.0.5:80".
func (b *builder) dnat(pp *portPlan, chain string, idx []int, out syntax.RuleSink) {
	t := b.text.Reset().W("meta l4proto", pp.proto)
	if len(idx) == 1 && b.sm.Target.Layout.NFTSingleEndpointDNAT {
		ep := pp.p.Endpoints[idx[0]]
		out(chain, t.W("dnat to").AddrPort(netip.AddrPortFrom(ep.IP, ep.Port)).Bytes(), "")
		return
	}
	t.W("dnat", b.ipX, "addr . port to numgen random mod").Int(len(idx)).W("map {")
	for k, i := range idx {
		if k > 0 {
			t.W(",")
		}
		ep := pp.p.Endpoints[i]
		t.Int(k).W(":").Addr(ep.IP).W(".").Int(int(ep.Port))
	}
	out(chain, t.W("}").Bytes(), "")
}

// endpointRules: masquerade hairpin traffic (before v1.36; after, the masquerading
// chain does, with the hairpin-connections set), remember the client for affinity,
// DNAT.
func (b *builder) endpointRules(pp *portPlan, i int, out syntax.RuleSink) {
	ep, chain, t := pp.p.Endpoints[i], pp.endpoints[i], &b.text
	if !b.sm.Target.Layout.NFTInlineMasquerade {
		out(chain, b.masquerade(t.Reset().W(b.ipX, "saddr").Addr(ep.IP)).Bytes(), "")
	}
	if pp.p.AffinitySeconds > 0 {
		out(chain, t.Reset().W("update").At(pp.affinitySet(i)).W("{", b.ipX, "saddr", "}").Bytes(), "")
	}
	out(chain, t.Reset().W("meta l4proto", pp.proto, "dnat to").AddrPort(netip.AddrPortFrom(ep.IP, ep.Port)).Bytes(), "")
}

// ElementContainers are the sets and maps that service ports fill, which every sync
// reconciles element by element (kube-proxy's nftElementStorage), in the order a
// partial sync writes their changes.
var ElementContainers = []string{syntax.ClusterIPsSet, syntax.ServiceIPsMap, syntax.FirewallIPsMap, syntax.NoEndpointServicesMap, syntax.NoEndpointNodePorts, syntax.ServiceNodePortsMap, syntax.HairpinSet}

// elements makes the port's elements of one set or map (kube-proxy writes these on
// every sync): for each, the cluster IP first, then external IPs, then load-balancer
// IPs, as kube-proxy visits them.
func (b *builder) elements(pp *portPlan, container string, out func(*knftables.Element)) {
	p := pp.p
	key := func(addr string) []string { return []string{addr, pp.proto, pp.port} }
	external := func(f func(ip string)) {
		for _, ip := range p.ExternalIPs {
			f(ip.String())
		}
		for _, ip := range p.LoadBalancerIPs {
			f(ip.String())
		}
	}
	switch container {
	case syntax.ClusterIPsSet:
		out(&knftables.Element{Set: syntax.ClusterIPsSet, Key: []string{pp.cip}})
	case syntax.ServiceIPsMap:
		if pp.internalVerdict == "" {
			out(&knftables.Element{Map: syntax.ServiceIPsMap, Key: key(pp.cip), Value: []string{goTo(pp.internalChain)}})
		}
		if p.HasEndpoints {
			external(func(ip string) {
				out(&knftables.Element{Map: syntax.ServiceIPsMap, Key: key(ip), Value: []string{goTo(pp.external)}})
			})
		}
	case syntax.NoEndpointServicesMap:
		if pp.internalVerdict != "" {
			out(&knftables.Element{Map: syntax.NoEndpointServicesMap, Key: key(pp.cip), Value: []string{pp.internalVerdict}, Comment: pp.comment})
		}
		if pp.externalVerdict != "" {
			external(func(ip string) {
				out(&knftables.Element{Map: syntax.NoEndpointServicesMap, Key: key(ip), Value: []string{pp.externalVerdict}, Comment: pp.comment})
			})
		}
	case syntax.FirewallIPsMap:
		if pp.usesFW {
			for _, ip := range p.LoadBalancerIPs {
				out(&knftables.Element{Map: syntax.FirewallIPsMap, Key: key(ip.String()), Value: []string{goTo(pp.firewall)}})
			}
		}
	case syntax.ServiceNodePortsMap:
		if p.NodePort != 0 && p.HasEndpoints {
			out(&knftables.Element{Map: syntax.ServiceNodePortsMap, Key: []string{pp.proto, strconv.Itoa(int(p.NodePort))}, Value: []string{goTo(pp.external)}})
		}
	case syntax.HairpinSet:
		// v1.36: each endpoint on this node, reaching itself through its Service.
		if b.sm.Target.Layout.NFTInlineMasquerade {
			for _, i := range p.Reachable {
				if ep := p.Endpoints[i]; ep.Local {
					ip, port := ep.IP.String(), strconv.Itoa(int(ep.Port))
					out(&knftables.Element{Set: syntax.HairpinSet, Key: []string{ip, ip, pp.proto, port}})
				}
			}
		}
	case syntax.NoEndpointNodePorts:
		if p.NodePort != 0 && pp.externalVerdict != "" {
			out(&knftables.Element{Map: syntax.NoEndpointNodePorts, Key: []string{pp.proto, strconv.Itoa(int(p.NodePort))}, Value: []string{pp.externalVerdict}, Comment: pp.comment})
		}
	}
}
