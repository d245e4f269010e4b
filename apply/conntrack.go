package apply

import (
	"net/netip"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Conntrack flushes conntrack entries that would keep UDP traffic going to endpoints
// that are gone.
type Conntrack interface {
	// FlushStale deletes the stale UDP entries for sm's service ports; it returns how
	// many it deleted.
	FlushStale(sm *ir.ServiceMap) (int, error)
}

// NetlinkConntrack talks to the conntrack table of the network namespace the process
// runs in, through netlink (github.com/vishvananda/netlink).
type NetlinkConntrack struct{}

// FlushStale does what kube-proxy's conntrack reconciler does: a UDP entry whose
// original destination is a UDP service port's cluster IP, external IP or load-balancer
// IP (or, for a NodePort, whose original destination port is the node port) and whose
// reply source is not one of that port's serving endpoints is deleted. (kube-proxy
// keys frontends by IP alone; svcgen by IP and port, so two UDP ports of one address
// with different endpoints are judged each by its own.) UDP has no
// connection to end, so without this a client keeps sending to a removed endpoint (or
// into the black hole of a service that had none) until the entry times out.
func (NetlinkConntrack) FlushStale(sm *ir.ServiceMap) (int, error) {
	f := staleFilter(sm)
	if f.empty() {
		return 0, nil
	}
	family := netlink.InetFamily(unix.AF_INET)
	if sm.Family == model.IPv6 {
		family = unix.AF_INET6
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, f)
	return int(n), err
}

// udpFilter matches the stale entries of the UDP service ports.
type udpFilter struct {
	byIP   map[netip.AddrPort]map[netip.Addr]bool // frontend -> serving endpoint IPs
	byPort map[uint16]map[netip.Addr]bool         // node port -> serving endpoint IPs
}

func staleFilter(sm *ir.ServiceMap) *udpFilter {
	f := &udpFilter{byIP: map[netip.AddrPort]map[netip.Addr]bool{}, byPort: map[uint16]map[netip.Addr]bool{}}
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			if p.Protocol != model.UDP {
				continue
			}
			// Traffic policies and topology are not looked at, as upstream does not:
			// a change of policy does not cut flows that still have an endpoint.
			serving := map[netip.Addr]bool{}
			for _, e := range p.Endpoints {
				if e.Serving {
					serving[e.IP] = true
				}
			}
			f.byIP[netip.AddrPortFrom(p.ClusterIP, p.Port)] = serving
			for _, ip := range p.ExternalIPs {
				f.byIP[netip.AddrPortFrom(ip, p.Port)] = serving
			}
			for _, ip := range p.LoadBalancerIPs {
				f.byIP[netip.AddrPortFrom(ip, p.Port)] = serving
			}
			if p.NodePort != 0 {
				f.byPort[p.NodePort] = serving
			}
		}
	}
	return f
}

func (f *udpFilter) empty() bool { return len(f.byIP) == 0 && len(f.byPort) == 0 }

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f *udpFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	dst, ok1 := netip.AddrFromSlice(flow.Forward.DstIP)
	replySrc, ok2 := netip.AddrFromSlice(flow.Reverse.SrcIP)
	if !ok1 || !ok2 {
		return false
	}
	dst, replySrc = dst.Unmap(), replySrc.Unmap()
	if serving, ok := f.byIP[netip.AddrPortFrom(dst, flow.Forward.DstPort)]; ok && !serving[replySrc] {
		return true
	}
	if serving, ok := f.byPort[flow.Forward.DstPort]; ok && !serving[replySrc] {
		return true
	}
	return false
}
