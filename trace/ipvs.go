package trace

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

// IPVS traces packets through a node in kube-proxy's ipvs mode: the companion
// iptables chains (their "-m set" matches looked up in the node's ipsets), then IPVS,
// which catches packets for a virtual server's address and port and sends each new
// connection to one real server, then POSTROUTING's masquerade.
//
// The hooks run in the kernel's order. From another host or a pod: nat PREROUTING;
// for a local destination (the node's addresses and everything bound to kube-ipvs0)
// filter INPUT, then IPVS (at LOCAL_IN, after the filter table), then nat POSTROUTING;
// else filter FORWARD and nat POSTROUTING. From the node: nat OUTPUT, IPVS (at
// LOCAL_OUT, after nat), filter OUTPUT, filter INPUT for a local destination IPVS did
// not take, nat POSTROUTING. A packet IPVS scheduled leaves through LOCAL_OUT whatever
// its source (unless its real server is the node itself: then it is delivered here,
// and neither OUTPUT nor POSTROUTING sees it), so filter OUTPUT sees it and filter
// FORWARD never does: in the qemu
// guest of e2e/ipvsvm, a DROP rule in OUTPUT stops a client's connection through a
// virtual server, and one in FORWARD does not.
//
// A connection the node opens to an address on kube-ipvs0 leaves with that address as
// its source: the kernel picks the source of a local route from the route itself. The
// trace shows that as a "route" step; kube-proxy's rules count on it (KUBE-CLUSTER-IP
// src,dst and KUBE-IPVS-OUT-FILTER match the virtual address as the source).
//
// Each real server takes new connections in proportion to its weight (weight 0 takes
// none): exact for round robin and weighted round robin, and over many clients for
// the other schedulers. A virtual server without a real server to pick answers with an
// ICMP port unreachable (the kernel's ip_vs_leave), shown as REJECT.
type IPVS struct {
	ipt      *IPTables
	services map[vsKey]*ipvssyntax.VirtualServer
	dummy    map[netip.Addr]bool
	host     Host
}

type vsKey struct {
	proto model.Protocol
	addr  netip.AddrPort
}

// NewIPVS prepares a node's ipvs state for tracing. rs is the node's iptables ruleset
// (iptables-save, or the companion payload); nil takes the state's companion chains.
// Built-in chains the ruleset lacks get kube-proxy's jumps into its chains. host lists the node's own addresses; the addresses bound to
// kube-ipvs0 (n.Addresses, else the KUBE-IPVS-IPS set) are local too.
func NewIPVS(n *ipvssyntax.Node, rs *iptsyntax.Ruleset, host Host) (*IPVS, error) {
	t := &IPVS{services: map[vsKey]*ipvssyntax.VirtualServer{}, dummy: map[netip.Addr]bool{}}
	for _, p := range n.Addresses {
		t.dummy[p.Addr()] = true
	}
	if len(n.Addresses) == 0 { // read from a node: the set lists them (either family's)
		for _, ipv6 := range []bool{false, true} {
			if s := n.Set(ipvssyntax.SetName("KUBE-IPVS-IPS", ipv6)); s != nil {
				for _, e := range s.Entries {
					if a, err := netip.ParseAddr(e); err == nil {
						t.dummy[a] = true
					}
				}
			}
		}
	}
	t.host = Host{Local: append([]netip.Addr(nil), host.Local...)}
	for a := range t.dummy {
		t.host.Local = append(t.host.Local, a)
	}
	t.host = t.host.indexed() // a Service address or more each
	for _, vs := range n.Services {
		t.services[vsKey{vs.Protocol, vs.Address}] = vs
	}
	if rs == nil {
		rs = companionRuleset(n)
	}
	ipt, err := NewIPTables(withIPVSJumps(rs), t.host)
	if err != nil {
		return nil, err
	}
	ipt.sets = indexSets(n.Sets)
	t.ipt = ipt
	return t, nil
}

