package trace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// nftRule is one rule of an nftables chain, read into what the tracer evaluates: the
// matches (all must hold), then the statements, then the verdict. It knows the
// expressions kube-proxy's nftables proxier writes (and nft lists back); any other
// rule is an error, so a trace never silently passes over a rule it cannot read.
type nftRule struct {
	text    string
	matches []nftMatch
	stmts   []nftStmt
	verdict nftVerdict
}

// nftMatch is one condition of a rule.
type nftMatch struct {
	kind  string // "addr", "set", "local", "proto", "iface", "mark", "ctnew", "dport"
	field string // "saddr" or "daddr"
	not   bool
	addrs []netip.Prefix // addr: a literal or an anonymous set
	set   string         // set: the named set
	value string         // proto, iface (with a trailing * for a prefix), dport
	mask  uint32         // mark: mark & mask == want
	want  uint32
}

// nftStmt is a statement that changes the packet or the table.
type nftStmt struct {
	kind  string // "mark" (op, value), "update" (set), "dnat" (to), "masquerade"
	op    string
	value uint32
	set   string
	to    string
}

// nftVerdict is how a rule ends.
type nftVerdict struct {
	kind    string   // "", accept, drop, reject, return, jump, goto, vmap, numgen
	chain   string   // jump, goto
	vmap    string   // vmap: the named map
	key     []string // vmap: the key's parts: "saddr", "daddr", "proto", "dport"
	entries []string // numgen: "goto CHAIN" per index
}

// tokens splits a rule into words, with braces and commas as words of their own and
// double quotes removed.
func tokens(rule string) []string {
	r := strings.NewReplacer("{", " { ", "}", " } ", ",", " , ", `"`, "")
	return strings.Fields(r.Replace(rule))
}

// parseNFTRule reads a rule's text; ipX is "ip" or "ip6".
func parseNFTRule(text, ipX string) (*nftRule, error) {
	r := &nftRule{text: text}
	p := &ruleParser{toks: tokens(text)}
	for !p.done() {
		if err := p.term(r, ipX); err != nil {
			return nil, fmt.Errorf("rule %q: %v", text, err)
		}
	}
	return r, nil
}

type ruleParser struct {
	toks []string
	i    int
}

func (p *ruleParser) done() bool { return p.i >= len(p.toks) }

func (p *ruleParser) peek(n int) string {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return ""
}

func (p *ruleParser) next() string {
	t := p.peek(0)
	p.i++
	return t
}

// expect consumes words that must follow.
func (p *ruleParser) expect(words ...string) error {
	for _, w := range words {
		if got := p.next(); got != w {
			return fmt.Errorf("want %q, got %q", w, got)
		}
	}
	return nil
}

// group reads "{ a , b }" into its entries (the opening brace already read).
func (p *ruleParser) group() ([]string, error) {
	var entries []string
	var cur []string
	for !p.done() {
		t := p.next()
		switch t {
		case "}":
			if len(cur) > 0 {
				entries = append(entries, strings.Join(cur, " "))
			}
			return entries, nil
		case ",":
			entries = append(entries, strings.Join(cur, " "))
			cur = nil
		default:
			cur = append(cur, t)
		}
	}
	return nil, fmt.Errorf("unterminated {")
}

