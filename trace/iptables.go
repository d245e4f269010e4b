package trace

import (
	"fmt"
	"math"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// IPTables traces packets through an iptables ruleset (svcgen output or iptables-save).
// A payload without built-in chains (kube-proxy's --noflush input) gets kube-proxy's
// jump rules into its chains, as a node that runs kube-proxy has them.
type IPTables struct {
	rs   *iptsyntax.Ruleset
	host Host
	spec map[*iptsyntax.Rule]*iptsyntax.Spec
	// chains holds each chain's rules understood, and an index for long chains.
	chains map[*iptsyntax.Chain]*chainIndex
	// owners names the Service port behind each hashed chain.
	owners iptsyntax.Owners
	// sets are the ipsets "-m set" looks in (ipvs mode); nil without them.
	sets map[string]*setIndex
}

// chainIndex is a chain's rules with their specs. A long chain (kube-proxy's
// KUBE-SERVICES holds a rule per cluster, external and load-balancer IP) is indexed by
// the one destination address most of its rules match, so a trace looks only at the
// rules for its destination and the rules that match other destinations or none.
type chainIndex struct {
	specs []*iptsyntax.Spec
	texts []string // each rule as a Step shows it
	// byDst lists the rules whose -d is one address, by that address; other lists the
	// rest. Both are in rule order; nil byDst means the chain is not indexed.
	byDst map[netip.Addr][]int
	other []int
}

// indexFrom is how many rules a chain needs before it is indexed.
const indexFrom = 32

func newChainIndex(c *iptsyntax.Chain, specs map[*iptsyntax.Rule]*iptsyntax.Spec) *chainIndex {
	ci := &chainIndex{specs: make([]*iptsyntax.Spec, len(c.Rules)), texts: make([]string, len(c.Rules))}
	for i := range c.Rules {
		ci.specs[i] = specs[&c.Rules[i]]
		ci.texts[i] = c.Rules[i].Text()
	}
	if len(c.Rules) < indexFrom {
		return ci
	}
	ci.byDst = map[netip.Addr][]int{}
	for i, s := range ci.specs {
		if s.Dst.Set() && !s.Dst.Not && s.Dst.Prefix.IsSingleIP() {
			a := s.Dst.Prefix.Addr()
			ci.byDst[a] = append(ci.byDst[a], i)
		} else {
			ci.other = append(ci.other, i)
		}
	}
	return ci
}

// rules lists the indexes of the rules that can match a packet to dst, in order; nil
// for a chain that is not indexed (every rule can). Within one walk of a chain the
// destination does not change: DNAT ends the walk.
func (ci *chainIndex) rules(dst netip.Addr) []int {
	if ci.byDst == nil {
		return nil
	}
	a, b := ci.byDst[dst], ci.other
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && a[0] < b[0]) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// NewIPTables prepares a ruleset for tracing; every rule must be understood.
func NewIPTables(rs *iptsyntax.Ruleset, host Host) (*IPTables, error) {
	t := &IPTables{rs: addJumps(rs), host: host, spec: map[*iptsyntax.Rule]*iptsyntax.Spec{}}
	for _, tb := range t.rs.Tables {
		for _, c := range tb.Chains {
			for i := range c.Rules {
				r := &c.Rules[i]
				s, err := iptsyntax.ParseSpec(r.Args)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", r.Text(), err)
				}
				t.spec[r] = s
			}
		}
	}
	t.owners = iptsyntax.FindOwners(t.rs)
	t.chains = map[*iptsyntax.Chain]*chainIndex{}
	for _, tb := range t.rs.Tables {
		for _, c := range tb.Chains {
			t.chains[c] = newChainIndex(c, t.spec)
		}
	}
	return t, nil
}

// addJumps returns the ruleset with kube-proxy's jump rules in built-in chains that are
// missing.
func addJumps(rs *iptsyntax.Ruleset) *iptsyntax.Ruleset {
	out := &iptsyntax.Ruleset{}
	for _, t := range rs.Tables {
		nt := &iptsyntax.Table{Name: t.Name, Deleted: t.Deleted}
		have := map[string]bool{}
		for _, c := range t.Chains {
			have[c.Name] = true
		}
		// Jumps into chains the ruleset has, in built-in chains it lacks.
		added := map[string]*iptsyntax.Chain{}
		for _, j := range iptsyntax.JumpRules(t.Name) {
			target := j.Args[len(j.Args)-1]
			if have[j.Chain] || !have[target] {
				continue
			}
			c := added[j.Chain]
			if c == nil {
				c = &iptsyntax.Chain{Name: j.Chain, Policy: "ACCEPT"}
				added[j.Chain] = c
				nt.Chains = append(nt.Chains, c)
			}
			c.Rules = append(c.Rules, j)
		}
		nt.Chains = append(nt.Chains, t.Chains...)
		out.Tables = append(out.Tables, nt)
	}
	return iptsyntax.Reindex(out)
}

