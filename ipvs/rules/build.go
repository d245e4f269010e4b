// Package rules turns a service map into the ipvs-mode state of a node (Build), as
// kube-proxy's ipvs proxier (syncProxyRules) would program it: a virtual server per
// cluster IP, external IP, load-balancer IP and node IP x node port, each with
// upstream's real servers (ir.Port.IPVSRealServers), the 17 sets with their entries,
// the addresses bound to kube-ipvs0, the sysctls and the companion chains (chains.go).
// The state is ipvs/syntax's model, in its fixed order; this package does no I/O.
package rules

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// Build computes the ipvs-mode state of the service map, as kube-proxy's ipvs proxier
// (syncProxyRules) would program it on the node. It is a pure function.
func Build(sm *ir.ServiceMap) *syntax.Node {
	b := newBuilder(sm)
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			b.port(p)
		}
	}
	return b.finish()
}

type builder struct {
	sm   *ir.ServiceMap
	ipv6 bool
	sets map[string]map[string]bool       // by IPv4 name: entries
	vss  map[string]*syntax.VirtualServer // by Key
	// local are the node's addresses as kube-proxy lists them for sets (no loopback,
	// no IPv6 link-local): external and load-balancer IPs among them are not bound.
	local map[netip.Addr]bool
	// nodeIPs carry the node-port virtual servers.
	nodeIPs []netip.Addr
	bound   map[netip.Addr]bool
	// outFilter are load-balancer VIP:ports the node may not reach (source ranges
	// without the node's IP).
	outFilter []outFilter
	// realsOf are the real servers made last, for the endpoints idx of port.
	realsOf struct {
		port  *ir.Port
		idx   []int
		reals []syntax.RealServer
	}
}

type outFilter struct {
	ip    netip.Addr
	proto string
	port  uint16
}

func newBuilder(sm *ir.ServiceMap) *builder {
	b := &builder{
		sm: sm, ipv6: sm.Family == model.IPv6,
		sets:  map[string]map[string]bool{},
		vss:   map[string]*syntax.VirtualServer{},
		local: map[netip.Addr]bool{},
		bound: map[netip.Addr]bool{},
	}
	for _, si := range syntax.SetInfos {
		b.sets[si.Name] = map[string]bool{}
	}
	for _, a := range sm.Node.Addresses {
		if validForSet(a.Addr()) {
			b.local[a.Addr()] = true
		}
	}
	b.nodeIPs = nodePortIPs(sm, b.local)
	return b
}

// validForSet is upstream's isValidForSet: loopback and IPv6 link-local addresses
// never serve node ports and never count as the node's own.
func validForSet(a netip.Addr) bool {
	return !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast())
}

