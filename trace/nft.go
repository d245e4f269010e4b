package trace

import (
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// NFT traces packets through one family's kube-proxy nftables table (svcgen's script
// or "nft list ruleset", read by nftsyntax.Parse). It runs the base chains of each hook a
// packet passes in priority order, as netfilter does: prerouting (from another host
// or a pod) or output (from the node), then input (to a local address after DNAT) or
// forward, then postrouting.
type NFT struct {
	st    *nftsyntax.State
	host  Host
	table string
	hooks map[knftables.BaseChainHook][]*nftsyntax.Chain
	rules map[*knftables.Rule]*nftsyntax.Rule
	// elems indexes every set and map: name, then the key's parts joined by " . ".
	elems map[string]map[string]*knftables.Element
	// labels names the Service port behind each per-service chain.
	labels map[string]string
	// prefixes holds the elements of each set that are prefixes, parsed once.
	prefixes map[string][]netip.Prefix
}

// NewNFT prepares a table for tracing; every rule must be one the tracer can read
// (nftsyntax.ParseRule).
func NewNFT(st *nftsyntax.State, host Host) (*NFT, error) {
	t := &NFT{st: st, host: host, table: string(st.Family) + " " + nftsyntax.TableName,
		hooks: map[knftables.BaseChainHook][]*nftsyntax.Chain{}, rules: map[*knftables.Rule]*nftsyntax.Rule{},
		elems: map[string]map[string]*knftables.Element{}, prefixes: map[string][]netip.Prefix{}}
	for _, c := range st.Chains {
		for _, r := range c.Rules {
			pr, err := nftsyntax.ParseRule(r.Rule, st.Family)
			if err != nil {
				return nil, fmt.Errorf("chain %s: %v", c.Obj.Name, err)
			}
			t.rules[r] = pr
		}
		if c.Obj.Hook != nil {
			t.hooks[*c.Obj.Hook] = append(t.hooks[*c.Obj.Hook], c)
		}
	}
	t.labels = nftLabels(st, t.rules)
	for hook, chains := range t.hooks {
		sort.SliceStable(chains, func(i, j int) bool {
			pi, _ := knftables.ParsePriority(st.Family, string(*chains[i].Obj.Priority))
			pj, _ := knftables.ParsePriority(st.Family, string(*chains[j].Obj.Priority))
			if pi != pj {
				return pi < pj
			}
			return chains[i].Obj.Name < chains[j].Obj.Name
		})
		t.hooks[hook] = chains
	}
	for _, cs := range []map[string]*nftsyntax.Container{st.Sets, st.Maps} {
		for name, c := range cs {
			idx := map[string]*knftables.Element{}
			for _, e := range c.Elements {
				k := nftsyntax.JoinKey(e.Key)
				idx[k] = e
				if p, err := netip.ParsePrefix(k); err == nil {
					t.prefixes[name] = append(t.prefixes[name], p)
				}
			}
			t.elems[name] = idx
		}
	}
	return t, nil
}

// Trace follows the first packet of a new connection.
func (t *NFT) Trace(p Packet) (*Result, error) {
	st := state{pkt: p, prob: big.NewRat(1, 1)}
	local := t.host.IsLocal(p.Src)
	first := knftables.PreroutingHook
	if local {
		first = knftables.OutputHook
	}
	branches, err := t.hook(first, []walkResult{{st: st}})
	if err != nil {
		return nil, err
	}
	var outs []Outcome
	for _, b := range branches {
		if b.verdict == "drop" || b.verdict == "reject" {
			outs = append(outs, outcome(b.st, nftVerdictOf(b.verdict)))
			continue
		}
		o, err := t.afterFirstHook(b.st, local)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o...)
	}
	return &Result{Packet: p, Mode: "nftables", Outcomes: merge(outs)}, nil
}

func nftVerdictOf(v string) Verdict {
	switch v {
	case "drop":
		return Drop
	case "reject":
		return Reject
	}
	return None
}

// afterFirstHook runs input or forward, then postrouting, for one branch.
func (t *NFT) afterFirstHook(st state, local bool) ([]Outcome, error) {
	st.marked = st.mark != 0
	toLocal := t.host.IsLocal(st.pkt.Dst)
	var hooks []knftables.BaseChainHook
	switch {
	case local && toLocal:
		hooks = []knftables.BaseChainHook{knftables.PostroutingHook, knftables.InputHook}
	case local:
		hooks = []knftables.BaseChainHook{knftables.PostroutingHook}
	case toLocal:
		hooks = []knftables.BaseChainHook{knftables.InputHook}
	default:
		hooks = []knftables.BaseChainHook{knftables.ForwardHook, knftables.PostroutingHook}
	}
	branches := []walkResult{{st: st}}
	var outs []Outcome
	for _, h := range hooks {
		next, err := t.hook(h, branches)
		if err != nil {
			return nil, err
		}
		branches = branches[:0]
		for _, b := range next {
			if b.verdict == "drop" || b.verdict == "reject" {
				outs = append(outs, outcome(b.st, nftVerdictOf(b.verdict)))
			} else {
				branches = append(branches, walkResult{st: b.st})
			}
		}
	}
	for _, b := range branches {
		v := None
		if b.st.dnat != "" {
			v = DNAT
		}
		outs = append(outs, outcome(b.st, v))
	}
	return outs, nil
}

