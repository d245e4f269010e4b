package rules

import (
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/nftables/syntax"
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
	{syntax.FilterPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{syntax.FilterOutputPreDNAT, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{syntax.FilterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{syntax.FilterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{syntax.FilterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{syntax.NATPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{syntax.NATOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{syntax.NATPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jumpRule jumps from a base chain into one of kube-proxy's regular chains.
type jumpRule struct {
	dst, src, match string
}

// jumpRules in kube-proxy's order; each base chain lists its jumps in this order.
var jumpRules = []jumpRule{
	{syntax.NodePortEndpointCheck, syntax.FilterInput, "ct state new"},
	{syntax.ServiceEndpointsCheck, syntax.FilterInput, "ct state new"},
	{syntax.ServiceEndpointsCheck, syntax.FilterForward, "ct state new"},
	{syntax.ServiceEndpointsCheck, syntax.FilterOutput, "ct state new"},
	{syntax.FirewallCheck, syntax.FilterPreroutingPreDNAT, "ct state new"},
	{syntax.FirewallCheck, syntax.FilterOutputPreDNAT, "ct state new"},
	{syntax.ServicesChain, syntax.NATOutput, ""},
	{syntax.ServicesChain, syntax.NATPrerouting, ""},
	{syntax.MasqueradingChain, syntax.NATPostrouting, ""},
	{syntax.ClusterIPsCheck, syntax.FilterForward, "ct state new"},
	{syntax.ClusterIPsCheck, syntax.FilterOutput, "ct state new"},
}

// fixedChain is a regular chain every table has (besides the jumps' targets).
type fixedChain struct {
	name, comment string
	when          func(*ir.ServiceMap) bool // nil: always
}

// fixedChains are the regular chains no jump rule names.
var fixedChains = []fixedChain{
	{name: syntax.ServicesChain},
	{name: syntax.ClusterIPsCheck},
	{name: syntax.MasqueradingChain},
	{name: syntax.MarkMasqChain, when: markChain},
	{name: syntax.FirewallCheck},
	{name: syntax.RejectChain, comment: "helper for @no-endpoint-services / @no-endpoint-nodeports"},
}

// container is a set or map every table has; each service port fills the ones in
// ElementContainers. Its type's words: "ADDR" is the family's address type, "TUPLE"
// "ADDR . inet_proto . inet_service : verdict".
type container struct {
	name, typ, comment string
	isMap              bool
	when               func(*ir.ServiceMap) bool // nil: always
}

// containers in kube-proxy's order.
var containers = []container{
	{syntax.HairpinSet, "ADDR . ADDR . inet_proto . inet_service", "service hairpin connections", false, inlineMarks},
	{syntax.ClusterIPsSet, "ADDR", "Active ClusterIPs", false, nil},
	{syntax.NodePortIPsSet, "ADDR", "IPs that accept NodePort traffic", false, notMatchAll},
	{syntax.NoEndpointServicesMap, "TUPLE", "vmap to drop or reject packets to services with no endpoints", true, nil},
	{syntax.NoEndpointNodePorts, "inet_proto . inet_service : verdict", "vmap to drop or reject packets to service nodeports with no endpoints", true, nil},
	{syntax.FirewallIPsMap, "TUPLE", "destinations that are subject to LoadBalancerSourceRanges", true, nil},
	{syntax.ServiceIPsMap, "TUPLE", "ClusterIP, ExternalIP and LoadBalancer IP traffic", true, nil},
	{syntax.ServiceNodePortsMap, "inet_proto . inet_service : verdict", "NodePort traffic", true, nil},
}

// fixedRule is a rule of a fixed chain. Its words are written for the table: "IP" is
// "ip" or "ip6", "MARK" the masquerade mark, "CIDRS" the ServiceCIDRs of the family
// joined by commas, "NOLOCALHOST" "ip daddr != 127.0.0.0/8" (IPv6 "ip6 daddr != ::1"),
// "NOTLOCAL" the local-traffic detector's "not from a pod" match.
type fixedRule struct {
	chain, words, comment string
	when                  func(*ir.ServiceMap) bool // nil: always
}

// fixedRules are the rules of the fixed chains, each chain's in order. A release that
// writes a fixed rule otherwise changes its entry (v1.36's masquerading chain, v1.37's
// localhost NodePort rule).
var fixedRules = []fixedRule{
	{syntax.MarkMasqChain, "mark set mark or MARK", "", markChain},
	{syntax.MasqueradingChain, "mark and MARK == 0 return", "", markChain},
	{syntax.MasqueradingChain, "mark set mark xor MARK", "", markChain},
	{syntax.MasqueradingChain, "masquerade fully-random", "", markChain},
	// v1.36: marked traffic, and hairpin traffic (a local endpoint reaching itself
	// through its Service), which no longer goes through a per-endpoint chain.
	{syntax.MasqueradingChain, "mark and MARK != 0 mark set mark xor MARK masquerade fully-random", "", inlineMarks},
	{syntax.MasqueradingChain, "ct status dnat IP saddr . IP daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random", "", inlineMarks},
	{syntax.ClusterIPsCheck, "IP daddr @cluster-ips reject", "Reject traffic to invalid ports of ClusterIPs", nil},
	{syntax.ClusterIPsCheck, "IP daddr { CIDRS } drop", "Drop traffic to unallocated ClusterIPs", hasServiceCIDRs},
	{syntax.RejectChain, "reject", "", nil},
	{syntax.ServiceEndpointsCheck, "IP daddr . meta l4proto . th dport vmap @no-endpoint-services", "", nil},
	{syntax.NodePortEndpointCheck, "NOLOCALHOST meta l4proto . th dport vmap @no-endpoint-nodeports", "", matchAll},
	{syntax.NodePortEndpointCheck, "IP daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports", "", notMatchAll},
	{syntax.FirewallCheck, "IP daddr . meta l4proto . th dport vmap @firewall-ips", "", nil},
	// v1.36: the cluster IPs' masquerade, one rule for every Service.
	{syntax.ServicesChain, "IP daddr @cluster-ips mark set mark or MARK", "masquerade all clusterIP traffic", inlineMasqueradeAll},
	{syntax.ServicesChain, "IP daddr @cluster-ips NOTLOCAL mark set mark or MARK", "masquerade clusterIP traffic from outside cluster", inlineMasqueradeOutside},
	{syntax.ServicesChain, "IP daddr . meta l4proto . th dport vmap @service-ips", "", nil},
	{syntax.ServicesChain, "fib daddr type local NOLOCALHOST meta l4proto . th dport vmap @service-nodeports", "", matchAll},
	{syntax.ServicesChain, "IP daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports", "", notMatchAll},
}

// matchAll: NodePorts are open on every local address (nodePortAddresses unset).
func matchAll(sm *ir.ServiceMap) bool        { return sm.NodePorts.MatchAll }
func notMatchAll(sm *ir.ServiceMap) bool     { return !sm.NodePorts.MatchAll }
func hasServiceCIDRs(sm *ir.ServiceMap) bool { return len(sm.ServiceCIDRs) > 0 }

// inlineMarks: the release marks for masquerade in the rule (v1.36); markChain: it
// jumps to mark-for-masquerade (before).
func inlineMarks(sm *ir.ServiceMap) bool { return sm.Target.Layout.NFTInlineMasquerade }
func markChain(sm *ir.ServiceMap) bool   { return !inlineMarks(sm) }

// inlineMasqueradeAll and inlineMasqueradeOutside choose v1.36's one cluster-IP
// masquerade rule: every packet with masqueradeAll, else (with a local-traffic
// detector) what does not come from a pod.
func inlineMasqueradeAll(sm *ir.ServiceMap) bool { return inlineMarks(sm) && sm.MasqueradeAll }
func inlineMasqueradeOutside(sm *ir.ServiceMap) bool {
	return inlineMarks(sm) && !sm.MasqueradeAll && sm.LocalDetector.Implemented()
}

// IsMap reports a map among the containers (its elements have values); false for a
// set, or a name that is none of them.
func IsMap(name string) bool {
	for _, c := range containers {
		if c.name == name {
			return c.isMap
		}
	}
	return false
}

// applies reports whether a table entry's condition holds for sm.
func applies(when func(*ir.ServiceMap) bool, sm *ir.ServiceMap) bool { return when == nil || when(sm) }

// builder makes the objects of the table svcgen wants for a service map.
type builder struct {
	sm       *ir.ServiceMap
	family   knftables.Family
	ipX      string // "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	mark     string
	// local and notLocal match pod traffic and other traffic ("ip saddr 10.0.0.0/8",
	// "ip saddr != 10.0.0.0/8"); "" without a local-traffic detector.
	local, notLocal string
	text            syntax.Text
}

func newBuilder(sm *ir.ServiceMap) *builder {
	b := &builder{sm: sm, family: knftables.IPv4Family, ipX: "ip", addrType: "ipv4_addr", mark: sm.MasqueradeMark()}
	if sm.Family == model.IPv6 {
		b.family, b.ipX, b.addrType = knftables.IPv6Family, "ip6", "ipv6_addr"
	}
	b.local, b.notLocal = b.detector(false), b.detector(true)
	return b
}

// Build is the kube-proxy table svcgen wants for a service map, every object made.
// (Write streams the same table without holding it.)
func Build(sm *ir.ServiceMap) *syntax.State {
	return NewTable(sm).State()
}

// fixed is what kube-proxy's setupNFTables writes: the table, its base chains and
// fixed chains with their rules, the sets and maps every service fills, walked from
// the tables above.
func (b *builder) fixed() *syntax.State {
	st := syntax.NewState(b.family)
	for _, bc := range baseChains {
		st.AddChain(&knftables.Chain{Name: bc.name, Type: knftables.PtrTo(bc.typ), Hook: knftables.PtrTo(bc.hook), Priority: knftables.PtrTo(bc.priority)})
	}
	for _, j := range jumpRules {
		st.AddChain(&knftables.Chain{Name: j.dst})
		st.AddRule(j.src, b.text.Reset().W(strings.Fields(j.match)...).W("jump", j.dst).Bytes(), "")
	}
	for _, c := range fixedChains {
		if applies(c.when, b.sm) {
			st.AddChain(&knftables.Chain{Name: c.name, Comment: optional(c.comment)})
		}
	}
	for _, c := range containers {
		if applies(c.when, b.sm) {
			b.addContainer(st, c)
		}
	}
	for _, r := range fixedRules {
		if applies(r.when, b.sm) {
			st.AddRule(r.chain, b.words(r.words), r.comment)
		}
	}
	return st
}

// addContainer adds a fixed set or map (nodeport-ips with its elements).
func (b *builder) addContainer(st *syntax.State, c container) {
	typ := strings.NewReplacer("TUPLE", "ADDR . inet_proto . inet_service : verdict").Replace(c.typ)
	typ = strings.ReplaceAll(typ, "ADDR", b.addrType)
	if c.isMap {
		st.AddMap(&knftables.Map{Name: c.name, Type: typ, Comment: optional(c.comment)})
		return
	}
	set := st.AddSet(&knftables.Set{Name: c.name, Type: typ, Comment: optional(c.comment)})
	if c.name != syntax.NodePortIPsSet {
		return
	}
	for _, ip := range b.sm.NodePorts.Addresses {
		if !ip.IsLoopback() {
			set.Elements = append(set.Elements, &knftables.Element{Set: c.name, Key: []string{ip.String()}})
		}
	}
}

// words writes a fixed rule's words for the table (see fixedRule).
func (b *builder) words(template string) []byte {
	t := b.text.Reset()
	for w := range strings.FieldsSeq(template) {
		switch w {
		case "IP":
			t.W(b.ipX)
		case "MARK":
			t.W(b.mark)
		case "NOLOCALHOST":
			t.W(b.noLocalhost())
		case "NOTLOCAL":
			t.W(b.notLocal)
		case "CIDRS":
			cidrs := make([]string, len(b.sm.ServiceCIDRs))
			for i, c := range b.sm.ServiceCIDRs {
				cidrs[i] = c.String()
			}
			t.W(strings.Join(cidrs, ","))
		default:
			t.W(w)
		}
	}
	return t.Bytes()
}

func (b *builder) noLocalhost() string {
	if b.ipX == "ip6" {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
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

// optional is nil for "", else a pointer to s.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func goTo(chain string) string { return "goto " + chain }
