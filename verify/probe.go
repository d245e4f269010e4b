package verify

import (
	"net/netip"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/trace"
)

// Probe is one packet verify sends: to a frontend, from a source.
type Probe struct {
	Frontend Frontend
	Class    Class
	Source   trace.Source
	Packet   trace.Packet
}

// Class is the kind of source a probe stands for.
type Class int

// Source classes, in the order probes use them.
const (
	OtherHost  Class = iota // another host, outside every source range
	LocalPod                // a pod on this node
	RemotePod               // a pod on another node
	Node                    // the node itself
	Hairpin                 // an endpoint of the Service on this node, reaching it
	Allowed                 // a source loadBalancerSourceRanges allow
	Localhost               // the node, from and to its loopback address
	BalancerIP              // the load-balancer IP itself (let in when a source range holds the node)
)

var classNames = [...]string{"other hosts", "pods on this node", "pods on other nodes", "the node", "the endpoint itself", "allowed sources", "localhost", "the load-balancer IP"}

func (c Class) String() string { return classNames[c] }

// localities are what each class is as a trace source.
var localities = [...]trace.Locality{trace.Outside, trace.LocalPod, trace.RemotePod, trace.FromNode, trace.LocalPod, trace.Outside, trace.FromNode, trace.Outside}

// Probes lists the packets that exercise every frontend of the map (cluster IP,
// external IPs, load-balancer IPs, the node port on every address that takes node
// ports, localhost included, and the health-check node port) from every kind of
// source the rules tell apart: another host, a pod on this node, a pod on another
// node, the node itself, an endpoint reaching its own Service (hairpin), and for
// load-balancer IPs with source ranges a source they allow and the load-balancer IP
// itself. Sources are picked from the
// map's endpoints where it has them, else made up outside every range the map uses.
func Probes(l *Locator) []Probe {
	sm := l.sm
	pk := newPicker(sm, l.host)
	var out []Probe
	seen := map[[2]netip.AddrPort]bool{}
	add := func(f Frontend, src netip.Addr, c Class) {
		if !src.IsValid() || !f.Addr.Addr().IsValid() {
			return
		}
		key := [2]netip.AddrPort{netip.AddrPortFrom(src, 0), f.Addr}
		if seen[key] {
			return
		}
		seen[key] = true
		p, s := l.PacketAs(src, f.Addr, protoOf(f).Lower(), localities[c])
		out = append(out, Probe{Frontend: f, Class: c, Source: s, Packet: p})
	}
	for _, s := range sm.Services {
		for _, port := range s.Ports {
			for _, f := range frontendsOf(sm, l.host, s, port) {
				seen = map[[2]netip.AddrPort]bool{}
				if f.Kind == HealthCheck {
					add(f, pk.outside, OtherHost)
					continue
				}
				if f.Addr.Addr().IsLoopback() {
					add(f, f.Addr.Addr(), Localhost) // localhost node ports: only the node reaches them
					continue
				}
				add(f, pk.outside, OtherHost)
				add(f, pk.localPod(port), LocalPod)
				add(f, pk.remotePod(port), RemotePod)
				add(f, pk.node, Node)
				add(f, pk.hairpin(port), Hairpin)
				if f.Kind == LoadBalancerIP && len(port.SourceRanges) > 0 {
					add(f, pk.inside(port.SourceRanges[0]), Allowed)
					add(f, f.Addr.Addr(), BalancerIP)
				}
			}
		}
	}
	return out
}

// frontendsOf lists a port's frontends with real addresses: node ports on every
// address that takes them, the health check on the node's IP.
func frontendsOf(sm *ir.ServiceMap, host trace.Host, s *ir.Service, p *ir.Port) []Frontend {
	x := Expecter{sm: sm, host: host}
	var out []Frontend
	f := Frontend{Service: s, Port: p}
	add := func(k Kind, a netip.Addr, port uint16) {
		f.Kind, f.Addr = k, netip.AddrPortFrom(a, port)
		out = append(out, f)
	}
	add(ClusterIP, p.ClusterIP, p.Port)
	for _, a := range p.ExternalIPs {
		add(ExternalIP, a, p.Port)
	}
	for _, a := range p.LoadBalancerIPs {
		add(LoadBalancerIP, a, p.Port)
	}
	if p.NodePort != 0 {
		for _, a := range nodeAddresses(sm, host) {
			if x.acceptsNodePorts(a) {
				add(NodePort, a, p.NodePort)
			}
		}
	}
	if p.HealthCheckNodePort != 0 {
		if a := primaryIP(sm); a.IsValid() {
			add(HealthCheck, a, p.HealthCheckNodePort)
		}
	}
	return out
}

// nodeAddresses are the node's addresses, plus the loopback address of its family.
func nodeAddresses(sm *ir.ServiceMap, host trace.Host) []netip.Addr {
	out := append([]netip.Addr(nil), host.Local...)
	lo := netip.MustParseAddr("127.0.0.1")
	if sm.Family == model.IPv6 {
		lo = netip.IPv6Loopback()
	}
	if !containsAddr(out, lo) {
		out = append(out, lo)
	}
	return out
}