// companionRuleset is the iptables ruleset of the state's companion chains.
func companionRuleset(n *ipvssyntax.Node) *iptsyntax.Ruleset {
	rs := &iptsyntax.Ruleset{}
	for _, tab := range []ipvssyntax.Table{n.NAT, n.Filter} {
		if tab.Name == "" {
			continue
		}
		tb := &iptsyntax.Table{Name: tab.Name}
		chains := map[string]*iptsyntax.Chain{}
		chain := func(name string) *iptsyntax.Chain {
			if c := chains[name]; c != nil {
				return c
			}
			c := &iptsyntax.Chain{Name: name, Policy: "-", Declared: true}
			chains[name] = c
			tb.Chains = append(tb.Chains, c)
			return c
		}
		for _, name := range tab.Chains {
			chain(name)
		}
		for _, r := range tab.Rules {
			c := chain(r.Chain)
			c.Rules = append(c.Rules, iptsyntax.Rule{Chain: r.Chain, Args: r.Args})
		}
		rs.Tables = append(rs.Tables, tb)
	}
	return iptsyntax.Reindex(rs)
}

// withIPVSJumps returns the ruleset with the ipvs proxier's jumps in the built-in
// chains it lacks (a payload for iptables-restore --noflush has none), as a node that
// runs kube-proxy in ipvs mode has them: each inserted at position 1, so a chain lists
// them in reverse.
func withIPVSJumps(rs *iptsyntax.Ruleset) *iptsyntax.Ruleset {
	out := &iptsyntax.Ruleset{}
	for _, t := range rs.Tables {
		nt := &iptsyntax.Table{Name: t.Name, Deleted: t.Deleted}
		added := map[string]*iptsyntax.Chain{}
		for i := len(ipvssyntax.Jumps) - 1; i >= 0; i-- {
			j := ipvssyntax.Jumps[i]
			if j.Table != t.Name || t.Chain(j.From) != nil || t.Chain(j.To) == nil {
				continue
			}
			c := added[j.From]
			if c == nil {
				c = &iptsyntax.Chain{Name: j.From, Policy: "ACCEPT", Declared: true}
				added[j.From] = c
				nt.Chains = append(nt.Chains, c)
			}
			c.Rules = append(c.Rules, iptsyntax.Rule{Chain: j.From, Args: j.Args()})
		}
		nt.Chains = append(nt.Chains, t.Chains...)
		out.Tables = append(out.Tables, nt)
	}
	return iptsyntax.Reindex(out)
}

// Trace follows the first packet of a new connection.
func (t *IPVS) Trace(p Packet) (*Result, error) {
	st := state{pkt: p, prob: big.NewRat(1, 1)}
	fromNode := t.host.IsLocal(p.Src)
	if fromNode && t.dummy[p.Dst] && p.Src != p.Dst {
		st.pkt.Src = p.Dst
		if !t.ipt.noPaths {
			st.path = append(st.path, Step{Table: "route", Chain: "source address",
				Rule: fmt.Sprintf("%s is on %s, so the node's connection to it leaves from %s", p.Dst, ipvssyntax.DummyInterface, p.Dst), P: one})
		}
	}
	first := "PREROUTING"
	if fromNode {
		first = "OUTPUT"
	}
	natOut, err := t.ipt.hook("nat", first, st)
	if err != nil {
		return nil, err
	}
	var outs []Outcome
	for _, n := range natOut {
		o, err := t.afterNat(n, fromNode)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o...)
	}
	return &Result{Packet: p, Mode: "ipvs", Outcomes: merge(outs)}, nil
}