// state is one branch of a packet on its way.
type state struct {
	pkt      Packet
	mark     uint32
	dnat     string // "IP:port" once DNATed
	masq     bool
	marked   bool
	affinity bool
	// vs is the IPVS virtual server that scheduled the packet (ipvs mode).
	vs   *ipvssyntax.VirtualServer
	prob *big.Rat
	path []Step
}

// one is the probability 1; nothing may change it.
var one = big.NewRat(1, 1)

func (s state) fork(p *big.Rat) state {
	s.prob = new(big.Rat).Mul(s.prob, p)
	s.path = append([]Step(nil), s.path...)
	return s
}

// walkResult is how a chain walk ended for one branch.
type walkResult struct {
	st      state
	verdict string // "" = fell off the end or RETURN; else ACCEPT, DROP or REJECT
	policy  bool   // the verdict is the built-in chain's policy, not a rule's
}

// Trace follows a packet through the hooks netfilter runs for it: from another host or
// a pod, nat PREROUTING then filter INPUT (to a local address) or FORWARD, then nat
// POSTROUTING; from the node itself, nat OUTPUT, filter OUTPUT, nat POSTROUTING.
func (t *IPTables) Trace(p Packet) (*Result, error) {
	st := state{pkt: p, prob: big.NewRat(1, 1)}
	local := t.host.IsLocal(p.Src)
	first := "PREROUTING"
	if local {
		first = "OUTPUT"
	}
	natOut, err := t.hook("nat", first, st)
	if err != nil {
		return nil, err
	}
	var outs []Outcome
	for _, n := range natOut {
		o, err := t.afterNat(n, local)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
	}
	return &Result{Packet: p, Mode: "iptables", Outcomes: merge(outs)}, nil
}

// afterNat runs the filter hooks and POSTROUTING for one branch.
func (t *IPTables) afterNat(n walkResult, local bool) (Outcome, error) {
	st := n.st
	st.marked = st.mark != 0
	hooks := []string{"FORWARD"}
	switch {
	case local && t.host.IsLocal(st.pkt.Dst):
		hooks = []string{"OUTPUT", "INPUT"}
	case local:
		hooks = []string{"OUTPUT"}
	case t.host.IsLocal(st.pkt.Dst):
		hooks = []string{"INPUT"}
	}
	verdict := None
	for _, h := range hooks {
		res, err := t.hook("filter", h, st)
		if err != nil {
			return Outcome{}, err
		}
		if len(res) != 1 {
			return Outcome{}, fmt.Errorf("filter %s splits the packet; only nat chains may use -m statistic", h)
		}
		st = res[0].st
		if v := res[0].verdict; v == "DROP" || v == "REJECT" {
			return outcome(st, Verdict(v)), nil
		} else if v == "ACCEPT" && !res[0].policy {
			verdict = Accept
		}
	}
	if n.verdict == "DROP" || n.verdict == "REJECT" {
		return outcome(st, Verdict(n.verdict)), nil
	}
	if !(local && t.host.IsLocal(st.pkt.Dst)) || st.dnat != "" {
		post, err := t.hook("nat", "POSTROUTING", st)
		if err != nil {
			return Outcome{}, err
		}
		st = post[0].st
	}
	if st.dnat != "" {
		verdict = DNAT
	}
	return outcome(st, verdict), nil
}

func outcome(st state, v Verdict) Outcome {
	return Outcome{Verdict: v, Endpoint: st.dnat, Probability: st.prob, Masquerade: st.masq, Marked: st.marked, Affinity: st.affinity, Path: st.path}
}

// hook runs a built-in chain; its policy applies when no rule decides.
func (t *IPTables) hook(table, chain string, st state) ([]walkResult, error) {
	tb := t.rs.Table(table)
	if tb == nil || tb.Chain(chain) == nil {
		return []walkResult{{st: st, verdict: "ACCEPT", policy: true}}, nil
	}
	res, err := t.walk(tb, tb.Chain(chain), st, 0)
	if err != nil {
		return nil, err
	}
	for i := range res {
		if res[i].verdict == "" || res[i].verdict == "RETURN" {
			res[i].verdict, res[i].policy = tb.Chain(chain).Policy, true
			if res[i].verdict == "-" {
				res[i].verdict = "ACCEPT"
			}
		}
	}
	return res, nil
}

const maxDepth = 64