// primaryIP is the node's IP, else its first address that is not loopback (a node
// without an address of the family has loopback as its node IP, as in kube-proxy).
func primaryIP(sm *ir.ServiceMap) netip.Addr {
	if sm.Node.IP.IsValid() && !sm.Node.IP.IsLoopback() {
		return sm.Node.IP
	}
	for _, p := range sm.Node.Addresses {
		if !p.Addr().IsLoopback() {
			return p.Addr()
		}
	}
	return netip.Addr{}
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

// picker chooses source addresses.
type picker struct {
	sm      *ir.ServiceMap
	used    map[netip.Addr]bool
	ranges  []netip.Prefix
	outside netip.Addr
	node    netip.Addr
	// local and remote are the first few endpoint addresses on this node and on others,
	// in map order: candidates for pods that are not a port's own endpoints.
	local, remote []netip.Addr
}

// candidates is how many endpoint addresses of each kind the picker keeps; a port with
// more endpoints than that among them gets no probe from that kind of pod.
const candidates = 8

func newPicker(sm *ir.ServiceMap, host trace.Host) *picker {
	pk := &picker{sm: sm, used: map[netip.Addr]bool{}, node: primaryIP(sm)}
	for _, a := range host.Local {
		pk.used[a] = true
	}
	pk.ranges = append(pk.ranges, sm.ServiceCIDRs...)
	if sm.LocalDetector.CIDR.IsValid() {
		pk.ranges = append(pk.ranges, sm.LocalDetector.CIDR)
	}
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			pk.ranges = append(pk.ranges, p.SourceRanges...)
			pk.used[p.ClusterIP] = true
			for _, a := range append(append([]netip.Addr(nil), p.ExternalIPs...), p.LoadBalancerIPs...) {
				pk.used[a] = true
			}
			for _, e := range p.Endpoints {
				if !pk.used[e.IP] {
					if e.Local && len(pk.local) < candidates {
						pk.local = append(pk.local, e.IP)
					} else if !e.Local && len(pk.remote) < candidates {
						pk.remote = append(pk.remote, e.IP)
					}
				}
				pk.used[e.IP] = true
			}
		}
	}
	pk.outside = pk.free(outsideCandidates(sm.Family))
	return pk
}

// outsideCandidates are documentation and benchmarking addresses, tried in order.
func outsideCandidates(f model.IPFamily) []netip.Addr {
	var ss []string
	if f == model.IPv6 {
		ss = []string{"2001:db8:ffff::77", "2001:db8:fffe::77", "fd7f:ffff::77", "2001:db9::77"}
	} else {
		ss = []string{"203.0.113.77", "198.51.100.77", "192.0.2.77", "100.127.255.77", "172.31.255.77", "11.255.255.77"}
	}
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// free returns the first candidate that no range holds and nothing uses (the last one
// if none is free).
func (pk *picker) free(cands []netip.Addr) netip.Addr {
	for _, a := range cands {
		if !pk.used[a] && !pk.inRange(a) {
			return a
		}
	}
	return cands[len(cands)-1]
}

func (pk *picker) inRange(a netip.Addr) bool {
	for _, r := range pk.ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// localPod is a pod on this node that is not an endpoint of the port: a local endpoint
// of another port, else an address the local-traffic detector counts as a pod's.
func (pk *picker) localPod(port *ir.Port) netip.Addr {
	if a := pk.endpointElsewhere(port, true); a.IsValid() {
		return a
	}
	if d := pk.sm.LocalDetector; d.CIDR.IsValid() {
		return pk.inside(d.CIDR)
	}
	if pk.sm.LocalDetector.Implemented() {
		return pk.free(podCandidates(pk.sm.Family))
	}
	return netip.Addr{}
}

func podCandidates(f model.IPFamily) []netip.Addr {
	if f == model.IPv6 {
		return []netip.Addr{netip.MustParseAddr("fd00:77::77"), netip.MustParseAddr("fd00:78::77")}
	}
	return []netip.Addr{netip.MustParseAddr("10.254.77.77"), netip.MustParseAddr("10.253.77.77")}
}

// remotePod is an endpoint on another node that is not one of the port's.
func (pk *picker) remotePod(port *ir.Port) netip.Addr {
	return pk.endpointElsewhere(port, false)
}

func (pk *picker) endpointElsewhere(port *ir.Port, local bool) netip.Addr {
	cands := pk.remote
	if local {
		cands = pk.local
	}
	for _, a := range cands {
		mine := false
		for _, e := range port.Endpoints {
			mine = mine || e.IP == a
		}
		if !mine {
			return a
		}
	}
	return netip.Addr{}
}

// hairpin is a reachable endpoint of the port on this node (it may pick itself).
func (pk *picker) hairpin(port *ir.Port) netip.Addr {
	for _, e := range port.ReachableEndpoints() {
		if e.Local {
			return e.IP
		}
	}
	return netip.Addr{}
}

// inside is an address in the prefix that nothing uses: the first host address when
// the prefix has room, else the prefix's only address.
func (pk *picker) inside(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	if p.IsSingleIP() {
		return a
	}
	for i := 0; i < 64; i++ {
		a = a.Next()
		if !a.IsValid() || !p.Contains(a) {
			break
		}
		if !pk.used[a] {
			return a
		}
	}
	return p.Masked().Addr().Next()
}
