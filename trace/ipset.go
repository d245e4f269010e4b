package trace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// setIndex is one ipset, ready for "-m set --match-set NAME FLAGS" lookups.
type setIndex struct {
	typ string
	// keys holds every entry in ipvsadm's normal form ("10.0.0.1,tcp:80"); for
	// hash:ip,port,net the part before the net, with the nets beside it.
	keys map[string][]netip.Prefix
}

func indexSets(sets []*ipvssyntax.Set) map[string]*setIndex {
	out := map[string]*setIndex{}
	for _, s := range sets {
		si := &setIndex{typ: s.Type, keys: map[string][]netip.Prefix{}}
		for _, e := range s.Entries {
			if s.Type == ipvssyntax.HashIPPortNet {
				if i := strings.LastIndexByte(e, ','); i > 0 {
					if p, err := netip.ParsePrefix(e[i+1:]); err == nil {
						si.keys[e[:i]] = append(si.keys[e[:i]], p)
					}
				}
				continue
			}
			si.keys[e] = nil
		}
		out[s.Name] = si
	}
	return out
}

// dims are the parts of an entry of each set type, as "--match-set NAME FLAGS" gives
// one flag (src or dst) for each.
var dims = map[string][]string{
	ipvssyntax.HashIP:        {"ip"},
	ipvssyntax.HashIPPort:    {"ip", "port"},
	ipvssyntax.HashIPPortIP:  {"ip", "port", "ip"},
	ipvssyntax.HashIPPortNet: {"ip", "port", "net"},
	ipvssyntax.BitmapPort:    {"port"},
}

// setMatch evaluates "-m set [!] --match-set NAME FLAGS". A source port is not
// modelled (a client's port can be anything), so a flag asking for one never matches.
func (t *IPTables) setMatch(m iptsyntax.Module, st state) (match, error) {
	o, ok := m.Opt("match-set")
	if !ok || len(o.Values) < 2 {
		return never, fmt.Errorf("cannot trace -m set without --match-set NAME FLAGS")
	}
	si := t.sets[o.Values[0]]
	if si == nil {
		return never, fmt.Errorf("set %s is not in the ruleset (give ipset save output)", o.Values[0])
	}
	flags := strings.Split(o.Values[1], ",")
	want := dims[si.typ]
	if len(flags) != len(want) {
		return never, fmt.Errorf("set %s is %s, which --match-set %s %s does not fit", o.Values[0], si.typ, o.Values[0], o.Values[1])
	}
	hit := false
	var parts []string
	var net netip.Addr
	known := true
	for i, d := range want {
		a := st.pkt.Dst
		if flags[i] == "src" {
			a = st.pkt.Src
		}
		switch d {
		case "ip":
			parts = append(parts, a.String())
		case "net":
			net = a
		case "port":
			if flags[i] == "src" {
				known = false
			}
			port := strconv.Itoa(int(st.pkt.DPort))
			if si.typ != ipvssyntax.BitmapPort {
				port = st.pkt.Proto + ":" + port
			}
			parts = append(parts, port)
		}
	}
	if known {
		nets, in := si.keys[strings.Join(parts, ",")]
		switch {
		case !in:
		case si.typ == ipvssyntax.HashIPPortNet:
			for _, p := range nets {
				hit = hit || p.Contains(net)
			}
		default:
			hit = true
		}
	}
	return boolMatch(hit != o.Not), nil
}

// ipvsMatch evaluates "-m ipvs": the packet is one IPVS scheduled, for that virtual
// server. --vproto is a name in kube-proxy's rules and a number in iptables-save's.
func ipvsMatch(m iptsyntax.Module, st state) (match, error) {
	for _, o := range m.Opts {
		var ok bool
		switch o.Name {
		case "ipvs":
			ok = st.vs != nil
		case "vaddr":
			p, err := netip.ParsePrefix(withBits(o.Value()))
			if err != nil {
				return never, fmt.Errorf("bad --vaddr %q", o.Value())
			}
			ok = st.vs != nil && p.Contains(st.vs.Address.Addr())
		case "vproto":
			ok = st.vs != nil && iptsyntax.ProtocolName(o.Value()) == st.vs.Protocol.Lower()
		case "vport":
			ok = st.vs != nil && o.Value() == strconv.Itoa(int(st.vs.Address.Port()))
		default:
			return never, fmt.Errorf("cannot trace -m ipvs --%s", o.Name)
		}
		if ok == o.Not {
			return never, nil
		}
	}
	return always, nil
}

func withBits(s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	if strings.Contains(s, ":") {
		return s + "/128"
	}
	return s + "/32"
}

// physdev evaluates "-m physdev": the packets svcgen traces never cross a bridge port.
func physdev(m iptsyntax.Module) match {
	for _, o := range m.Opts {
		if !o.Not { // every physdev test is false for a packet that crossed no bridge
			return never
		}
	}
	return always
}
