//go:build linux

package ipvskernel

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/moby/ipvs"
	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// flagHashed is IP_VS_SVC_F_HASHED: the kernel sets it on every service it holds and
// refuses it in a request.
const flagHashed = 0x2

// OpenIPVS opens IPVS through moby/ipvs in the network namespace of the netns file
// at path ("/var/run/netns/NAME"), or in the calling thread's when path is "". Check
// first: on a kernel without IPVS, moby/ipvs reports success and does nothing.
func OpenIPVS(path string) (IPVS, error) {
	h, err := ipvs.New(path)
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	return &mobyIPVS{h: h}, nil
}

type mobyIPVS struct{ h *ipvs.Handle }

func (m *mobyIPVS) Close() { m.h.Close() }

func (m *mobyIPVS) Services() ([]*syntax.VirtualServer, map[syntax.RealID]syntax.Conns, error) {
	svcs, err := m.h.GetServices()
	if err != nil {
		return nil, nil, fmt.Errorf("ipvs: listing virtual servers: %w", err)
	}
	var out []*syntax.VirtualServer
	conns := map[syntax.RealID]syntax.Conns{}
	for _, s := range svcs {
		if s.FWMark != 0 {
			continue
		}
		vs, err := fromMoby(s)
		if err != nil {
			return nil, nil, err
		}
		dests, err := m.h.GetDestinations(s)
		if err != nil {
			return nil, nil, fmt.Errorf("ipvs: real servers of %s: %w", vs.Key(), err)
		}
		for _, d := range dests {
			rs := realFromMoby(d, s.AddressFamily == unix.AF_INET6)
			vs.Reals = append(vs.Reals, rs)
			if d.ActiveConnections != 0 || d.InactiveConnections != 0 {
				conns[vs.RealID(rs)] = syntax.Conns{Active: d.ActiveConnections, Inactive: d.InactiveConnections}
			}
		}
		out = append(out, vs)
	}
	syntax.SortServices(out)
	return out, conns, nil
}

func (m *mobyIPVS) AddService(vs *syntax.VirtualServer) error { return m.h.NewService(toMoby(vs)) }
func (m *mobyIPVS) UpdateService(vs *syntax.VirtualServer) error {
	return m.h.UpdateService(toMoby(vs))
}
func (m *mobyIPVS) DeleteService(vs *syntax.VirtualServer) error { return m.h.DelService(toMoby(vs)) }

func (m *mobyIPVS) AddReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return m.h.NewDestination(toMoby(vs), destToMoby(vs, rs))
}

func (m *mobyIPVS) UpdateReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return m.h.UpdateDestination(toMoby(vs), destToMoby(vs, rs))
}

func (m *mobyIPVS) DeleteReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return m.h.DelDestination(toMoby(vs), destToMoby(vs, rs))
}

var protocols = map[model.Protocol]uint16{model.TCP: unix.IPPROTO_TCP, model.UDP: unix.IPPROTO_UDP, model.SCTP: unix.IPPROTO_SCTP}

// fromMoby is a virtual server as ipvsadm sees it. The kernel's HASHED flag is
// dropped; a service without it did not come from the kernel (kube-proxy's
// toVirtualServer refuses it too).
func fromMoby(s *ipvs.Service) (*syntax.VirtualServer, error) {
	a := addrFromMoby(s.Address, s.AddressFamily == unix.AF_INET6)
	if s.Flags&flagHashed == 0 {
		return nil, fmt.Errorf("ipvs: virtual server %s came back without the kernel's HASHED flag", a)
	}
	vs := &syntax.VirtualServer{Address: netip.AddrPortFrom(a, s.Port), Scheduler: s.SchedName, Flags: s.Flags &^ flagHashed, Timeout: s.Timeout}
	for p, n := range protocols {
		if n == s.Protocol {
			vs.Protocol = p
		}
	}
	return vs, nil
}

// addrFromMoby reads an address the kernel gave: an IPv4 one may come as 16 bytes,
// with the address in the first 4 (moby/ipvs's parseIP).
func addrFromMoby(ip []byte, ipv6 bool) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	if !ipv6 {
		a = a.Unmap()
		if !a.Is4() && len(ip) >= 4 {
			a, _ = netip.AddrFromSlice(ip[:4])
		}
	}
	return a
}

func realFromMoby(d *ipvs.Destination, ipv6 bool) syntax.RealServer {
	f := syntax.Masquerade
	switch d.ConnectionFlags & ipvs.ConnectionFlagFwdMask {
	case ipvs.ConnectionFlagDirectRoute, ipvs.ConnectionFlagLocalNode:
		f = syntax.Route
	case ipvs.ConnectionFlagTunnel:
		f = syntax.Tunnel
	}
	return syntax.RealServer{Address: netip.AddrPortFrom(addrFromMoby(d.Address, ipv6), d.Port), Forward: f, Weight: d.Weight}
}

// toMoby is kube-proxy's toIPVSService: the family and the netmask are always sent
// (a zero netmask on a persistent IPv4 service would make every client stick to one
// real server).
func toMoby(vs *syntax.VirtualServer) *ipvs.Service {
	s := &ipvs.Service{
		Address: vs.Address.Addr().AsSlice(), Port: vs.Address.Port(), SchedName: vs.Scheduler, Protocol: protocols[vs.Protocol],
		Flags: vs.Flags, Timeout: vs.Timeout, AddressFamily: unix.AF_INET, Netmask: 0xffffffff,
	}
	if vs.Address.Addr().Is6() {
		s.AddressFamily, s.Netmask = unix.AF_INET6, 128
	}
	return s
}

func destToMoby(vs *syntax.VirtualServer, rs syntax.RealServer) *ipvs.Destination {
	flags := map[syntax.Forward]uint32{syntax.Masquerade: ipvs.ConnectionFlagMasq, syntax.Route: ipvs.ConnectionFlagDirectRoute, syntax.Tunnel: ipvs.ConnectionFlagTunnel}[rs.Forward]
	d := &ipvs.Destination{Address: rs.Address.Addr().AsSlice(), Port: rs.Address.Port(), Weight: rs.Weight, ConnectionFlags: flags, AddressFamily: unix.AF_INET}
	if vs.Address.Addr().Is6() {
		// The kernel takes a destination's family from the request and refuses one
		// that differs from the service's.
		d.AddressFamily = unix.AF_INET6
	}
	return d
}

// netlinkLinks is the links through vishvananda/netlink.
type netlinkLinks struct{}

func (netlinkLinks) Addresses(name string, ipv6 bool) ([]netip.Prefix, bool, error) {
	link, err := netlink.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	family := netlink.FAMILY_V4
	if ipv6 {
		family = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(link, family)
	if err != nil {
		return nil, true, fmt.Errorf("addresses of %s: %w", name, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		if p, ok := netip.AddrFromSlice(a.IP); ok {
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(p.Unmap(), ones))
		}
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out, true, nil
}

func (netlinkLinks) AddDummy(name string) error {
	return netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
}

func (netlinkLinks) DeleteLink(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkDel(link)
}

func (netlinkLinks) AddAddress(name string, p netip.Prefix) error {
	return changeAddress(name, p, true)
}

func (netlinkLinks) DeleteAddress(name string, p netip.Prefix) error {
	return changeAddress(name, p, false)
}

func changeAddress(name string, p netip.Prefix, add bool) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	if add {
		return netlink.AddrAdd(link, addr)
	}
	return netlink.AddrDel(link, addr)
}
