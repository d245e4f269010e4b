package rules

import (
	"strconv"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
)

// natChains and filterChains are the chains kube-proxy declares in each table, in its order.
var (
	natChains    = []string{syntax.ChainServices, syntax.ChainPostrouting, syntax.ChainNodePort, syntax.ChainLoadBalancer, syntax.ChainMarkMasq}
	filterChains = []string{syntax.ChainForward, syntax.ChainNodePort, syntax.ChainProxyFirewall, syntax.ChainSourceRangeFirewall, syntax.ChainIPVSFilter, syntax.ChainIPVSOutFilter}
)

// setRules is upstream's ipsetWithIptablesChain: for each set that has entries, a rule
// "-A from [-p proto] -m comment --comment C -m set --match-set NAME match -j to".
// The Local node-port sets come before their plain ones.
var setRules = []struct {
	set, table, from, to, match, proto string
}{
	{syntax.SetLoopBack, "nat", syntax.ChainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{syntax.SetLoadBalancer, "nat", syntax.ChainServices, syntax.ChainLoadBalancer, "dst,dst", ""},
	{syntax.SetLoadBalancerLocal, "nat", syntax.ChainLoadBalancer, "RETURN", "dst,dst", ""},
	{syntax.SetNodePortLocalTCP, "nat", syntax.ChainNodePort, "RETURN", "dst", "tcp"},
	{syntax.SetNodePortTCP, "nat", syntax.ChainNodePort, syntax.ChainMarkMasq, "dst", "tcp"},
	{syntax.SetNodePortLocalUDP, "nat", syntax.ChainNodePort, "RETURN", "dst", "udp"},
	{syntax.SetNodePortUDP, "nat", syntax.ChainNodePort, syntax.ChainMarkMasq, "dst", "udp"},
	{syntax.SetNodePortLocalSCTP, "nat", syntax.ChainNodePort, "RETURN", "dst,dst", "sctp"},
	{syntax.SetNodePortSCTP, "nat", syntax.ChainNodePort, syntax.ChainMarkMasq, "dst,dst", "sctp"},
	{syntax.SetLoadBalancerFW, "filter", syntax.ChainProxyFirewall, syntax.ChainSourceRangeFirewall, "dst,dst", ""},
	{syntax.SetLoadBalancerSrcCIDR, "filter", syntax.ChainSourceRangeFirewall, "RETURN", "dst,dst,src", ""},
	{syntax.SetLoadBalancerSrcIP, "filter", syntax.ChainSourceRangeFirewall, "RETURN", "dst,dst,src", ""},
}

// companionChains builds kube-proxy's restore payload (writeIptablesRules) from the
// sets: a set's rules appear only when it has entries, except the fixed ones.
func (b *builder) companionChains(n *syntax.Node) (nat, filter syntax.Table) {
	p := &payload{b: b, n: n, mark: b.sm.MasqueradeMark(),
		nat: syntax.Table{Name: "nat", Chains: natChains}, filter: syntax.Table{Name: "filter", Chains: filterChains}}
	p.serviceRules()
	p.fixedRules()
	return p.nat, p.filter
}

// payload is the restore payload being built, over the node's sets.
type payload struct {
	b           *builder
	n           *syntax.Node
	mark        string
	nat, filter syntax.Table
}

func (p *payload) name(set string) string    { return syntax.SetName(set, p.b.ipv6) }
func (p *payload) comment(set string) string { return p.n.Set(p.name(set)).Comment }
func (p *payload) empty(set string) bool     { return len(p.n.Set(p.name(set)).Entries) == 0 }

// serviceRules are KUBE-SERVICES' first rules and the rules of the sets that have
// entries, in kube-proxy's order.
func (p *payload) serviceRules() {
	lo := "127.0.0.0/8"
	if p.b.ipv6 {
		lo = "::1/128"
	}
	p.nat.Add(syntax.ChainServices, "-s", lo, "-j", "RETURN")
	for _, r := range setRules {
		if p.empty(r.set) {
			continue
		}
		var args []string
		if r.proto != "" {
			args = append(args, "-p", r.proto)
		}
		args = append(args, "-m", "comment", "--comment", p.comment(r.set), "-m", "set", "--match-set", p.name(r.set), r.match, "-j", r.to)
		if r.table == "filter" {
			p.filter.Add(r.from, args...)
		} else {
			p.nat.Add(r.from, args...)
		}
	}
	if !p.empty(syntax.SetClusterIP) {
		args := []string{"-m", "comment", "--comment", p.comment(syntax.SetClusterIP), "-m", "set", "--match-set", p.name(syntax.SetClusterIP)}
		switch sm := p.b.sm; {
		case sm.MasqueradeAll:
			args = append(args, "dst,dst")
		case sm.LocalDetector.Implemented():
			args = append(append(args, "dst,dst"), notLocal(sm.LocalDetector)...)
		default:
			// Node-originated traffic to a VIP picks a VIP on kube-ipvs0 as its source.
			args = append(args, "src,dst")
		}
		p.nat.Add(syntax.ChainServices, append(args, "-j", syntax.ChainMarkMasq)...)
	}
	for _, set := range []string{syntax.SetExternalIP, syntax.SetExternalIPLocal} {
		if p.empty(set) {
			continue
		}
		args := []string{"-m", "comment", "--comment", p.comment(set), "-m", "set", "--match-set", p.name(set), "dst,dst"}
		if set == syntax.SetExternalIP {
			p.nat.Add(syntax.ChainServices, append(args, "-j", syntax.ChainMarkMasq)...)
		}
		p.nat.Add(syntax.ChainServices, append(args, "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		p.nat.Add(syntax.ChainServices, append(args, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
}

// fixedRules are the rest, which kube-proxy writes whatever the sets hold (but for the
// ACCEPTs of sets with entries and the out-filter of load-balancer source ranges).
func (p *payload) fixedRules() {
	nat, filter, mark, name := &p.nat, &p.filter, p.mark, p.name
	nat.Add(syntax.ChainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", syntax.ChainNodePort)
	nat.Add(syntax.ChainLoadBalancer, "-j", syntax.ChainMarkMasq)
	filter.Add(syntax.ChainSourceRangeFirewall, "-j", "DROP")
	for _, o := range p.b.outFilter {
		filter.Add(syntax.ChainIPVSOutFilter, "-s", o.ip.String(), "-m", "ipvs", "--vaddr", o.ip.String(),
			"--vproto", o.proto, "--vport", strconv.Itoa(int(o.port)), "-j", "DROP")
	}
	for _, set := range []string{syntax.SetClusterIP, syntax.SetLoadBalancer} {
		if !p.empty(set) {
			nat.Add(syntax.ChainServices, "-m", "set", "--match-set", name(set), "dst,dst", "-j", "ACCEPT")
		}
	}
	filter.Add(syntax.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding rules", "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	filter.Add(syntax.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack rule", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	filter.Add(syntax.ChainNodePort, "-m", "comment", "--comment", p.comment(syntax.SetHealthCheckNodePort), "-m", "set", "--match-set", name(syntax.SetHealthCheckNodePort), "dst", "-j", "ACCEPT")
	for _, f := range []struct{ set, match string }{
		{syntax.SetLoadBalancer, "dst,dst"}, {syntax.SetClusterIP, "dst,dst"}, {syntax.SetExternalIP, "dst,dst"},
		{syntax.SetExternalIPLocal, "dst,dst"}, {syntax.SetHealthCheckNodePort, "dst"},
	} {
		filter.Add(syntax.ChainIPVSFilter, "-m", "set", "--match-set", name(f.set), f.match, "-j", "RETURN")
	}
	filter.Add(syntax.ChainIPVSFilter, "-m", "conntrack", "--ctstate", "NEW", "-m", "set", "--match-set", name(syntax.SetIPVSIPs), "dst", "-j", "REJECT")
	nat.Add(syntax.ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	nat.Add(syntax.ChainPostrouting, "-j", "MARK", "--xor-mark", mark)
	masq := []string{"-m", "comment", "--comment", "kubernetes service traffic requiring SNAT", "-j", "MASQUERADE"}
	if p.b.sm.Host.RandomFully {
		masq = append(masq, "--random-fully")
	}
	nat.Add(syntax.ChainPostrouting, masq...)
	nat.Add(syntax.ChainMarkMasq, "-j", "MARK", "--or-mark", mark)
}

// notLocal is the local-traffic detector's "not from a pod" match.
func notLocal(d ir.LocalDetector) []string {
	switch d.Mode {
	case "ClusterCIDR", "NodeCIDR":
		return []string{"!", "-s", d.CIDR.Masked().String()}
	case "BridgeInterface":
		return []string{"!", "-i", d.Interface}
	case "InterfaceNamePrefix":
		return []string{"!", "-i", d.Interface + "+"}
	}
	return nil
}
