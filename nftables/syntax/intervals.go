package syntax

import (
	"net/netip"
	"slices"
	"strings"
)

// interval is a range of addresses, both ends included.
type interval struct{ lo, hi netip.Addr }

// mergeAddresses reads the entries of an anonymous set when each is an address, a
// prefix or a range "a-b", all of one family, and returns the set as the kernel keeps
// it: nft merges an interval set's overlapping and adjacent entries, so
// "{ 203.0.113.0/24 , 203.0.113.10 }" (kube-proxy's LoadBalancer source ranges with
// the VIP added) lists as "203.0.113.0/24". Each merged interval is written as a
// prefix where it is one, else as "a-b". ok is false for any other set.
func mergeAddresses(entries []string) (merged []string, ok bool) {
	ivs := make([]interval, 0, len(entries))
	for _, e := range entries {
		iv, ok := parseInterval(e)
		if !ok || len(ivs) > 0 && iv.lo.Is4() != ivs[0].lo.Is4() {
			return nil, false
		}
		ivs = append(ivs, iv)
	}
	slices.SortFunc(ivs, func(a, b interval) int { return a.lo.Compare(b.lo) })
	out := ivs[:1]
	for _, iv := range ivs[1:] {
		last := &out[len(out)-1]
		if next := last.hi.Next(); next.IsValid() && iv.lo.Compare(next) > 0 {
			out = append(out, iv)
			continue
		}
		if iv.hi.Compare(last.hi) > 0 {
			last.hi = iv.hi
		}
	}
	for _, iv := range out {
		merged = append(merged, iv.String())
	}
	return merged, true
}

// parseInterval reads "a", "a/n" or "a-b".
func parseInterval(s string) (interval, bool) {
	if s == "" || !(s[0] >= '0' && s[0] <= '9' || s[0] >= 'a' && s[0] <= 'f' || s[0] == ':') {
		return interval{}, false // a port, a verdict, a name: not an address
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := netip.ParseAddr(lo)
		b, err2 := netip.ParseAddr(hi)
		if err1 != nil || err2 != nil || a.Is4() != b.Is4() || a.Compare(b) > 0 {
			return interval{}, false
		}
		return interval{a, b}, true
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return interval{}, false
		}
		p = p.Masked()
		return interval{p.Addr(), lastAddr(p)}, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return interval{}, false
	}
	return interval{a, a}, true
}

// lastAddr is the highest address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// String writes an interval as nft lists it: an address, a prefix, or "a-b".
func (iv interval) String() string {
	if iv.lo == iv.hi {
		return iv.lo.String()
	}
	for bits := iv.lo.BitLen() - 1; bits >= 0; bits-- {
		p := netip.PrefixFrom(iv.lo, bits)
		if p.Masked().Addr() != iv.lo {
			break
		}
		if lastAddr(p) == iv.hi {
			return p.String()
		}
	}
	return iv.lo.String() + "-" + iv.hi.String()
}
