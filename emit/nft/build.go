package nft

import (
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"sigs.k8s.io/knftables"
)

// baseChain is a chain hooked into netfilter.
type baseChain struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
}

// baseChains are kube-proxy's base chains (v1.34/v1.35): the firewall check runs before
// DNAT, the other filter chains at filter priority.
var baseChains = []baseChain{
	{filterPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{filterOutputPreDNAT, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{filterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{filterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{filterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{natPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{natOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{natPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jumpRule jumps from a base chain into one of kube-proxy's regular chains.
type jumpRule struct {
	dst, src, match string
}

// jumpRules in kube-proxy's order; each base chain lists its jumps in this order.
var jumpRules = []jumpRule{
	{nodePortEndpointCheck, filterInput, "ct state new"},
	{serviceEndpointsCheck, filterInput, "ct state new"},
	{serviceEndpointsCheck, filterForward, "ct state new"},
	{serviceEndpointsCheck, filterOutput, "ct state new"},
	{firewallCheck, filterPreroutingPreDNAT, "ct state new"},
	{firewallCheck, filterOutputPreDNAT, "ct state new"},
	{servicesChain, natOutput, ""},
	{servicesChain, natPrerouting, ""},
	{masqueradingChain, natPostrouting, ""},
	{clusterIPsCheck, filterForward, "ct state new"},
	{clusterIPsCheck, filterOutput, "ct state new"},
}

// builder makes the objects of the table svcgen wants for a service map.
type builder struct {
	sm       *ir.ServiceMap
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	mark     string
	// local and notLocal match pod traffic and other traffic ("ip saddr 10.0.0.0/8",
	// "ip saddr != 10.0.0.0/8"); "" without a local-traffic detector.
	local, notLocal string
	text            ruleText
}

func newBuilder(sm *ir.ServiceMap) *builder {
	b := &builder{sm: sm, ipX: "ip", addrType: "ipv4_addr", mark: sm.MasqueradeMark()}
	if sm.Family == model.IPv6 {
		b.ipX, b.addrType = "ip6", "ipv6_addr"
	}
	b.local, b.notLocal = b.detector(false), b.detector(true)
	return b
}

// Build is the kube-proxy table svcgen wants for a service map, every object made.
// (Write streams the same table without holding it.)
func Build(sm *ir.ServiceMap) *State {
	return newTable(sm).state()
}

func (b *builder) noLocalhost() string {
	if b.ipX == "ip6" {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
}

// fixed is what kube-proxy's setupNFTables writes: the table, its base chains and
// fixed chains with their rules, the sets and maps every service fills.
func (b *builder) fixed() *State {
	family := knftables.IPv4Family
	if b.sm.Family == model.IPv6 {
		family = knftables.IPv6Family
	}
	st := newState(family)
	for _, bc := range baseChains {
		st.chain(&knftables.Chain{Name: bc.name, Type: knftables.PtrTo(bc.typ), Hook: knftables.PtrTo(bc.hook), Priority: knftables.PtrTo(bc.priority)})
	}
	for _, j := range jumpRules {
		st.chain(&knftables.Chain{Name: j.dst})
		st.rule(j.src, knftables.Concat(j.match, "jump", j.dst), nil)
	}
	for _, c := range []string{servicesChain, clusterIPsCheck, masqueradingChain, markMasqChain, firewallCheck} {
		st.chain(&knftables.Chain{Name: c})
	}
	st.chain(&knftables.Chain{Name: rejectChain, Comment: knftables.PtrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	b.masqueradeRules(st)
	b.clusterIPRules(st)
	b.containers(st)
	b.dispatchRules(st)
	return st
}

func (b *builder) masqueradeRules(st *State) {
	st.rule(markMasqChain, knftables.Concat("mark", "set", "mark", "or", b.mark), nil)
	st.rule(masqueradingChain, knftables.Concat("mark", "and", b.mark, "==", "0", "return"), nil)
	st.rule(masqueradingChain, knftables.Concat("mark", "set", "mark", "xor", b.mark), nil)
	st.rule(masqueradingChain, "masquerade fully-random", nil)
}

func (b *builder) clusterIPRules(st *State) {
	st.set(&knftables.Set{Name: clusterIPsSet, Type: b.addrType, Comment: knftables.PtrTo("Active ClusterIPs")})
	st.rule(clusterIPsCheck, knftables.Concat(b.ipX, "daddr", "@", clusterIPsSet, "reject"), knftables.PtrTo("Reject traffic to invalid ports of ClusterIPs"))
	if len(b.sm.ServiceCIDRs) > 0 {
		var cidrs []string
		for _, c := range b.sm.ServiceCIDRs {
			cidrs = append(cidrs, c.String())
		}
		st.rule(clusterIPsCheck, knftables.Concat(b.ipX, "daddr", "{", strings.Join(cidrs, ","), "}", "drop"), knftables.PtrTo("Drop traffic to unallocated ClusterIPs"))
	}
}

// containers adds the sets and maps every service fills.
func (b *builder) containers(st *State) {
	tuple := b.addrType + " . inet_proto . inet_service : verdict"
	if !b.sm.NodePorts.MatchAll {
		np := st.set(&knftables.Set{Name: nodePortIPsSet, Type: b.addrType, Comment: knftables.PtrTo("IPs that accept NodePort traffic")})
		for _, ip := range b.sm.NodePorts.Addresses {
			if !ip.IsLoopback() {
				np.Elements = append(np.Elements, &knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
			}
		}
	}
	st.addMap(&knftables.Map{Name: noEndpointServicesMap, Type: tuple, Comment: knftables.PtrTo("vmap to drop or reject packets to services with no endpoints")})
	st.addMap(&knftables.Map{Name: noEndpointNodePorts, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("vmap to drop or reject packets to service nodeports with no endpoints")})
	st.addMap(&knftables.Map{Name: firewallIPsMap, Type: tuple, Comment: knftables.PtrTo("destinations that are subject to LoadBalancerSourceRanges")})
	st.addMap(&knftables.Map{Name: serviceIPsMap, Type: tuple, Comment: knftables.PtrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	st.addMap(&knftables.Map{Name: serviceNodePortsMap, Type: "inet_proto . inet_service : verdict", Comment: knftables.PtrTo("NodePort traffic")})
}

// dispatchRules look packets up in the maps.
func (b *builder) dispatchRules(st *State) {
	st.rule(rejectChain, "reject", nil)
	st.rule(serviceEndpointsCheck, knftables.Concat(b.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", noEndpointServicesMap), nil)
	if b.sm.NodePorts.MatchAll {
		st.rule(nodePortEndpointCheck, knftables.Concat(b.noLocalhost(), "meta l4proto . th dport", "vmap", "@", noEndpointNodePorts), nil)
	} else {
		st.rule(nodePortEndpointCheck, knftables.Concat(b.ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport", "vmap", "@", noEndpointNodePorts), nil)
	}
	st.rule(firewallCheck, knftables.Concat(b.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", firewallIPsMap), nil)
	st.rule(servicesChain, knftables.Concat(b.ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", serviceIPsMap), nil)
	if b.sm.NodePorts.MatchAll {
		st.rule(servicesChain, knftables.Concat("fib daddr type local", b.noLocalhost(), "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap), nil)
	} else {
		st.rule(servicesChain, knftables.Concat(b.ipX, "daddr @nodeport-ips", "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap), nil)
	}
}

// detector is the local-traffic match of upstream's localdetector.go: "ip saddr
// 10.0.0.0/8", "iifname != cbr0", "iifname veth*"...; not negates it.
func (b *builder) detector(not bool) string {
	d := b.sm.LocalDetector
	var field, value string
	switch d.Mode {
	case "ClusterCIDR", "NodeCIDR":
		field, value = b.ipX+" saddr", d.CIDR.Masked().String()
	case "BridgeInterface":
		field, value = "iifname", d.Interface
	case "InterfaceNamePrefix":
		field, value = "iifname", d.Interface+"*"
	default:
		return ""
	}
	if not {
		return knftables.Concat(field, "!=", value)
	}
	return knftables.Concat(field, value)
}

func goTo(chain string) string { return "goto " + chain }