// hook runs every base chain of a hook, in priority order, on each branch. A branch
// ends the hook early only when dropped or rejected; accept ends one base chain.
func (t *NFT) hook(h knftables.BaseChainHook, branches []walkResult) ([]walkResult, error) {
	for _, c := range t.hooks[h] {
		var next []walkResult
		for _, b := range branches {
			if b.verdict == "drop" || b.verdict == "reject" {
				next = append(next, b)
				continue
			}
			res, err := t.walk(c, b.st, 0)
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				if r.verdict != "drop" && r.verdict != "reject" {
					r.verdict = ""
				}
				next = append(next, r)
			}
		}
		branches = next
	}
	return branches, nil
}

// walk runs a chain's rules. A result's verdict is "" when the chain fell off its end
// or returned, else accept, drop or reject.
func (t *NFT) walk(c *nftsyntax.Chain, st state, depth int) ([]walkResult, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("chain %s: jumps nest deeper than %d (a loop?)", c.Obj.Name, maxDepth)
	}
	var done []walkResult
	live := []state{st}
	for _, r := range c.Rules {
		pr := t.rules[r]
		var next []state
		for _, s := range live {
			if !t.matches(pr, s) {
				next = append(next, s)
				continue
			}
			hit := s.fork(big.NewRat(1, 1))
			hit.path = append(hit.path, Step{Table: t.table, Chain: c.Obj.Name, Rule: nftsyntax.RuleLine(r), Service: t.labels[c.Obj.Name], P: one})
			res, err := t.apply(pr, hit, depth)
			if err != nil {
				return nil, fmt.Errorf("chain %s: %v", c.Obj.Name, err)
			}
			for _, x := range res {
				switch x.verdict {
				case "":
					next = append(next, x.st)
				case "return":
					done = append(done, walkResult{st: x.st})
				default:
					done = append(done, x)
				}
			}
		}
		live = next
	}
	for _, s := range live {
		done = append(done, walkResult{st: s})
	}
	return done, nil
}

// apply runs a matched rule's statements and verdict. "" continues with the next rule;
// "return" leaves the chain.
func (t *NFT) apply(r *nftsyntax.Rule, st state, depth int) ([]walkResult, error) {
	for _, s := range r.Stmts {
		switch s.Kind {
		case nftsyntax.StmtMark:
			st.mark = markOp(st.mark, s.Op, s.Value)
		case nftsyntax.StmtUpdate:
			st.affinity = true
		case nftsyntax.StmtMasquerade:
			st.masq = true
		case nftsyntax.StmtDNAT:
			return t.dnat(r, s, st, depth)
		}
	}
	return t.verdict(r.Verdict, st, depth)
}

// markOp applies "mark set mark OP value".
func markOp(mark uint32, op string, v uint32) uint32 {
	switch op {
	case "or":
		return mark | v
	case "xor":
		return mark ^ v
	case "and":
		return mark & v
	}
	return mark
}