// nodePortIPs are the addresses that get a virtual server per node port: every local
// address when nodePortAddresses selects all, else the selected ones; never loopback.
func nodePortIPs(sm *ir.ServiceMap, local map[netip.Addr]bool) []netip.Addr {
	var out []netip.Addr
	if sm.NodePorts.MatchAll {
		for a := range local {
			out = append(out, a)
		}
	} else {
		for _, a := range sm.NodePorts.Addresses {
			if !a.IsLoopback() && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

func (b *builder) add(set, entry string) { b.sets[set][entry] = true }

// port adds everything one service port contributes, in upstream's order.
func (b *builder) port(p *ir.Port) {
	proto := p.Protocol.Lower()
	port := strconv.Itoa(int(p.Port))
	for _, e := range p.Endpoints {
		if e.Local {
			b.add(syntax.SetLoopBack, e.IP.String()+","+proto+":"+strconv.Itoa(int(e.Port))+","+e.IP.String())
		}
	}
	b.add(syntax.SetClusterIP, p.ClusterIP.String()+","+proto+":"+port)
	b.service(p, p.ClusterIP, p.Port, p.InternalPolicyLocal, true, "cluster IP")
	for _, ip := range p.ExternalIPs {
		entry := ip.String() + "," + proto + ":" + port
		if p.ExternalPolicyLocal {
			b.add(syntax.SetExternalIPLocal, entry)
		} else {
			b.add(syntax.SetExternalIP, entry)
		}
		b.service(p, ip, p.Port, p.ExternalPolicyLocal, !b.local[ip], "external IP")
	}
	for _, ip := range p.LoadBalancerIPs {
		b.loadBalancer(p, ip, proto, port)
	}
	if p.NodePort != 0 {
		if len(b.nodeIPs) == 0 {
			return // upstream skips the rest of the port, health check included
		}
		b.nodePort(p, proto)
	}
	if p.HealthCheckNodePort != 0 {
		b.add(syntax.SetHealthCheckNodePort, strconv.Itoa(int(p.HealthCheckNodePort)))
	}
}

func (b *builder) loadBalancer(p *ir.Port, ip netip.Addr, proto, port string) {
	entry := ip.String() + "," + proto + ":" + port
	b.add(syntax.SetLoadBalancer, entry)
	if p.ExternalPolicyLocal {
		b.add(syntax.SetLoadBalancerLocal, entry)
	}
	if len(p.SourceRanges) > 0 {
		b.add(syntax.SetLoadBalancerFW, entry)
		for _, r := range p.SourceRanges {
			b.add(syntax.SetLoadBalancerSrcCIDR, entry+","+r.Masked().String())
		}
		if p.FirewallAllowsNode(b.sm.Node.IP) {
			b.add(syntax.SetLoadBalancerSrcIP, entry+","+ip.String())
		} else {
			b.outFilter = append(b.outFilter, outFilter{ip, proto, p.Port})
		}
	}
	b.service(p, ip, p.Port, p.ExternalPolicyLocal, !b.local[ip], "load-balancer IP")
}

func (b *builder) nodePort(p *ir.Port, proto string) {
	var entries []string
	set, local := syntax.SetNodePortTCP, syntax.SetNodePortLocalTCP
	switch p.Protocol {
	case model.UDP:
		set, local = syntax.SetNodePortUDP, syntax.SetNodePortLocalUDP
	case model.SCTP:
		set, local = syntax.SetNodePortSCTP, syntax.SetNodePortLocalSCTP
	}
	if p.Protocol == model.SCTP {
		for _, ip := range b.nodeIPs {
			entries = append(entries, ip.String()+","+proto+":"+strconv.Itoa(int(p.NodePort)))
		}
	} else {
		entries = []string{strconv.Itoa(int(p.NodePort))}
	}
	for _, e := range entries {
		b.add(set, e)
		if p.ExternalPolicyLocal {
			b.add(local, e)
		}
	}
	for _, ip := range b.nodeIPs {
		b.service(p, ip, p.NodePort, p.ExternalPolicyLocal, false, "node port")
	}
}

// service adds a virtual server for one frontend of a port and binds its address.
// When two ports produce the same virtual server (two Services given one cluster
// IP:port), the first in the service map's order keeps it; kube-proxy lets whichever
// its map order syncs last win.
func (b *builder) service(p *ir.Port, ip netip.Addr, port uint16, policyLocal, bind bool, what string) {
	if bind {
		b.bound[ip] = true
	}
	vs := &syntax.VirtualServer{
		Protocol:  p.Protocol,
		Address:   netip.AddrPortFrom(ip, port),
		Scheduler: b.sm.IPVS.Scheduler,
	}
	if p.AffinitySeconds > 0 {
		vs.Flags |= syntax.FlagPersistent
		vs.Timeout = uint32(p.AffinitySeconds)
	}
	if vs.Scheduler == "mh" {
		vs.Flags |= syntax.FlagSched2 // kube-proxy's FlagSourceHash: mh-port
	}
	note := p.Name.String() + " " + what
	if old := b.vss[vs.Key()]; old != nil {
		old.For = append(old.For, note)
		return
	}
	vs.For = []string{note}
	vs.Reals = b.reals(p, p.IPVSRealServers(policyLocal))
	b.vss[vs.Key()] = vs
}

// reals are the real servers of a port's endpoints idx, sorted as syntax.SortServices sorts
// them. A port's virtual servers share them (the cluster IP, every node port address
// and external IP of the same policy): made once per port, never appended to in place.
func (b *builder) reals(p *ir.Port, idx []int) []syntax.RealServer {
	if len(idx) == 0 {
		return nil
	}
	if b.realsOf.port == p && slices.Equal(b.realsOf.idx, idx) {
		return b.realsOf.reals
	}
	reals := make([]syntax.RealServer, len(idx))
	for i, j := range idx {
		e := p.Endpoints[j]
		reals[i] = syntax.RealServer{Address: netip.AddrPortFrom(e.IP, e.Port), Forward: syntax.Masquerade, Weight: 1}
	}
	slices.SortFunc(reals, syntax.CompareReals)
	b.realsOf.port, b.realsOf.idx, b.realsOf.reals = p, idx, reals
	return reals
}

func (b *builder) finish() *syntax.Node {
	sm := b.sm
	n := &syntax.Node{
		Family:       sm.Family,
		Sysctls:      sysctls(sm),
		Timeouts:     syntax.Timeouts{TCP: sm.IPVS.TCPTimeout, TCPFin: sm.IPVS.TCPFinTimeout, UDP: sm.IPVS.UDPTimeout},
		ExcludeCIDRs: sm.IPVS.ExcludeCIDRs,
	}
	for ip := range b.bound {
		n.Addresses = append(n.Addresses, netip.PrefixFrom(ip, ip.BitLen()))
		b.add(syntax.SetIPVSIPs, ip.String())
	}
	slices.SortFunc(n.Addresses, netip.Prefix.Compare)
	for _, si := range syntax.SetInfos {
		n.Sets = append(n.Sets, b.newSet(si))
	}
	for _, vs := range b.vss {
		n.Services = append(n.Services, vs)
	}
	syntax.SortServices(n.Services)
	n.NAT, n.Filter = b.companionChains(n)
	return n
}

// newSet is a set as kube-proxy creates it: hash sets with family, hashsize 1024 and
// maxelem 65536, bitmap:port over 0-65535.
func (b *builder) newSet(si syntax.SetInfo) *syntax.Set {
	s := &syntax.Set{Name: syntax.SetName(si.Name, b.ipv6), Type: si.Type, Comment: si.Comment}
	if si.Type == syntax.BitmapPort {
		s.Range = "0-65535"
	} else {
		s.Family, s.HashSize, s.MaxElem = "inet", 1024, 65536
		if b.ipv6 {
			s.Family = "inet6"
		}
	}
	for e := range b.sets[si.Name] {
		s.Entries = append(s.Entries, e)
	}
	slices.Sort(s.Entries)
	return s
}

// sysctls are the settings NewProxier ensures. conn_reuse_mode is not here: kube-proxy
// sets it to 0 only on kernels 4.1 to 5.8, which the script checks on the node.
func sysctls(sm *ir.ServiceMap) []syntax.Sysctl {
	out := []syntax.Sysctl{
		{Name: "net.ipv4.vs.conntrack", Value: "1"},
		{Name: "net.ipv4.vs.expire_nodest_conn", Value: "1"},
		{Name: "net.ipv4.vs.expire_quiescent_template", Value: "1"},
		{Name: "net.ipv4.ip_forward", Value: "1"},
	}
	if sm.IPVS.StrictARP {
		out = append(out, syntax.Sysctl{Name: "net.ipv4.conf.all.arp_ignore", Value: "1"}, syntax.Sysctl{Name: "net.ipv4.conf.all.arp_announce", Value: "2"})
	}
	return out
}