// afterNat takes one branch from nat PREROUTING or OUTPUT to its end.
func (t *IPVS) afterNat(n walkResult, fromNode bool) ([]Outcome, error) {
	st := n.st
	st.marked = st.mark != 0
	if n.verdict == "DROP" || n.verdict == "REJECT" {
		return []Outcome{outcome(st, Verdict(n.verdict))}, nil
	}
	local := t.host.IsLocal(st.pkt.Dst)
	var hooks []string // filter hooks before IPVS
	switch {
	case !fromNode && local:
		hooks = []string{"INPUT"}
	case !fromNode:
		return t.finish(st, []string{"FORWARD"}, false)
	}
	st, v, err := t.filter(st, hooks)
	if err != nil || v == Drop || v == Reject {
		return []Outcome{outcome(st, v)}, err
	}
	var outs []Outcome
	for _, b := range t.schedule(st) {
		if b.verdict != "" {
			outs = append(outs, outcome(b.st, Verdict(b.verdict)))
			continue
		}
		if b.st.vs != nil && !fromNode && t.host.IsLocal(b.st.pkt.Dst) {
			// A real server at one of the node's own addresses (a hostNetwork
			// pod): IPVS, at LOCAL_IN, lets the translated packet go on to the
			// local socket instead of sending it out through LOCAL_OUT, so
			// neither filter OUTPUT nor nat POSTROUTING sees it.
			outs = append(outs, outcome(b.st, DNAT))
			continue
		}
		var after []string // filter hooks after IPVS
		if b.st.vs != nil || fromNode {
			after = []string{"OUTPUT"}
		}
		if fromNode && b.st.vs == nil && local {
			after = append(after, "INPUT")
		}
		o, err := t.finish(b.st, after, v == Accept)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o...)
	}
	return outs, nil
}

// filter runs filter hooks; the verdict is DROP or REJECT when one decided, Accept
// when a rule (not a policy) accepted, else None.
func (t *IPVS) filter(st state, hooks []string) (state, Verdict, error) {
	v := None
	for _, h := range hooks {
		res, err := t.ipt.hook("filter", h, st)
		if err != nil {
			return st, None, err
		}
		if len(res) != 1 {
			return st, None, fmt.Errorf("filter %s splits the packet; only nat chains may use -m statistic", h)
		}
		st = res[0].st
		switch r := res[0].verdict; {
		case r == "DROP" || r == "REJECT":
			return st, Verdict(r), nil
		case r == "ACCEPT" && !res[0].policy:
			v = Accept
		}
	}
	return st, v, nil
}

// finish runs the last filter hooks and nat POSTROUTING.
func (t *IPVS) finish(st state, hooks []string, accepted bool) ([]Outcome, error) {
	st, v, err := t.filter(st, hooks)
	if err != nil || v == Drop || v == Reject {
		return []Outcome{outcome(st, v)}, err
	}
	post, err := t.ipt.hook("nat", "POSTROUTING", st)
	if err != nil {
		return nil, err
	}
	st = post[0].st
	switch {
	case st.dnat != "":
		v = DNAT
	case accepted:
		v = Accept
	}
	return []Outcome{outcome(st, v)}, nil
}

// schedule is IPVS: a packet for a virtual server goes to each real server with the
// share its weight gives it (each a branch, DNATed); other packets go on unchanged.
func (t *IPVS) schedule(st state) []walkResult {
	proto := model.Protocol(strings.ToUpper(st.pkt.Proto))
	vs := t.services[vsKey{proto, netip.AddrPortFrom(st.pkt.Dst, st.pkt.DPort)}]
	if vs == nil {
		return []walkResult{{st: st}}
	}
	total := 0
	for _, rs := range vs.Reals {
		total += max(rs.Weight, 0)
	}
	if total == 0 {
		if !t.ipt.noPaths {
			st.path = append(st.path, Step{Table: "ipvs", Chain: ipvssyntax.ServiceLine(vs),
				Rule: "no real server takes new connections: ICMP port unreachable", Service: strings.Join(vs.For, ", "), P: one})
		}
		return []walkResult{{st: st, verdict: "REJECT"}}
	}
	var out []walkResult
	for _, rs := range vs.Reals {
		if rs.Weight <= 0 {
			continue
		}
		share := big.NewRat(int64(rs.Weight), int64(total))
		b := st.fork(share)
		b.vs = vs
		b.affinity = vs.Flags&ipvssyntax.FlagPersistent != 0
		b.pkt.Dst, b.pkt.DPort = rs.Address.Addr(), rs.Address.Port()
		b.dnat = rs.Address.String()
		if !t.ipt.noPaths {
			b.path = append(b.path, Step{Table: "ipvs", Chain: ipvssyntax.ServiceLine(vs), Rule: ipvssyntax.RealLine(vs, rs), Service: strings.Join(vs.For, ", "), P: share})
		}
		out = append(out, walkResult{st: b})
	}
	return out
}