func (p *ruleParser) term(r *nftRule, ipX string) error {
	if r.verdict.kind != "" {
		return fmt.Errorf("%q after the verdict", p.peek(0))
	}
	switch t := p.next(); t {
	case "ct":
		r.matches = append(r.matches, nftMatch{kind: "ctnew"})
		return p.expect("state", "new")
	case "counter":
		return nil
	case ipX:
		return p.addrTerm(r)
	case "meta":
		if err := p.expect("l4proto"); err != nil {
			return err
		}
		if p.peek(0) == "." {
			r.verdict.key = []string{"proto", "dport"}
			return p.vmapTail(r, "th", "dport")
		}
		r.matches = append(r.matches, nftMatch{kind: "proto", value: p.next()})
		return nil
	case "th", "tcp", "udp", "sctp":
		if err := p.expect("dport"); err != nil {
			return err
		}
		if t != "th" {
			r.matches = append(r.matches, nftMatch{kind: "proto", value: t})
		}
		r.matches = append(r.matches, nftMatch{kind: "dport", value: p.next()})
		return nil
	case "fib":
		field := p.next()
		if err := p.expect("type", "local"); err != nil {
			return err
		}
		r.matches = append(r.matches, nftMatch{kind: "local", field: field})
		return nil
	case "iifname":
		m := nftMatch{kind: "iface"}
		if p.peek(0) == "!=" {
			p.next()
			m.not = true
		}
		m.value = p.next()
		r.matches = append(r.matches, m)
		return nil
	case "mark":
		return p.markTerm(r)
	case "update":
		set := strings.TrimPrefix(p.next(), "@")
		if p.next() != "{" {
			return fmt.Errorf("update @%s without { key }", set)
		}
		if _, err := p.group(); err != nil {
			return err
		}
		r.stmts = append(r.stmts, nftStmt{kind: "update", set: set})
		return nil
	case "dnat":
		if p.peek(0) == ipX {
			p.next()
		}
		if err := p.expect("to"); err != nil {
			return err
		}
		r.stmts = append(r.stmts, nftStmt{kind: "dnat", to: p.next()})
		r.verdict.kind = "accept"
		return nil
	case "masquerade":
		for p.peek(0) == "fully-random" || p.peek(0) == "random" || p.peek(0) == "persistent" {
			p.next()
		}
		r.stmts = append(r.stmts, nftStmt{kind: "masquerade"})
		r.verdict.kind = "accept"
		return nil
	case "numgen":
		if err := p.expect("random", "mod"); err != nil {
			return err
		}
		n, err := strconv.Atoi(p.next())
		if err != nil || n <= 0 {
			return fmt.Errorf("numgen modulus")
		}
		if err := p.expect("vmap", "{"); err != nil {
			return err
		}
		entries, err := p.group()
		if err != nil {
			return err
		}
		r.verdict = nftVerdict{kind: "numgen", entries: make([]string, n)}
		for _, e := range entries {
			idx, verdict, ok := strings.Cut(e, " : ")
			k, err := strconv.Atoi(idx)
			if !ok || err != nil || k < 0 || k >= n {
				return fmt.Errorf("numgen entry %q", e)
			}
			r.verdict.entries[k] = verdict
		}
		return nil
	case "jump", "goto":
		r.verdict = nftVerdict{kind: t, chain: p.next()}
		return nil
	case "return", "accept", "drop", "reject":
		r.verdict.kind = t
		for t == "reject" && !p.done() { // "reject with icmp ..."
			p.next()
		}
		return nil
	default:
		return fmt.Errorf("%q is not an expression the tracer knows", t)
	}
}

// addrTerm reads what follows "ip": "saddr 10.0.0.0/8", "daddr != { a , b }",
// "daddr @set", or "daddr . meta l4proto . th dport vmap @map".
func (p *ruleParser) addrTerm(r *nftRule) error {
	field := p.next()
	if field != "saddr" && field != "daddr" {
		return fmt.Errorf("address field %q", field)
	}
	if p.peek(0) == "." {
		r.verdict.key = []string{field, "proto", "dport"}
		return p.vmapTail(r, "meta", "l4proto", ".", "th", "dport")
	}
	m := nftMatch{kind: "addr", field: field}
	if p.peek(0) == "!=" {
		p.next()
		m.not = true
	}
	v := p.next()
	var values []string
	switch {
	case strings.HasPrefix(v, "@"):
		m.kind, m.set = "set", v[1:]
		r.matches = append(r.matches, m)
		return nil
	case v == "{":
		entries, err := p.group()
		if err != nil {
			return err
		}
		values = entries
	default:
		values = []string{v}
	}
	for _, s := range values {
		pfx, err := parsePrefixOrAddr(s)
		if err != nil {
			return err
		}
		m.addrs = append(m.addrs, pfx)
	}
	r.matches = append(r.matches, m)
	return nil
}

// vmapTail reads the rest of a concatenated key and "vmap @map".
func (p *ruleParser) vmapTail(r *nftRule, rest ...string) error {
	if err := p.expect("."); err != nil {
		return err
	}
	if err := p.expect(rest...); err != nil {
		return err
	}
	if err := p.expect("vmap"); err != nil {
		return err
	}
	m := p.next()
	if !strings.HasPrefix(m, "@") {
		return fmt.Errorf("vmap %q: only named maps", m)
	}
	r.verdict.kind, r.verdict.vmap = "vmap", m[1:]
	return nil
}

// markTerm reads "mark set mark or|xor|and V" or "mark and M == V".
func (p *ruleParser) markTerm(r *nftRule) error {
	switch p.next() {
	case "set":
		if err := p.expect("mark"); err != nil {
			return err
		}
		op := p.next()
		v, err := strconv.ParseUint(p.next(), 0, 32)
		if err != nil || (op != "or" && op != "xor" && op != "and") {
			return fmt.Errorf("mark set")
		}
		r.stmts = append(r.stmts, nftStmt{kind: "mark", op: op, value: uint32(v)})
		return nil
	case "and":
		mask, err1 := strconv.ParseUint(p.next(), 0, 32)
		eq := p.next()
		want, err2 := strconv.ParseUint(p.next(), 0, 32)
		if err1 != nil || err2 != nil || eq != "==" {
			return fmt.Errorf("mark test")
		}
		r.matches = append(r.matches, nftMatch{kind: "mark", mask: uint32(mask), want: uint32(want)})
		return nil
	}
	return fmt.Errorf("mark expression")
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
