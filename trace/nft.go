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
	rules map[*knftables.Rule]*nftRule
	// elems indexes every set and map: name, then the key's parts joined by " . ".
	elems map[string]map[string]*knftables.Element
	// labels names the Service port behind each per-service chain.
	labels map[string]string
	// prefixes holds the elements of each set that are prefixes, parsed once.
	prefixes map[string][]netip.Prefix
}

// NewNFT prepares a table for tracing; every rule must be one the tracer can read.
func NewNFT(st *nftsyntax.State, host Host) (*NFT, error) {
	ipX := "ip"
	if st.Family == knftables.IPv6Family {
		ipX = "ip6"
	}
	t := &NFT{st: st, host: host, table: string(st.Family) + " kube-proxy",
		hooks: map[knftables.BaseChainHook][]*nftsyntax.Chain{}, rules: map[*knftables.Rule]*nftRule{},
		elems: map[string]map[string]*knftables.Element{}, prefixes: map[string][]netip.Prefix{}}
	for _, c := range st.Chains {
		for _, r := range c.Rules {
			pr, err := parseNFTRule(r.Rule, ipX)
			if err != nil {
				return nil, fmt.Errorf("chain %s: %v", c.Obj.Name, err)
			}
			t.rules[r] = pr
		}
		if c.Obj.Hook != nil {
			t.hooks[*c.Obj.Hook] = append(t.hooks[*c.Obj.Hook], c)
		}
	}
	t.labels = nftLabels(st)
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
				k := strings.Join(e.Key, " . ")
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
			hit.path = append(hit.path, Step{Table: t.table, Chain: c.Obj.Name, Rule: ruleText(r), Service: t.labels[c.Obj.Name], P: one})
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

func ruleText(r *knftables.Rule) string {
	if r.Comment != nil {
		return r.Rule + " comment " + strconv.Quote(*r.Comment)
	}
	return r.Rule
}

// apply runs a matched rule's statements and verdict. "" continues with the next rule;
// "return" leaves the chain.
func (t *NFT) apply(r *nftRule, st state, depth int) ([]walkResult, error) {
	for _, s := range r.stmts {
		switch s.kind {
		case "mark":
			switch s.op {
			case "or":
				st.mark |= s.value
			case "xor":
				st.mark ^= s.value
			case "and":
				st.mark &= s.value
			}
		case "update":
			st.affinity = true
		case "masquerade":
			st.masq = true
		case "dnat":
			var err error
			if st, err = st.dnatTo(s.to, "dnat"); err != nil {
				return nil, err
			}
		}
	}
	v := r.verdict
	switch v.kind {
	case "":
		return []walkResult{{st: st}}, nil
	case "accept", "drop", "reject", "return":
		return []walkResult{{st: st, verdict: v.kind}}, nil
	case "jump", "goto":
		return t.call(v.kind, v.chain, st, depth)
	case "vmap":
		e := t.elems[v.vmap][t.key(v.key, st)]
		if e == nil {
			return []walkResult{{st: st}}, nil
		}
		return t.verdictText(strings.Join(e.Value, " . "), st, depth)
	case "numgen":
		var out []walkResult
		n := int64(len(v.entries))
		for _, entry := range v.entries {
			res, err := t.verdictText(entry, st.fork(big.NewRat(1, n)), depth)
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("verdict %q", v.kind)
}

// verdictText runs a verdict written as text: a map element's value or a numgen entry.
func (t *NFT) verdictText(v string, st state, depth int) ([]walkResult, error) {
	f := strings.Fields(v)
	switch {
	case len(f) == 2 && (f[0] == "goto" || f[0] == "jump"):
		return t.call(f[0], f[1], st, depth)
	case len(f) == 1 && (f[0] == "accept" || f[0] == "drop" || f[0] == "reject" || f[0] == "return"):
		return []walkResult{{st: st, verdict: f[0]}}, nil
	}
	return nil, fmt.Errorf("verdict %q", v)
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
func (t *NFT) key(parts []string, st state) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		switch p {
		case "saddr":
			out[i] = st.pkt.Src.String()
		case "daddr":
			out[i] = st.pkt.Dst.String()
		case "proto":
			out[i] = st.pkt.Proto
		case "dport":
			out[i] = strconv.Itoa(int(st.pkt.DPort))
		}
	}
	return strings.Join(out, " . ")
}

// matches evaluates a rule's conditions for the first packet of a new connection: a
// dynamic set (affinity) has not seen the client yet.
func (t *NFT) matches(r *nftRule, st state) bool {
	for _, m := range r.matches {
		ok := true
		switch m.kind {
		case "ctnew":
		case "addr":
			a := t.field(m.field, st)
			ok = false
			for _, p := range m.addrs {
				ok = ok || p.Contains(a)
			}
		case "set":
			ok = t.inSet(m.set, t.field(m.field, st))
		case "local":
			ok = t.host.IsLocal(t.field(m.field, st))
		case "proto":
			ok = st.pkt.Proto == m.value
		case "dport":
			ok = strconv.Itoa(int(st.pkt.DPort)) == m.value
		case "iface":
			ok = nftIfaceMatch(m.value, st.pkt.InIface)
		case "mark":
			ok = st.mark&m.mask == m.want
		}
		if ok == m.not {
			return false
		}
	}
	return true
}

func (t *NFT) field(f string, st state) netip.Addr {
	if f == "saddr" {
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
