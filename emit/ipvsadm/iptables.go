package ipvsadm

import (
	"strconv"

	"github.com/svcgen/svcgen/ir"
)

// companionChains builds kube-proxy's restore payload (writeIptablesRules) from the
// sets: a set's rules appear only when it has entries, except the fixed ones.
func (b *builder) companionChains(n *Node) (nat, filter Table) {
	nat = Table{Name: "nat", Chains: natChains}
	filter = Table{Name: "filter", Chains: filterChains}
	name := func(set string) string { return SetName(set, b.ipv6) }
	comment := func(set string) string { return n.Set(name(set)).Comment }
	empty := func(set string) bool { return len(n.Set(name(set)).Entries) == 0 }
	mark := b.sm.MasqueradeMark()

	lo := "127.0.0.0/8"
	if b.ipv6 {
		lo = "::1/128"
	}
	nat.add(chainServices, "-s", lo, "-j", "RETURN")
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
			filter.add(r.from, args...)
		} else {
			nat.add(r.from, args...)
		}
	}
	if !empty(setClusterIP) {
		args := []string{"-m", "comment", "--comment", comment(setClusterIP), "-m", "set", "--match-set", name(setClusterIP)}
		switch {
		case b.sm.MasqueradeAll:
			args = append(args, "dst,dst")
		case b.sm.LocalDetector.Implemented():
			args = append(append(args, "dst,dst"), notLocal(b.sm.LocalDetector)...)
		default:
			// Node-originated traffic to a VIP picks a VIP on kube-ipvs0 as its source.
			args = append(args, "src,dst")
		}
		nat.add(chainServices, append(args, "-j", chainMarkMasq)...)
	}
	for _, set := range []string{setExternalIP, setExternalIPLocal} {
		if empty(set) {
			continue
		}
		args := []string{"-m", "comment", "--comment", comment(set), "-m", "set", "--match-set", name(set), "dst,dst"}
		if set == setExternalIP {
			nat.add(chainServices, append(args, "-j", chainMarkMasq)...)
		}
		nat.add(chainServices, append(args, "-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", "ACCEPT")...)
		nat.add(chainServices, append(args, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")...)
	}
	nat.add(chainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", chainNodePort)
	nat.add(chainLoadBalancer, "-j", chainMarkMasq)
	filter.add(chainSourceRangeFirewall, "-j", "DROP")
	for _, o := range b.outFilter {
		filter.add(chainIPVSOutFilter, "-s", o.ip.String(), "-m", "ipvs", "--vaddr", o.ip.String(),
			"--vproto", o.proto, "--vport", strconv.Itoa(int(o.port)), "-j", "DROP")
	}
	for _, set := range []string{setClusterIP, setLoadBalancer} {
		if !empty(set) {
			nat.add(chainServices, "-m", "set", "--match-set", name(set), "dst,dst", "-j", "ACCEPT")
		}
	}
	filter.add(chainForward, "-m", "comment", "--comment", "kubernetes forwarding rules", "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	filter.add(chainForward, "-m", "comment", "--comment", "kubernetes forwarding conntrack rule", "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	filter.add(chainNodePort, "-m", "comment", "--comment", comment(setHealthCheckNodePort), "-m", "set", "--match-set", name(setHealthCheckNodePort), "dst", "-j", "ACCEPT")
	for _, f := range []struct{ set, match string }{
		{setLoadBalancer, "dst,dst"}, {setClusterIP, "dst,dst"}, {setExternalIP, "dst,dst"},
		{setExternalIPLocal, "dst,dst"}, {setHealthCheckNodePort, "dst"},
	} {
		filter.add(chainIPVSFilter, "-m", "set", "--match-set", name(f.set), f.match, "-j", "RETURN")
	}
	filter.add(chainIPVSFilter, "-m", "conntrack", "--ctstate", "NEW", "-m", "set", "--match-set", name(setIPVSIPs), "dst", "-j", "REJECT")
	nat.add(chainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	nat.add(chainPostrouting, "-j", "MARK", "--xor-mark", mark)
	masq := []string{"-m", "comment", "--comment", "kubernetes service traffic requiring SNAT", "-j", "MASQUERADE"}
	if b.sm.Host.RandomFully {
		masq = append(masq, "--random-fully")
	}
	nat.add(chainPostrouting, masq...)
	nat.add(chainMarkMasq, "-j", "MARK", "--or-mark", mark)
	return nat, filter
}

func (t *Table) add(chain string, args ...string) {
	t.Rules = append(t.Rules, Rule{Chain: chain, Args: args})
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
