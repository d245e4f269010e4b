package compiler

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
)

// Allocation is deterministic without a lock: a Service's first candidate address or
// port is derived from a hash of its name, and collisions probe forward. Adding one
// Service therefore moves no other Service (unlike handing out addresses in order),
// and the same manifests give the same result in any order.

func hash64(key string) uint64 {
	sum := sha256.Sum256([]byte(key))
	return binary.BigEndian.Uint64(sum[:8])
}

// ipPool hands out addresses of one CIDR, never the network address, the first
// address (by convention the kubernetes Service's) or the last (IPv4 broadcast).
type ipPool struct {
	prefix netip.Prefix
	used   map[netip.Addr]string
}

// size is the number of addresses the pool may hand out, capped for large IPv6 ranges.
func (p *ipPool) size() uint64 {
	hostBits := p.prefix.Addr().BitLen() - p.prefix.Bits()
	if hostBits > 62 {
		hostBits = 62
	}
	if hostBits < 2 {
		return 0
	}
	return 1<<hostBits - 3
}

func (p *ipPool) allocate(key string) (netip.Addr, bool) {
	n := p.size()
	if n == 0 {
		return netip.Addr{}, false
	}
	start := hash64(key) % n
	// At most len(used)+1 probes: one of them must be free.
	for i := uint64(0); i < n; i++ {
		a := addOffset(p.prefix.Masked().Addr(), 2+(start+i)%n)
		if _, taken := p.used[a]; !taken {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// addOffset adds off to the low 64 bits of a.
func addOffset(a netip.Addr, off uint64) netip.Addr {
	b := a.As16()
	lo := binary.BigEndian.Uint64(b[8:])
	hi := binary.BigEndian.Uint64(b[:8])
	sum := lo + off
	if sum < lo {
		hi++
	}
	binary.BigEndian.PutUint64(b[8:], sum)
	binary.BigEndian.PutUint64(b[:8], hi)
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}

// portPool hands out node ports of a range.
type portPool struct {
	r    PortRange
	used map[int32]string
}

func (p *portPool) allocate(key string) (int32, bool) {
	n := int64(p.r.Max-p.r.Min) + 1
	start := int64(hash64(key) % uint64(n))
	for i := int64(0); i < n; i++ {
		port := p.r.Min + int32((start+i)%n)
		if _, taken := p.used[port]; !taken {
			return port, true
		}
	}
	return 0, false
}
