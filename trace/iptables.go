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
//
// A chain's rules are read (iptsyntax.ParseSpec) when a trace first reaches it, and
// kept: long chains for good, short ones (a Service's own chains) until a few
// thousand rules of them are kept, when they are dropped and read again if reached
// again. At 10,000 Services the read rules took more memory than the ruleset itself
// (about 100 MB), and each Service's chains are reached by the few probes of one
// Service, one after the other when verify sends them. So an IPTables is for one
// goroutine at a time (and so is a copy of it from WithoutPaths, which shares what
// it has read).
type IPTables struct {
	rs   *iptsyntax.Ruleset
	host Host
	// chains holds the chains read so far: their rules understood, and an index for
	// long chains; kept counts the rules of the short ones among them.
	chains map[*iptsyntax.Chain]*chainIndex
	kept   int
	// owners names the Service port behind each hashed chain; found when a path
	// first needs it.
	owners iptsyntax.Owners
	// sets are the ipsets "-m set" looks in (ipvs mode); nil without them.
	sets map[string]*setIndex
	// probs holds each "-m statistic" probability read as a fraction, by its text.
	probs map[string]*big.Rat
	// noPaths: results carry no Path (WithoutPaths).
	noPaths bool
}

// chainIndex is a chain's rules with their specs. A long chain is indexed by the
// destination address or port, whichever its rules tell apart more values of: kube-proxy's KUBE-SERVICES holds a rule per
// cluster, external and load-balancer IP (indexed by destination address), its
// KUBE-NODEPORTS a rule per node port (by destination port). A trace looks only at
// the rules for its packet's value and the rules that match other values or none.
type chainIndex struct {
	// read are the chain's rules with their words (see lighten); specs the same
	// rules understood.
	read  []iptsyntax.Rule
	specs []*iptsyntax.Spec
	// byPort: the chain is indexed by destination port, not address.
	byPort bool
	// byKey lists the rules that match one address (or port), by that value; other
	// lists the rest. Both are in rule order; nil byKey means the chain is not indexed.
	byKey map[netip.Addr][]int
	other []int
}

// indexFrom is how many rules a chain needs before it is indexed.
var indexFrom = 32 // a variable for tests

// keepShort is how many rules of short chains a tracer keeps read.
var keepShort = 4096 // a variable for tests

func newChainIndex(c *iptsyntax.Chain) (*chainIndex, error) {
	ci := &chainIndex{read: make([]iptsyntax.Rule, len(c.Rules)), specs: make([]*iptsyntax.Spec, len(c.Rules))}
	for i, r := range c.Rules {
		if r.Args == nil && r.Raw != "" {
			full, err := iptsyntax.ParseRuleLine(r.Raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", r.Raw, err)
			}
			r.Args = full.Args
		}
		s, err := iptsyntax.ParseSpec(r.Args)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", r.Text(), err)
		}
		ci.read[i], ci.specs[i] = r, s
	}
	if len(c.Rules) < indexFrom {
		return ci, nil
	}
	// The value with more distinct values among the rules picks fewer of them.
	addrs, ports := map[netip.Addr]bool{}, map[uint16]bool{}
	for _, s := range ci.specs {
		if a, ok := singleDst(s); ok {
			addrs[a] = true
		}
		if p, ok := singleDport(s); ok {
			ports[p] = true
		}
	}
	ci.byPort = len(ports) > len(addrs)
	ci.byKey = make(map[netip.Addr][]int, len(c.Rules))
	for i, s := range ci.specs {
		if k, ok := ci.key(s); ok {
			ci.byKey[k] = append(ci.byKey[k], i)
		} else {
			ci.other = append(ci.other, i)
		}
	}
	return ci, nil
}

// chain returns a chain's rules read, reading them if need be (see IPTables).
func (t *IPTables) chain(c *iptsyntax.Chain) (*chainIndex, error) {
	if ci := t.chains[c]; ci != nil {
		return ci, nil
	}
	ci, err := newChainIndex(c)
	if err != nil {
		return nil, err
	}
	if ci.byKey == nil {
		if t.kept+len(ci.specs) > keepShort {
			for k, v := range t.chains {
				if v.byKey == nil {
					delete(t.chains, k)
				}
			}
			t.kept = 0
		}
		t.kept += len(ci.specs)
	}
	t.chains[c] = ci
	return ci, nil
}

