package plan

import (
	"net/netip"
	"strconv"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

// Cleanup plans the removal of what kube-proxy's ipvs mode made of one family: its
// virtual servers (those kube-proxy's own records name, Owned), then its sets, then
// kube-ipvs0, which holds both families and so goes with the IPv4 cleanup only. The
// companion chains go with the iptables cleanup, which must run first: a set cannot be
// destroyed while a rule uses it. The state after holds the virtual servers that stay.
func Cleanup(have *Have, ipv6 bool) *Change {
	c := &Change{After: &Have{}}
	owned := Owned(have)
	for _, vs := range have.Services {
		if owned(vs) {
			c.Ops = append(c.Ops, Op{Kind: DeleteService, Service: vs})
		} else {
			c.After.Services = append(c.After.Services, vs)
		}
	}
	for _, s := range have.Sets {
		c.Ops = append(c.Ops, Op{Kind: DestroySet, Set: s})
	}
	if have.Link && !ipv6 {
		c.Ops = append(c.Ops, Op{Kind: DeleteLink})
	}
	return c
}

// Owned says which virtual servers kube-proxy made, from its own records: an address
// bound to kube-ipvs0 (or listed in KUBE-IPVS-IPS), or a node port listed in its
// node-port sets. Anything else on the node is someone else's.
func Owned(have *Have) func(*syntax.VirtualServer) bool {
	bound := map[netip.Addr]bool{}
	for _, a := range have.Addresses {
		bound[a.Addr()] = true
	}
	entries := map[string]map[string]bool{}
	for _, s := range have.Sets {
		entries[s.Name] = entrySet(s.Entries)
	}
	in := func(set, entry string) bool {
		return entries[set][entry] || entries[syntax.SetName(set, true)][entry]
	}
	return func(vs *syntax.VirtualServer) bool {
		a, port := vs.Address.Addr(), strconv.Itoa(int(vs.Address.Port()))
		if bound[a] || in(syntax.SetIPVSIPs, a.String()) {
			return true
		}
		switch vs.Protocol {
		case model.TCP:
			return in(syntax.SetNodePortTCP, port)
		case model.UDP:
			return in(syntax.SetNodePortUDP, port)
		case model.SCTP:
			return in(syntax.SetNodePortSCTP, a.String()+",sctp:"+port)
		}
		return false
	}
}