// walk runs the rules of one chain, forking at -m statistic. Most rules match no
// branch, so the list of live branches is copied only when a rule changes it.
func (t *IPTables) walk(tb *iptsyntax.Table, c *iptsyntax.Chain, st state, depth int) ([]walkResult, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("chain %s: jumps nest deeper than %d (a loop?)", c.Name, maxDepth)
	}
	ci := t.chains[c]
	var done []walkResult
	live := []state{st}
	idx := ci.rules(st.pkt.Dst)
	n := len(idx)
	if idx == nil {
		n = len(c.Rules)
	}
	for k := 0; k < n; k++ {
		i := k
		if idx != nil {
			i = idx[k]
		}
		spec := ci.specs[i]
		var next []state
		changed := false
		for j, s := range live {
			m, err := t.matches(spec, s)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", ci.texts[i], err)
			}
			if m.p.Sign() == 0 {
				if changed {
					next = append(next, s)
				}
				continue
			}
			if !changed {
				next, changed = append(next, live[:j]...), true
			}
			// A certain match takes the branch as it is; a chance splits it in two, each
			// with its own copy of the path.
			hit := s
			if m.p.Cmp(one) < 0 {
				next = append(next, s.fork(new(big.Rat).Sub(one, m.p)))
				hit = s.fork(m.p)
			}
			hit.affinity = hit.affinity || m.setsAffinity
			hit.path = append(hit.path, Step{Table: tb.Name, Chain: c.Name, Rule: ci.texts[i], Service: t.owners.Label(c.Name), P: m.p})
			results, err := t.apply(tb, spec, hit, depth)
			if err != nil {
				return nil, err
			}
			for _, res := range results {
				if res.verdict == "" {
					next = append(next, res.st)
				} else {
					done = append(done, res)
				}
			}
		}
		if changed {
			live = next
		}
		if len(live) == 0 {
			break
		}
	}
	for _, s := range live {
		done = append(done, walkResult{st: s})
	}
	return done, nil
}

// apply runs a matched rule's target. A result with an empty verdict continues with the
// next rule.
func (t *IPTables) apply(tb *iptsyntax.Table, s *iptsyntax.Spec, st state, depth int) ([]walkResult, error) {
	switch s.Target {
	case "":
		return []walkResult{{st: st}}, nil
	case "ACCEPT", "DROP", "REJECT":
		return []walkResult{{st: st, verdict: s.Target}}, nil
	case "RETURN":
		return []walkResult{{st: st, verdict: "RETURN"}}, nil
	case "MARK":
		return []walkResult{{st: setMark(st, s)}}, nil
	case "DNAT":
		return dnat(st, s)
	case "MASQUERADE", "SNAT":
		st.masq = true
		return []walkResult{{st: st, verdict: "ACCEPT"}}, nil
	case "LOG", "NFLOG", "TRACE", "CT", "CONNMARK":
		return []walkResult{{st: st}}, nil
	}
	target := tb.Chain(s.Target)
	if target == nil {
		return nil, fmt.Errorf("jump to %s, which does not exist", s.Target)
	}
	res, err := t.walk(tb, target, st, depth+1)
	if err != nil {
		return nil, err
	}
	for i := range res {
		if res[i].verdict == "RETURN" {
			res[i].verdict = ""
		}
		if s.Goto && res[i].verdict == "" {
			res[i].verdict = "RETURN"
		}
	}
	return res, nil
}

func dnat(st state, s *iptsyntax.Spec) ([]walkResult, error) {
	o, _ := s.TargetOpt("to-destination")
	st, err := st.dnatTo(o.Value(), "DNAT")
	if err != nil {
		return nil, err
	}
	return []walkResult{{st: st, verdict: "ACCEPT"}}, nil
}

// dnatTo sends the packet to "IP:port" (or "IP", keeping its port), as the target
// called verb (DNAT, nft's dnat) does; the error names the verb.
func (s state) dnatTo(to, verb string) (state, error) {
	host, port, err := net.SplitHostPort(to)
	if err != nil {
		host, port = strings.Trim(to, "[]"), strconv.Itoa(int(s.pkt.DPort))
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return s, fmt.Errorf("%s to %q", verb, to)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return s, fmt.Errorf("%s to %q", verb, to)
	}
	s.pkt.Dst, s.pkt.DPort = a, uint16(n)
	s.dnat = net.JoinHostPort(a.String(), port)
	return s, nil
}

func setMark(st state, s *iptsyntax.Spec) state {
	for _, o := range s.TargetOpts {
		v, m := parseMark(o.Value())
		switch o.Name {
		case "or-mark":
			st.mark |= v
		case "xor-mark":
			st.mark ^= v
		case "and-mark":
			st.mark &= v
		case "set-mark":
			st.mark = st.mark&^m | v
		case "set-xmark":
			st.mark = st.mark&^m ^ v
		}
	}
	return st
}

func parseMark(v string) (value, mask uint32) {
	val, m, has := strings.Cut(v, "/")
	n, _ := strconv.ParseUint(val, 0, 32)
	mask = math.MaxUint32
	if has {
		mm, _ := strconv.ParseUint(m, 0, 32)
		mask = uint32(mm)
	}
	return uint32(n), mask
}