// key is the value a rule is indexed by, if it matches one.
func (ci *chainIndex) key(s *iptsyntax.Spec) (netip.Addr, bool) {
	if !ci.byPort {
		return singleDst(s)
	}
	p, ok := singleDport(s)
	return portKey(p), ok
}

// portKey stands for a port in the index's map.
func portKey(p uint16) netip.Addr { return netip.AddrFrom4([4]byte{0, 0, byte(p >> 8), byte(p)}) }

// singleDst is the one address a rule's -d holds.
func singleDst(s *iptsyntax.Spec) (netip.Addr, bool) {
	if s.Dst.Set() && !s.Dst.Not && s.Dst.Prefix.IsSingleIP() {
		return s.Dst.Prefix.Addr(), true
	}
	return netip.Addr{}, false
}

// singleDport is the one destination port a rule's -m tcp, udp or sctp requires
// (--dport N, not negated, not a range): no other port can match it.
func singleDport(s *iptsyntax.Spec) (uint16, bool) {
	for _, m := range s.Modules {
		if m.Name != "tcp" && m.Name != "udp" && m.Name != "sctp" {
			continue
		}
		for _, o := range m.Opts {
			if (o.Name == "dport" || o.Name == "destination-port") && !o.Not {
				if lo, hi, err := portRange(o.Value()); err == nil && lo == hi {
					return lo, true
				}
			}
		}
	}
	return 0, false
}

// rules lists the indexes of the rules that can match a packet, in order; nil for a
// chain that is not indexed (every rule can). Within one walk of a chain the
// destination does not change: DNAT ends the walk.
func (ci *chainIndex) rules(p Packet) []int {
	if ci.byKey == nil {
		return nil
	}
	k := p.Dst
	if ci.byPort {
		k = portKey(p.DPort)
	}
	a, b := ci.byKey[k], ci.other
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
	full := addJumps(rs)
	t := &IPTables{rs: lighten(full), host: host, chains: map[*iptsyntax.Chain]*chainIndex{}, probs: map[string]*big.Rat{}}
	for _, tb := range full.Tables {
		for _, c := range tb.Chains {
			for i := range c.Rules {
				r := &c.Rules[i]
				s, err := iptsyntax.ParseSpec(r.Words())
				if err != nil {
					text := r.Raw
					if r.Args != nil || text == "" {
						text = r.Text()
					}
					return nil, fmt.Errorf("%s: %v", text, err)
				}
				t.readProbabilities(s)
			}
		}
	}
	return t, nil
}

// label names the Service port behind a hashed chain (iptsyntax.Owners.Label).
func (t *IPTables) label(chain string) string {
	if t.owners == nil {
		t.owners = iptsyntax.FindOwners(t.expanded())
	}
	return t.owners.Label(chain)
}

// lighten returns the ruleset with new chains whose rules read from text keep their
// line (Raw) and not its words: at 10,000 Services the words of 290,000 rules were
// 70 MB of the tracer's 145, and a trace reads the words of the chains it reaches
// again (chain), a few at a time.
func lighten(rs *iptsyntax.Ruleset) *iptsyntax.Ruleset {
	out := &iptsyntax.Ruleset{}
	for _, t := range rs.Tables {
		nt := &iptsyntax.Table{Name: t.Name, Deleted: t.Deleted}
		for _, c := range t.Chains {
			nc := *c
			if light(c) {
				nt.Chains = append(nt.Chains, &nc) // read light already (ParseLight): shared
				continue
			}
			nc.Rules = make([]iptsyntax.Rule, len(c.Rules))
			for i, r := range c.Rules {
				if r.Raw != "" {
					r.Args = nil
				}
				nc.Rules[i] = r
			}
			nt.Chains = append(nt.Chains, &nc)
		}
		out.Tables = append(out.Tables, nt)
	}
	return iptsyntax.Reindex(out)
}