// dnat translates the destination: to the one target, or to each target of a numgen
// map with its share of the probability. DNAT ends the rule (accept).
func (t *NFT) dnat(r *nftsyntax.Rule, s nftsyntax.Stmt, st state, depth int) ([]walkResult, error) {
	var out []walkResult
	for _, to := range s.To {
		b := st
		if len(s.To) > 1 {
			b = st.fork(big.NewRat(1, int64(len(s.To))))
		}
		b, err := b.dnatTo(dnatTarget(to), "dnat")
		if err != nil {
			return nil, err
		}
		res, err := t.verdict(r.Verdict, b, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// dnatTarget is "IP:port", or the address alone when the port stays.
func dnatTarget(to netip.AddrPort) string {
	if to.Port() == 0 {
		return to.Addr().String()
	}
	return to.String()
}

// verdict runs how a rule (or a map element) ends.
func (t *NFT) verdict(v nftsyntax.Verdict, st state, depth int) ([]walkResult, error) {
	switch v.Kind {
	case nftsyntax.Continue:
		return []walkResult{{st: st}}, nil
	case nftsyntax.Accept, nftsyntax.Drop, nftsyntax.Reject, nftsyntax.Return:
		return []walkResult{{st: st, verdict: string(v.Kind)}}, nil
	case nftsyntax.Jump, nftsyntax.Goto:
		return t.call(string(v.Kind), v.Chain, st, depth)
	case nftsyntax.Vmap:
		e := t.elems[v.Map][t.key(v.Key, st)]
		if e == nil {
			return []walkResult{{st: st}}, nil
		}
		ev, err := nftsyntax.ParseVerdict(nftsyntax.JoinKey(e.Value))
		if err != nil {
			return nil, fmt.Errorf("map %s: %v", v.Map, err)
		}
		return t.verdict(ev, st, depth)
	case nftsyntax.Numgen:
		var out []walkResult
		n := int64(len(v.Entries))
		for _, entry := range v.Entries {
			res, err := t.verdict(entry, st.fork(big.NewRat(1, n)), depth)
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("verdict %q", v.Kind)
}

// call runs another chain: after a jump the calling chain goes on when the callee
// falls off its end or returns; after a goto it returns too.
func (t *NFT) call(kind, name string, st state, depth int) ([]walkResult, error) {
	c := t.st.Chains[name]
	if c == nil {
		return nil, fmt.Errorf("%s to %s, which does not exist", kind, name)
	}
	res, err := t.walk(c, st, depth+1)
	if err != nil {
		return nil, err
	}
	if kind == "goto" {
		for i := range res {
			if res[i].verdict == "" {
				res[i].verdict = "return"
			}
		}
	}
	return res, nil
}

// key builds a lookup key for a concatenation of packet fields.
func (t *NFT) key(fields []nftsyntax.Field, st state) string {
	out := make([]string, len(fields))
	for i, f := range fields {
		switch f {
		case nftsyntax.SrcAddr:
			out[i] = st.pkt.Src.String()
		case nftsyntax.DstAddr:
			out[i] = st.pkt.Dst.String()
		case nftsyntax.L4Proto:
			out[i] = st.pkt.Proto
		case nftsyntax.DstPort:
			out[i] = strconv.Itoa(int(st.pkt.DPort))
		case nftsyntax.InIface:
			out[i] = st.pkt.InIface
		}
	}
	return nftsyntax.JoinKey(out)
}

// matches evaluates a rule's conditions for the first packet of a new connection: a
// dynamic set (affinity) has not seen the client yet.
func (t *NFT) matches(r *nftsyntax.Rule, st state) bool {
	for _, m := range r.Matches {
		if t.holds(m, st) == m.Not {
			return false
		}
	}
	return true
}

// holds evaluates one condition, before its negation.
func (t *NFT) holds(m nftsyntax.Match, st state) bool {
	switch m.Kind {
	case nftsyntax.MatchCtNew:
		return true
	case nftsyntax.MatchCtDNAT:
		return st.dnat != "" // the connection was translated (before postrouting)
	case nftsyntax.MatchAddr:
		a := t.field(m.Field, st)
		for _, p := range m.Prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	case nftsyntax.MatchSet:
		if len(m.Key) == 1 && (m.Key[0] == nftsyntax.SrcAddr || m.Key[0] == nftsyntax.DstAddr) {
			return t.inSet(m.Set, t.field(m.Key[0], st))
		}
		return t.elems[m.Set][t.key(m.Key, st)] != nil
	case nftsyntax.MatchLocal:
		return t.host.IsLocal(t.field(m.Field, st))
	case nftsyntax.MatchValue:
		switch m.Field {
		case nftsyntax.L4Proto:
			return st.pkt.Proto == m.Value
		case nftsyntax.DstPort:
			return strconv.Itoa(int(st.pkt.DPort)) == m.Value
		case nftsyntax.InIface:
			return nftIfaceMatch(m.Value, st.pkt.InIface)
		}
	case nftsyntax.MatchMark:
		return st.mark&m.Mask == m.Want
	}
	return false
}

func (t *NFT) field(f nftsyntax.Field, st state) netip.Addr {
	if f == nftsyntax.SrcAddr {
		return st.pkt.Src
	}
	return st.pkt.Dst
}

// inSet looks an address up in a named set; a set of prefixes matches by containment.
func (t *NFT) inSet(name string, a netip.Addr) bool {
	if t.elems[name][a.String()] != nil {
		return true
	}
	for _, p := range t.prefixes[name] {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// nftIfaceMatch matches an interface name; "veth*" is a prefix.
func nftIfaceMatch(pattern, name string) bool {
	if name == "" {
		return false
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}
