package trace

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
)

// match is how a rule matches one branch: with probability p (0: not at all).
type match struct {
	p            *big.Rat
	setsAffinity bool
}

var (
	never  = match{p: new(big.Rat)}
	always = match{p: big.NewRat(1, 1)}
)

func boolMatch(ok bool) match {
	if ok {
		return always
	}
	return never
}

// matches evaluates a rule for a packet state. The packet is the first of a new
// connection from a client with no affinity yet: "-m recent --rcheck" never matches.
func (t *IPTables) matches(s *iptsyntax.Spec, st state) (match, error) {
	p := st.pkt
	if s.Src.Set() && s.Src.Prefix.Contains(p.Src) == s.Src.Not {
		return never, nil
	}
	if s.Dst.Set() && s.Dst.Prefix.Contains(p.Dst) == s.Dst.Not {
		return never, nil
	}
	if s.Proto != "" && (s.Proto == p.Proto) == s.ProtoNot {
		return never, nil
	}
	if s.In.Name != "" && ifaceMatch(s.In.Name, p.InIface) == s.In.Not {
		return never, nil
	}
	if s.Out.Name != "" && !s.Out.Not {
		return never, nil // outgoing interfaces are not modelled
	}
	result := always
	for _, m := range s.Modules {
		mm, err := t.module(m, st)
		if err != nil {
			return never, err
		}
		if mm.p.Sign() == 0 {
			return never, nil
		}
		if mm.p.Cmp(result.p) < 0 {
			result.p = mm.p
		}
		result.setsAffinity = result.setsAffinity || mm.setsAffinity
	}
	return result, nil
}

func ifaceMatch(pattern, iface string) bool {
	if iface == "" {
		return false
	}
	if strings.HasSuffix(pattern, "+") {
		return strings.HasPrefix(iface, strings.TrimSuffix(pattern, "+"))
	}
	return pattern == iface
}

func (t *IPTables) module(m iptsyntax.Module, st state) (match, error) {
	switch m.Name {
	case "comment", "nfacct":
		return always, nil
	case "tcp", "udp", "sctp":
		return portMatch(m, st.pkt)
	case "addrtype":
		return t.addrtype(m, st)
	case "statistic":
		return statistic(m)
	case "recent":
		if _, set := m.Opt("set"); set {
			return match{p: always.p, setsAffinity: true}, nil
		}
		return never, nil
	case "mark":
		o, _ := m.Opt("mark")
		v, mask := parseMark(o.Value())
		return boolMatch((st.mark&mask == v) != o.Not), nil
	case "conntrack", "state":
		return ctstate(m, st), nil
	case "physdev":
		return physdev(m), nil
	case "set":
		return t.setMatch(m, st)
	case "ipvs":
		return ipvsMatch(m, st)
	}
	return never, fmt.Errorf("cannot trace rules with -m %s", m.Name)
}

func portMatch(m iptsyntax.Module, p Packet) (match, error) {
	for _, o := range m.Opts {
		switch o.Name {
		case "dport", "destination-port":
			lo, hi, err := portRange(o.Value())
			if err != nil {
				return never, err
			}
			in := p.DPort >= lo && p.DPort <= hi
			if in == o.Not {
				return never, nil
			}
		case "sport", "source-port":
			// Source ports are not modelled: a client port can be anything.
		default:
			return never, fmt.Errorf("cannot trace -m %s --%s", m.Name, o.Name)
		}
	}
	return always, nil
}

func portRange(v string) (lo, hi uint16, err error) {
	a, b, isRange := strings.Cut(v, ":")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y := x
	var err2 error
	if isRange {
		y, err2 = strconv.ParseUint(b, 10, 16)
	}
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad port %q", v)
	}
	return uint16(x), uint16(y), nil
}

func (t *IPTables) addrtype(m iptsyntax.Module, st state) (match, error) {
	for _, o := range m.Opts {
		addr := st.pkt.Dst
		switch o.Name {
		case "src-type":
			addr = st.pkt.Src
		case "dst-type":
		default:
			return never, fmt.Errorf("cannot trace -m addrtype --%s", o.Name)
		}
		if o.Value() != "LOCAL" {
			return never, fmt.Errorf("cannot trace address type %s", o.Value())
		}
		if t.host.IsLocal(addr) == o.Not {
			return never, nil
		}
	}
	return always, nil
}

// statistic turns "--mode random --probability P" into an exact fraction. kube-proxy
// writes 1/k with ten digits and the kernel keeps it to 2^-31, so a P within 2^-31 of
// 1/k is taken to be exactly 1/k.
func statistic(m iptsyntax.Module) (match, error) {
	if o, _ := m.Opt("mode"); o.Value() != "random" {
		return never, fmt.Errorf("cannot trace -m statistic --mode %s", o.Value())
	}
	o, _ := m.Opt("probability")
	f, err := strconv.ParseFloat(o.Value(), 64)
	if err != nil || f < 0 || f > 1 {
		return never, fmt.Errorf("bad probability %q", o.Value())
	}
	if f > 0 {
		k := math.Round(1 / f)
		if k >= 1 && math.Abs(f-1/k) <= 1.0/(1<<31) {
			return match{p: big.NewRat(1, int64(k))}, nil
		}
	}
	r, ok := new(big.Rat).SetString(o.Value())
	if !ok {
		return never, fmt.Errorf("bad probability %q", o.Value())
	}
	return match{p: r}, nil
}

// ctstate: the traced packet starts a connection (NEW), DNATed once a DNAT happened.
func ctstate(m iptsyntax.Module, st state) match {
	for _, o := range m.Opts {
		if o.Name != "ctstate" && o.Name != "state" {
			continue
		}
		hit := false
		for _, s := range strings.Split(o.Value(), ",") {
			if s == "NEW" || (s == "DNAT" && st.dnat != "") {
				hit = true
			}
		}
		if hit == o.Not {
			return never
		}
	}
	return always
}
