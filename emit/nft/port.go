package nft

import (
	"strconv"
	"time"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// portPlan is one service port's names and kube-proxy's decisions for it.
type portPlan struct {
	p                                  *ir.Port
	spn, proto, port, cip              string
	cluster, local, external, firewall string
	endpoints, affinity                []string // by index of p.Endpoints; "" if unreachable
	usesCluster, usesLocal, usesExt    bool
	usesFW                             bool
	internalChain, externalPolicyChain string
	internalVerdict, externalVerdict   string // "" when traffic has somewhere to go
}

func (b *builder) plan(p *ir.Port) *portPlan {
	proto := p.Protocol.Lower()
	base := portBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port)
	pp := &portPlan{
		p: p, spn: p.Name.String(), proto: proto, port: strconv.Itoa(int(p.Port)), cip: p.ClusterIP.String(),
		cluster: prefixService + base, local: prefixLocal + base, external: prefixExternal + base, firewall: prefixFirewall + base,
		endpoints: make([]string, len(p.Endpoints)), affinity: make([]string, len(p.Endpoints)),
	}
	for _, i := range p.Reachable {
		eb := endpointBase(p.Name.Namespace, p.Name.Service, proto, p.Name.Port, p.Endpoints[i].String())
		pp.endpoints[i], pp.affinity[i] = prefixEndpoint+eb, prefixAffinity+eb
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

// Chains lists the port's own chains.
func (pp *portPlan) chains() []string {
	var out []string
	for _, i := range pp.p.Reachable {
		out = append(out, pp.endpoints[i])
	}
	if pp.usesCluster {
		out = append(out, pp.cluster)
	}
	if pp.usesLocal {
		out = append(out, pp.local)
	}
	if pp.usesExt {
		out = append(out, pp.external)
	}
	if pp.usesFW {
		out = append(out, pp.firewall)
	}
	return out
}

// port writes one service port: its map elements, chains and rules.
func (b *builder) port(p *ir.Port) {
	pp := b.plan(p)
	for _, c := range pp.chains() {
		b.st.chain(&knftables.Chain{Name: c})
	}
	b.elements(pp)
	b.internalRules(pp)
	if pp.usesExt {
		b.externalRules(pp)
	}
	if pp.usesFW {
		b.firewallRule(pp)
	}
	b.affinitySets(pp)
	if pp.usesCluster {
		b.dispatch(pp, pp.cluster, p.Cluster)
	}
	if pp.usesLocal {
		b.dispatch(pp, pp.local, p.Local)
	}
	for _, i := range p.Reachable {
		b.endpointRules(pp, i)
	}
}

// key is "ADDR . proto . port".
func (pp *portPlan) key(addr string) []string { return []string{addr, pp.proto, pp.port} }

// elements fills cluster-ips, service-ips, no-endpoint-services, firewall-ips,
// service-nodeports and no-endpoint-nodeports (kube-proxy writes these on every sync).
func (b *builder) elements(pp *portPlan) {
	st, p := b.st, pp.p
	st.element(&knftables.Element{Set: clusterIPsSet, Key: []string{pp.cip}})
	if pp.internalVerdict == "" {
		st.element(&knftables.Element{Map: serviceIPsMap, Key: pp.key(pp.cip), Value: []string{goTo(pp.internalChain)}})
	} else {
		st.element(&knftables.Element{Map: noEndpointServicesMap, Key: pp.key(pp.cip), Value: []string{pp.internalVerdict}, Comment: &pp.spn})
	}
	for _, ip := range p.ExternalIPs {
		b.externalElements(pp, ip.String(), false)
	}
	for _, ip := range p.LoadBalancerIPs {
		b.externalElements(pp, ip.String(), true)
	}
	if p.NodePort == 0 {
		return
	}
	np := []string{pp.proto, strconv.Itoa(int(p.NodePort))}
	if p.HasEndpoints {
		st.element(&knftables.Element{Map: serviceNodePortsMap, Key: np, Value: []string{goTo(pp.external)}})
	}
	if pp.externalVerdict != "" {
		st.element(&knftables.Element{Map: noEndpointNodePorts, Key: np, Value: []string{pp.externalVerdict}, Comment: &pp.spn})
	}
}

// externalElements writes the elements of an external IP or load-balancer IP.
func (b *builder) externalElements(pp *portPlan, ip string, lb bool) {
	st := b.st
	if pp.p.HasEndpoints {
		st.element(&knftables.Element{Map: serviceIPsMap, Key: pp.key(ip), Value: []string{goTo(pp.external)}})
	}
	if lb && pp.usesFW {
		st.element(&knftables.Element{Map: firewallIPsMap, Key: pp.key(ip), Value: []string{goTo(pp.firewall)}})
	}
	if pp.externalVerdict != "" {
		st.element(&knftables.Element{Map: noEndpointServicesMap, Key: pp.key(ip), Value: []string{pp.externalVerdict}, Comment: &pp.spn})
	}
}

// internalRules masquerades cluster-IP traffic from outside the cluster (or all of it).
func (b *builder) internalRules(pp *portPlan) {
	if pp.internalVerdict != "" {
		return
	}
	switch {
	case b.sm.MasqueradeAll:
		b.st.rule(pp.internalChain, knftables.Concat(b.ipX, "daddr", pp.cip, "jump", markMasqChain), nil)
	case b.sm.LocalDetector.Implemented():
		b.st.rule(pp.internalChain, knftables.Concat(b.ipX, "daddr", pp.cip, b.detector(true), "jump", markMasqChain), nil)
	}
}

// externalRules: Cluster policy masquerades everything; Local policy keeps client
// addresses but short-circuits pod and node traffic to every endpoint.
func (b *builder) externalRules(pp *portPlan) {
	st := b.st
	if !pp.p.ExternalPolicyLocal {
		st.rule(pp.external, knftables.Concat("jump", markMasqChain), nil)
	} else {
		if b.sm.LocalDetector.Implemented() {
			st.rule(pp.external, knftables.Concat(b.detector(false), "goto", pp.cluster), knftables.PtrTo("short-circuit pod traffic"))
		}
		st.rule(pp.external, knftables.Concat("fib", "saddr", "type", "local", "jump", markMasqChain), knftables.PtrTo("masquerade local traffic"))
		st.rule(pp.external, knftables.Concat("fib", "saddr", "type", "local", "goto", pp.cluster), knftables.PtrTo("short-circuit local traffic"))
	}
	if pp.externalVerdict == "" {
		st.rule(pp.external, knftables.Concat("goto", pp.externalPolicyChain), nil)
	}
}

// firewallRule drops sources outside loadBalancerSourceRanges (and the node's own
// load-balancer IPs when a range holds the node's address).
func (b *builder) firewallRule(pp *portPlan) {
	var sources []string
	for _, r := range pp.p.SourceRanges {
		if len(sources) > 0 {
			sources = append(sources, ",")
		}
		sources = append(sources, r.String())
	}
	if pp.p.FirewallAllowsNode(b.sm.Node.IP) {
		for _, ip := range pp.p.LoadBalancerIPs {
			sources = append(sources, ",", ip.String())
		}
	}
	b.st.rule(pp.firewall, knftables.Concat(b.ipX, "saddr", "!=", "{", sources, "}", "drop"), nil)
}

func (b *builder) affinitySets(pp *portPlan) {
	if pp.p.AffinitySeconds == 0 {
		return
	}
	for _, i := range pp.p.Reachable {
		b.st.set(&knftables.Set{
			Name:    pp.affinity[i],
			Type:    b.addrType,
			Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
			Timeout: knftables.PtrTo(time.Duration(pp.p.AffinitySeconds) * time.Second),
		})
	}
}

// dispatch spreads a policy chain over endpoints with "numgen random mod N vmap",
// after the affinity checks.
func (b *builder) dispatch(pp *portPlan, chain string, idx []int) {
	if pp.p.AffinitySeconds > 0 {
		for _, i := range idx {
			b.st.rule(chain, knftables.Concat(b.ipX, "saddr", "@", pp.affinity[i], "goto", pp.endpoints[i]), nil)
		}
	}
	var elems []string
	for k, i := range idx {
		elems = append(elems, strconv.Itoa(k), ":", "goto", pp.endpoints[i])
		if k != len(idx)-1 {
			elems = append(elems, ",")
		}
	}
	b.st.rule(chain, knftables.Concat("numgen random mod", len(idx), "vmap", "{", elems, "}"), nil)
}

// endpointRules: masquerade hairpin traffic, remember the client for affinity, DNAT.
func (b *builder) endpointRules(pp *portPlan, i int) {
	ep, chain := pp.p.Endpoints[i], pp.endpoints[i]
	b.st.rule(chain, knftables.Concat(b.ipX, "saddr", ep.IP.String(), "jump", markMasqChain), nil)
	if pp.p.AffinitySeconds > 0 {
		b.st.rule(chain, knftables.Concat("update", "@", pp.affinity[i], "{", b.ipX, "saddr", "}"), nil)
	}
	b.st.rule(chain, knftables.Concat("meta l4proto", pp.proto, "dnat to", ep.String()), nil)
}
