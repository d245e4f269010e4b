package verify

import (
	"net/netip"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/trace"
)

// Locator places addresses in one node's world: the node's own, its pods', other
// nodes' and their pods', and everything else. It turns a source address into the
// packet the node would see (a pod on this node arrives on a pod interface).
type Locator struct {
	sm    *ir.ServiceMap
	host  trace.Host
	pods  map[netip.Addr]*model.Pod
	nodes []*model.Node
	// endpoints holds the first endpoint of each address, with its port's name.
	endpoints map[netip.Addr]placedEndpoint
}

type placedEndpoint struct {
	local bool
	port  string
}

// NewLocator builds a locator from the service map and, when known, the cluster it was
// compiled from (its Pods and Nodes name the addresses); c may be nil.
func NewLocator(sm *ir.ServiceMap, c *model.Cluster) *Locator {
	l := &Locator{sm: sm, host: HostOf(sm), pods: map[netip.Addr]*model.Pod{}, endpoints: map[netip.Addr]placedEndpoint{}}
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			for _, e := range p.Endpoints {
				if _, ok := l.endpoints[e.IP]; !ok {
					l.endpoints[e.IP] = placedEndpoint{local: e.Local, port: p.Name.String()}
				}
			}
		}
	}
	if c != nil {
		for _, p := range c.Pods {
			for _, a := range p.PodIPs {
				l.pods[a] = p
			}
		}
		l.nodes = c.Nodes
	}
	return l
}

// HostOf lists the node's addresses, as the tracers need them.
func HostOf(sm *ir.ServiceMap) trace.Host {
	var h trace.Host
	for _, p := range sm.Node.Addresses {
		h.Local = append(h.Local, p.Addr())
	}
	if sm.Node.IP.IsValid() && !h.IsLocal(sm.Node.IP) {
		h.Local = append(h.Local, sm.Node.IP)
	}
	return h
}

// Node is the name of the node.
func (l *Locator) Node() string { return l.sm.Node.Name }

// Host is the node's addresses.
func (l *Locator) Host() trace.Host { return l.host }

// Locate says where an address is.
func (l *Locator) Locate(a netip.Addr) trace.Source {
	if l.host.IsLocal(a) {
		return trace.Source{Locality: trace.FromNode, Name: l.sm.Node.Name}
	}
	if p := l.pods[a]; p != nil {
		loc := trace.RemotePod
		if p.NodeName != "" && p.NodeName == l.sm.Node.Name {
			loc = trace.LocalPod
		}
		return trace.Source{Locality: loc, Name: p.Namespace + "/" + p.Name}
	}
	if e, ok := l.endpoints[a]; ok {
		if e.local {
			return trace.Source{Locality: trace.LocalPod, Name: "an endpoint of " + e.port}
		}
		return trace.Source{Locality: trace.RemotePod, Name: "an endpoint of " + e.port}
	}
	for _, n := range l.nodes {
		for _, na := range n.Addresses {
			if na.Address == a {
				return trace.Source{Locality: trace.Outside, Name: "Node " + n.Name}
			}
		}
		for _, c := range n.PodCIDRs {
			if c.Contains(a) {
				if n.Name == l.sm.Node.Name {
					return trace.Source{Locality: trace.LocalPod, Name: "pod CIDR " + c.String()}
				}
				return trace.Source{Locality: trace.RemotePod, Name: "pod CIDR of Node " + n.Name}
			}
		}
	}
	switch d := l.sm.LocalDetector; {
	case d.Mode == "NodeCIDR" && d.CIDR.Contains(a):
		return trace.Source{Locality: trace.LocalPod, Name: "pod CIDR " + d.CIDR.String()}
	case d.Mode == "ClusterCIDR" && d.CIDR.Contains(a):
		// Not a pod svcgen knows of; the rules still count it as pod traffic.
		return trace.Source{Locality: trace.Outside, Name: "in the cluster CIDR " + d.CIDR.String()}
	}
	return trace.Source{Locality: trace.Outside}
}

// Packet builds the first packet of a connection from src: a pod on this node sends it
// through a pod interface (named to match an interface-based local-traffic detector),
// everything else through an interface that is not a pod's, or from the node itself.
func (l *Locator) Packet(src netip.Addr, dst netip.AddrPort, proto string) (trace.Packet, trace.Source) {
	s := l.Locate(src)
	p := trace.Packet{Src: src, Dst: dst.Addr(), DPort: dst.Port(), Proto: proto}
	if s.Locality == trace.LocalPod {
		p.InIface = PodInterface(l.sm.LocalDetector)
	}
	return p, s
}

// PacketAs is Packet for a source meant to be of the given locality (verify's probes
// make up addresses): the locality counts where nothing in the cluster says otherwise.
func (l *Locator) PacketAs(src netip.Addr, dst netip.AddrPort, proto string, want trace.Locality) (trace.Packet, trace.Source) {
	p, s := l.Packet(src, dst, proto)
	if s.Locality != want && !l.known(src) {
		s = trace.Source{Locality: want}
		p.InIface = ""
		if want == trace.LocalPod {
			p.InIface = PodInterface(l.sm.LocalDetector)
		}
	}
	return p, s
}

// known reports an address the cluster places: the node's, a Pod's or an endpoint's.
func (l *Locator) known(a netip.Addr) bool {
	_, endpoint := l.endpoints[a]
	return endpoint || l.host.IsLocal(a) || l.pods[a] != nil
}

// PodInterface is the name of a pod interface as the node's local-traffic detector sees
// it: the bridge, or the prefix followed by "0"; empty when the detector looks at
// addresses.
func PodInterface(d ir.LocalDetector) string {
	switch d.Mode {
	case "BridgeInterface":
		return d.Interface
	case "InterfaceNamePrefix":
		return d.Interface + "0"
	}
	return ""
}