// light reports a chain whose rules read from text keep no words.
func light(c *iptsyntax.Chain) bool {
	for _, r := range c.Rules {
		if r.Raw != "" && r.Args != nil {
			return false
		}
	}
	return true
}

// expanded is the tracer's ruleset with every rule's words read again.
func (t *IPTables) expanded() *iptsyntax.Ruleset {
	out := &iptsyntax.Ruleset{}
	for _, tb := range t.rs.Tables {
		nt := &iptsyntax.Table{Name: tb.Name, Deleted: tb.Deleted}
		for _, c := range tb.Chains {
			nc := *c
			nc.Rules = make([]iptsyntax.Rule, len(c.Rules))
			for i, r := range c.Rules {
				if r.Args == nil && r.Raw != "" {
					if full, err := iptsyntax.ParseRuleLine(r.Raw); err == nil {
						r.Args = full.Args
					}
				}
				nc.Rules[i] = r
			}
			nt.Chains = append(nt.Chains, &nc)
		}
		out.Tables = append(out.Tables, nt)
	}
	return iptsyntax.Reindex(out)
}

// readProbabilities keeps the fraction of each "-m statistic" probability of a rule,
// read once for every trace that reaches it.
func (t *IPTables) readProbabilities(s *iptsyntax.Spec) {
	for _, m := range s.Modules {
		if m.Name != "statistic" {
			continue
		}
		o, _ := m.Opt("probability")
		if _, done := t.probs[o.Value()]; done {
			continue
		}
		if mt, err := statistic(m); err == nil {
			t.probs[o.Value()] = mt.p
		}
	}
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
	s.path = append([]Step(nil), s.path...) // nil without paths: no copy
	return s
}

// belowOne is p < 1, without the products big.Rat.Cmp allocates: a fraction's
// denominator is positive.
func belowOne(p *big.Rat) bool {
	return p.Num().Cmp(p.Denom()) < 0
}

// walkResult is how a chain walk ended for one branch.
type walkResult struct {
	st      state
	verdict string // "" = fell off the end or RETURN; else ACCEPT, DROP or REJECT
	policy  bool   // the verdict is the built-in chain's policy, not a rule's
}

// Trace follows a packet through the hooks netfilter runs for it: from another host or
// a pod, nat PREROUTING then filter INPUT (to a local address, where it stays) or
// FORWARD then nat POSTROUTING; from the node itself, nat OUTPUT, filter OUTPUT, nat
// POSTROUTING.
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
	// POSTROUTING is on the way out only: a packet the node delivers to itself
	// from elsewhere (a node port whose endpoint is a hostNetwork pod of this node)
	// never passes it, so its mark for masquerade is not acted on.
	if !local && t.host.IsLocal(st.pkt.Dst) {
		return outcome(st, dnatOr(st, verdict)), nil
	}
	if !(local && t.host.IsLocal(st.pkt.Dst)) || st.dnat != "" {
		post, err := t.hook("nat", "POSTROUTING", st)
		if err != nil {
			return Outcome{}, err
		}
		st = post[0].st
	}
	return outcome(st, dnatOr(st, verdict)), nil
}

// dnatOr is a branch's verdict: DNAT when it was translated, else v.
func dnatOr(st state, v Verdict) Verdict {
	if st.dnat != "" {
		return DNAT
	}
	return v
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
	ci, err := t.chain(c)
	if err != nil {
		return nil, err
	}
	var done []walkResult
	live := []state{st}
	idx := ci.rules(st.pkt)
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
				return nil, fmt.Errorf("%s: %v", ci.read[i].Text(), err)
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
			if belowOne(m.p) {
				next = append(next, s.fork(new(big.Rat).Sub(one, m.p)))
				hit = s.fork(m.p)
			}
			hit.affinity = hit.affinity || m.setsAffinity
			if !t.noPaths {
				hit.path = append(hit.path, Step{Table: tb.Name, Chain: c.Name, Rule: ci.read[i].Text(), Service: t.label(c.Name), P: m.p})
			}
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
