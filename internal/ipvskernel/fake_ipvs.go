package ipvskernel

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"syscall"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// schedulers are the ones the kernel has modules for (ipvsadm 1.31's list); the
// kernel refuses another with ENOENT.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh"}

type fakeIPVS struct{ f *Fake }

func (fakeIPVS) Close() {}

func (v fakeIPVS) Services() ([]*syntax.VirtualServer, map[syntax.RealID]syntax.Conns, error) {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	return v.f.list(), maps.Clone(v.f.conns), nil
}

func (v fakeIPVS) AddService(vs *syntax.VirtualServer) error {
	return v.do(syntax.ServiceCommand("-A", vs), func(f *Fake) error {
		switch {
		case f.services[vs.ID()] != nil:
			return syscall.EEXIST
		case !slices.Contains(schedulers, vs.Scheduler):
			return syscall.ENOENT
		}
		c := *vs
		c.Reals, c.For = nil, nil
		f.services[vs.ID()] = &c
		return nil
	})
}

func (v fakeIPVS) UpdateService(vs *syntax.VirtualServer) error {
	return v.do(syntax.ServiceCommand("-E", vs), func(f *Fake) error {
		old := f.services[vs.ID()]
		switch {
		case old == nil:
			return syscall.ESRCH
		case !slices.Contains(schedulers, vs.Scheduler):
			return syscall.ENOENT
		}
		old.Scheduler, old.Flags, old.Timeout, old.Netmask = vs.Scheduler, vs.Flags, vs.Timeout, vs.Netmask
		return nil
	})
}

func (v fakeIPVS) DeleteService(vs *syntax.VirtualServer) error {
	return v.do(syntax.ServiceCommand("-D", vs), func(f *Fake) error {
		old := f.services[vs.ID()]
		if old == nil {
			return syscall.ESRCH
		}
		for _, rs := range old.Reals {
			delete(f.conns, old.RealID(rs))
		}
		delete(f.services, vs.ID())
		return nil
	})
}

func (v fakeIPVS) AddReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return v.real("-a", vs, rs, func(f *Fake, svc *syntax.VirtualServer, i int) error {
		switch {
		case i >= 0:
			return syscall.EEXIST
		case rs.Address.Addr().Is6() != vs.Address.Addr().Is6():
			return syscall.EINVAL
		}
		svc.Reals = append(svc.Reals, rs)
		slices.SortFunc(svc.Reals, syntax.CompareReals)
		return nil
	})
}

func (v fakeIPVS) UpdateReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return v.real("-e", vs, rs, func(f *Fake, svc *syntax.VirtualServer, i int) error {
		if i < 0 {
			return syscall.ENOENT
		}
		svc.Reals[i] = rs
		return nil
	})
}

func (v fakeIPVS) DeleteReal(vs *syntax.VirtualServer, rs syntax.RealServer) error {
	return v.real("-d", vs, rs, func(f *Fake, svc *syntax.VirtualServer, i int) error {
		if i < 0 {
			return syscall.ENOENT
		}
		svc.Reals = slices.Delete(svc.Reals, i, i+1)
		delete(f.conns, vs.RealID(rs))
		return nil
	})
}

// real runs a change to a real server of vs: ESRCH without the virtual server, else
// change with the fake's virtual server and the real server's index there (-1: none).
func (v fakeIPVS) real(cmd string, vs *syntax.VirtualServer, rs syntax.RealServer, change func(f *Fake, svc *syntax.VirtualServer, i int) error) error {
	return v.do(syntax.RealCommand(cmd, vs, rs), func(f *Fake) error {
		svc := f.services[vs.ID()]
		if svc == nil {
			return syscall.ESRCH
		}
		i := slices.IndexFunc(svc.Reals, func(o syntax.RealServer) bool { return o.Address == rs.Address })
		return change(f, svc, i)
	})
}

func (v fakeIPVS) do(what string, change func(f *Fake) error) error {
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noIPVS != nil {
		return nil // as moby/ipvs on a kernel without IPVS: success, and nothing done
	}
	return f.change("ipvsadm "+what, func() error { return change(f) })
}

type fakeLinks struct{ f *Fake }

func (l fakeLinks) Addresses(name string, ipv6 bool) ([]netip.Prefix, bool, error) {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	addrs, ok := l.f.links[name]
	var out []netip.Prefix
	for _, a := range addrs {
		if a.Addr().Is6() == ipv6 {
			out = append(out, a)
		}
	}
	return out, ok, nil
}

func (l fakeLinks) AddDummy(name string) error {
	return l.do("ip link add "+name+" type dummy", func(f *Fake) error {
		if _, ok := f.links[name]; ok {
			return syscall.EEXIST
		}
		f.links[name] = nil
		return nil
	})
}

func (l fakeLinks) DeleteLink(name string) error {
	return l.do("ip link del "+name, func(f *Fake) error {
		if _, ok := f.links[name]; !ok {
			return fmt.Errorf("link %s not found", name)
		}
		delete(f.links, name)
		return nil
	})
}

func (l fakeLinks) AddAddress(name string, p netip.Prefix) error {
	return l.do("ip addr add "+p.String()+" dev "+name, func(f *Fake) error {
		addrs, ok := f.links[name]
		switch {
		case !ok:
			return fmt.Errorf("link %s not found", name)
		case slices.Contains(addrs, p):
			return syscall.EEXIST
		}
		f.links[name] = append(addrs, p)
		slices.SortFunc(f.links[name], netip.Prefix.Compare)
		return nil
	})
}

func (l fakeLinks) DeleteAddress(name string, p netip.Prefix) error {
	return l.do("ip addr del "+p.String()+" dev "+name, func(f *Fake) error {
		addrs, ok := f.links[name]
		i := slices.Index(addrs, p)
		switch {
		case !ok:
			return fmt.Errorf("link %s not found", name)
		case i < 0:
			return syscall.EADDRNOTAVAIL
		}
		f.links[name] = slices.Delete(addrs, i, i+1)
		return nil
	})
}

func (l fakeLinks) do(what string, change func(f *Fake) error) error {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.change(what, func() error { return change(f) })
}
