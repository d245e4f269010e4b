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
	nat = syntax.Table{Name: "nat", Chains: natChains}
	filter = syntax.Table{Name: "filter", Chains: filterChains}
	name := func(set string) string { return syntax.SetName(set, b.ipv6) }
	comment := func(set string) string { return n.Set(name(set)).Comment }
	empty := func(set string) bool { return len(n.Set(name(set)).Entries) == 0 }
	mark := b.sm.MasqueradeMark()

	lo := "127.0.0.0/8"
	if b.ipv6 {
		lo = "::1/128"
	}
	nat.Add(syntax.ChainServices, "-s", lo, "-j", "RETURN")
	for _, r := range setRules {
		if empty(r.set) {
			continue
		}
		var args []string
		if r.proto != "" {
			args = append(args, "-p", r.proto)
		}
		args = append(args, "-m", "comment", "--comment", comment(r.set), "-m", "set", "--match-set", name(r.set), r.match, "-j", r.to)
		if r.table == "filter" {
			filter.Add(r.from, args...)
		} else {
			nat.Add(r.from, args...)
		}
	}
	if !empty(syntax.SetClusterIP) {
		args := []string{"-m", "comment", "--comment", comment(syntax.SetClusterIP), "-m", "set", "--match-set", name(syntax.SetClusterIP)}
		switch {
		case b.sm.MasqueradeAll:
			args = append(args, "dst,dst")
		case b.sm.LocalDetector.Implemented():
			args = append(append(args, "dst,dst"), notLocal(b.sm.LocalDetector)...)
		default:
			// syntax.Node-originated traffic to a VIP picks a VIP on kube-ipvs0 as its source.
			args = append(args, "src,dst")
		}
		nat.Add(syntax.ChainServices, append(args, "-j", syntax.ChainMarkMasq)...)
	}
	for _, set := range []string{syntax.SetExternalIP, syntax.SetExternalIPLocal} {
		if empty(set) {
			continue
		}
		args := []string{"-m", "comment", "--comment", comment(set), "-m", "set", "--match-set", name(set), "dst,dst"}
		if set == syntax.SetExternalIP {
			nat.Add(syntax.ChainServices, append(args, "-j", syntax.ChainMarkMasq)...)
		}
		nat.Add(syntax.ChainServices, append(args, "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		nat.Add(syntax.ChainServices, append(args, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	nat.Add(syntax.ChainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", syntax.ChainNodePort)
	nat.Add(syntax.ChainLoadBalancer, "-j", syntax.ChainMarkMasq)
	filter.Add(syntax.ChainSourceRangeFirewall, "-j", "DROP")
	for _, o := range b.outFilter {
		filter.Add(syntax.ChainIPVSOutFilter, "-s", o.ip.String(), "-m", "ipvs", "--vaddr", o.ip.String(),
			"--vproto", o.proto, "--vport", strconv.Itoa(int(o.port)), "-j", "DROP")
	}
	for _, set := range []string{syntax.SetClusterIP, syntax.SetLoadBalancer} {
		if !empty(set) {
			nat.Add(syntax.ChainServices, "-m", "set", "--match-set", name(set), "dst,dst", "-j", "ACCEPT")
		}
	}
	filter.Add(syntax.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding rules", "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	filter.Add(syntax.ChainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack rule", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	filter.Add(syntax.ChainNodePort, "-m", "comment", "--comment", comment(syntax.SetHealthCheckNodePort), "-m", "set", "--match-set", name(syntax.SetHealthCheckNodePort), "dst", "-j", "ACCEPT")
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
	if b.sm.Host.RandomFully {
		masq = append(masq, "--random-fully")
	}
	nat.Add(syntax.ChainPostrouting, masq...)
	nat.Add(syntax.ChainMarkMasq, "-j", "MARK", "--or-mark", mark)
	return nat, filter
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
