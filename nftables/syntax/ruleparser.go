package syntax

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The grammar of ParseRule: a rule is a sequence of terms (a match, a statement, a
// verdict), each read by the method its first word names.

// ruleParser reads one rule's tokens into p.r.
type ruleParser struct {
	toks []string
	i    int
	ipX  string // "ip" or "ip6"
	r    *Rule
}

func (p *ruleParser) done() bool { return p.i >= len(p.toks) }

func (p *ruleParser) peek(n int) string { return at(p.toks, p.i+n) }

func (p *ruleParser) next() string {
	t := p.peek(0)
	p.i++
	return t
}

// accept consumes t if it comes next.
func (p *ruleParser) accept(t string) bool {
	if p.peek(0) != t {
		return false
	}
	p.i++
	return true
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

func (p *ruleParser) match(m Match) error {
	p.r.Matches = append(p.r.Matches, m)
	return nil
}

func (p *ruleParser) stmt(s Stmt) error {
	p.r.Stmts = append(p.r.Stmts, s)
	return nil
}

// term reads one expression, statement or verdict.
func (p *ruleParser) term() error {
	if p.r.Verdict.Kind != Continue {
		return fmt.Errorf("%q after the verdict", p.peek(0))
	}
	switch t := p.peek(0); {
	case t == "ct":
		return p.ct()
	case t == "mark" || t == "meta" && p.peek(1) == "mark":
		p.accept("meta")
		p.next()
		return p.mark()
	case t == "fib":
		p.next()
		field := Field(p.next())
		if (field != SrcAddr && field != DstAddr) || p.expect("type", "local") != nil {
			return fmt.Errorf("fib: only \"fib saddr|daddr type local\"")
		}
		return p.match(Match{Kind: MatchLocal, Field: field})
	case t == p.ipX || t == "meta" || t == "th" || t == "tcp" || t == "udp" || t == "sctp" || t == "iifname":
		return p.selector()
	}
	return p.statement(p.next())
}

// statements read what follows the word that starts a statement or a verdict.
var statements = map[string]func(p *ruleParser, word string) error{
	"counter":    (*ruleParser).counter,
	"update":     (*ruleParser).update,
	"dnat":       (*ruleParser).dnat,
	"masquerade": (*ruleParser).masquerade,
	"numgen":     (*ruleParser).numgenVmap,
	"jump":       (*ruleParser).chainVerdict,
	"goto":       (*ruleParser).chainVerdict,
	"return":     (*ruleParser).verdict,
	"accept":     (*ruleParser).verdict,
	"drop":       (*ruleParser).verdict,
	"reject":     (*ruleParser).verdict,
}

// statement reads a statement or a verdict.
func (p *ruleParser) statement(t string) error {
	if read := statements[t]; read != nil {
		return read(p, t)
	}
	return fmt.Errorf("%q is not an expression svcgen knows", t)
}

// masquerade reads "masquerade [fully-random|random|persistent]...", which ends the
// rule.
func (p *ruleParser) masquerade(string) error {
	for p.accept("fully-random") || p.accept("random") || p.accept("persistent") {
	}
	p.r.Verdict.Kind = Accept
	return p.stmt(Stmt{Kind: StmtMasquerade})
}

// chainVerdict reads "jump CHAIN" or "goto CHAIN".
func (p *ruleParser) chainVerdict(word string) error {
	p.r.Verdict = Verdict{Kind: VerdictKind(word), Chain: p.next()}
	if p.r.Verdict.Chain == "" {
		return fmt.Errorf("%s without a chain", word)
	}
	return nil
}

// verdict reads "accept", "drop", "return", "reject" ("reject with ..." too).
func (p *ruleParser) verdict(word string) error {
	p.r.Verdict.Kind = VerdictKind(word)
	if word == "reject" && p.accept("with") {
		p.i = len(p.toks) // "reject with icmp type ..."
	}
	return nil
}

// ct reads "ct state new" and "ct status dnat".
func (p *ruleParser) ct() error {
	p.next()
	switch p.next() {
	case "state":
		if p.accept("new") {
			return p.match(Match{Kind: MatchCtNew})
		}
	case "status":
		if p.accept("dnat") {
			return p.match(Match{Kind: MatchCtDNAT})
		}
	}
	return fmt.Errorf("ct: only \"ct state new\" and \"ct status dnat\"")
}

// counter reads "counter" and "counter name NAME"; a counter with values (nft's
// listing of an anonymous one) is none kube-proxy writes.
func (p *ruleParser) counter(string) error {
	s := Stmt{Kind: StmtCounter}
	if p.accept("name") {
		if s.Name = unquoteToken(p.next()); s.Name == "" {
			return fmt.Errorf("counter name")
		}
	}
	if p.peek(0) == "packets" || p.peek(0) == "bytes" {
		return fmt.Errorf("a counter with values")
	}
	return p.stmt(s)
}

// mark reads what follows "mark" (or "meta mark"): "set mark or|xor|and V" (listed
// "set meta mark |^& V"), or a test "and|& M ==|!= V".
func (p *ruleParser) mark() error {
	if p.accept("set") {
		p.accept("meta")
		if err := p.expect("mark"); err != nil {
			return err
		}
		op := map[string]string{"or": "or", "|": "or", "xor": "xor", "^": "xor", "and": "and", "&": "and"}[p.next()]
		v, err := strconv.ParseUint(p.next(), 0, 32)
		if op == "" || err != nil {
			return fmt.Errorf("mark set: want \"mark set mark or|xor|and VALUE\"")
		}
		return p.stmt(Stmt{Kind: StmtMark, Op: op, Value: uint32(v)})
	}
	if !p.accept("and") && !p.accept("&") {
		return fmt.Errorf("mark: want a test \"mark and MASK == VALUE\" or \"mark set\"")
	}
	mask, err1 := strconv.ParseUint(p.next(), 0, 32)
	rel := p.next()
	want, err2 := strconv.ParseUint(p.next(), 0, 32)
	if err1 != nil || err2 != nil || (rel != "==" && rel != "!=") {
		return fmt.Errorf("mark test: want \"mark and MASK ==|!= VALUE\"")
	}
	return p.match(Match{Kind: MatchMark, Mask: uint32(mask), Want: uint32(want), Not: rel == "!="})
}

// field reads one packet field: "ip saddr", "ip6 daddr", "meta l4proto", "th dport",
// "tcp dport" (which matches the protocol too: proto), "iifname".
func (p *ruleParser) field() (f Field, proto string, err error) {
	switch t := p.next(); t {
	case p.ipX:
		switch f := Field(p.next()); f {
		case SrcAddr, DstAddr:
			return f, "", nil
		}
		return "", "", fmt.Errorf("%s: want saddr or daddr", t)
	case "meta":
		return L4Proto, "", p.expect("l4proto")
	case "th", "tcp", "udp", "sctp":
		if t != "th" {
			proto = t
		}
		return DstPort, proto, p.expect("dport")
	case "iifname":
		return InIface, "", nil
	default:
		return "", "", fmt.Errorf("%q is not a field svcgen knows", t)
	}
}

// key reads a field or a concatenation of fields ("ip daddr . meta l4proto . th
// dport").
func (p *ruleParser) key() ([]Field, error) {
	var key []Field
	for {
		f, proto, err := p.field()
		if err != nil {
			return nil, err
		}
		if proto != "" {
			if len(key) > 0 || p.peek(0) == "." {
				return nil, fmt.Errorf("%s dport in a concatenation (th dport is)", proto)
			}
			p.r.Matches = append(p.r.Matches, Match{Kind: MatchValue, Field: L4Proto, Value: proto})
		}
		key = append(key, f)
		if !p.accept(".") {
			return key, nil
		}
	}
}

// selector reads a key and what is done with it: "vmap @map", "@set", or a
// comparison of one field ("!= { ... }", "10.0.0.0/8", "tcp", "veth*").
func (p *ruleParser) selector() error {
	key, err := p.key()
	if err != nil {
		return err
	}
	if p.accept("vmap") {
		m := p.next()
		if !strings.HasPrefix(m, "@") || len(m) < 2 {
			return fmt.Errorf("vmap %q: only named maps", m)
		}
		p.r.Verdict = Verdict{Kind: Vmap, Map: m[1:], Key: key}
		return nil
	}
	not := p.accept("!=")
	if v := p.peek(0); strings.HasPrefix(v, "@") && len(v) > 1 {
		p.next()
		return p.match(Match{Kind: MatchSet, Key: key, Set: v[1:], Not: not})
	}
	if len(key) > 1 {
		return fmt.Errorf("a concatenation is only looked up in a set or a map")
	}
	return p.compare(key[0], not)
}

// compare reads the value(s) a field is compared with.
func (p *ruleParser) compare(f Field, not bool) error {
	values, err := p.values()
	if err != nil {
		return err
	}
	if f != SrcAddr && f != DstAddr {
		if len(values) != 1 {
			return fmt.Errorf("%s: a set of values", f)
		}
		return p.match(Match{Kind: MatchValue, Field: f, Value: unquoteToken(values[0]), Not: not})
	}
	m := Match{Kind: MatchAddr, Field: f, Not: not}
	for _, v := range values {
		pfx, err := parsePrefixOrAddr(v)
		if err != nil {
			return err
		}
		m.Prefixes = append(m.Prefixes, pfx)
	}
	slices.SortFunc(m.Prefixes, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	return p.match(m)
}

// values reads one value, or the entries of an anonymous set "{ a , b }".
func (p *ruleParser) values() ([]string, error) {
	v := p.next()
	switch v {
	case "":
		return nil, fmt.Errorf("a comparison without a value")
	case "{":
		entries, end := group(p.toks, p.i)
		if end >= len(p.toks) {
			return nil, fmt.Errorf("unterminated {")
		}
		p.i = end + 1
		return entries, nil
	}
	return []string{v}, nil
}

// update reads "update @set { KEY }".
func (p *ruleParser) update(string) error {
	set := p.next()
	if !strings.HasPrefix(set, "@") || p.next() != "{" {
		return fmt.Errorf("update: want \"update @set { KEY }\"")
	}
	key, err := p.key()
	if err != nil {
		return err
	}
	if err := p.expect("}"); err != nil {
		return err
	}
	return p.stmt(Stmt{Kind: StmtUpdate, Set: set[1:], Key: key})
}

// dnat reads "dnat [ip] [addr . port] to TARGET": an "IP:port" ("[IPv6]:port", or an
// address alone), or "numgen random mod N map { 0 : IP . PORT , ... }".
func (p *ruleParser) dnat(string) error {
	p.accept(p.ipX)
	if p.accept("addr") {
		if err := p.expect(".", "port"); err != nil {
			return err
		}
	}
	if err := p.expect("to"); err != nil {
		return err
	}
	s := Stmt{Kind: StmtDNAT}
	if p.accept("numgen") {
		entries, err := p.numgen("map")
		if err != nil {
			return err
		}
		for _, e := range entries {
			ap, err := parseTarget(e)
			if err != nil {
				return err
			}
			s.To = append(s.To, ap)
		}
	} else {
		ap, err := parseTarget(p.next())
		if err != nil {
			return err
		}
		s.To = []netip.AddrPort{ap}
	}
	p.r.Verdict.Kind = Accept
	return p.stmt(s)
}

// numgenVmap reads "numgen random mod N vmap { 0 : goto A , ... }".
func (p *ruleParser) numgenVmap(string) error {
	entries, err := p.numgen("vmap")
	if err != nil {
		return err
	}
	v := Verdict{Kind: Numgen, Entries: make([]Verdict, len(entries))}
	for i, e := range entries {
		if v.Entries[i], err = ParseVerdict(e); err != nil {
			return err
		}
	}
	p.r.Verdict = v
	return nil
}

// numgen reads "random mod N MAP { 0 : V , ... }" (after "numgen") and returns the
// values by index; every index must have one.
func (p *ruleParser) numgen(kind string) ([]string, error) {
	if err := p.expect("random", "mod"); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(p.next())
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("numgen modulus")
	}
	if err := p.expect(kind, "{"); err != nil {
		return nil, err
	}
	entries, end := group(p.toks, p.i)
	if end >= len(p.toks) {
		return nil, fmt.Errorf("unterminated {")
	}
	p.i = end + 1
	out := make([]string, n)
	for _, e := range entries {
		idx, value, ok := strings.Cut(e, " : ")
		k, err := strconv.Atoi(idx)
		if !ok || err != nil || k < 0 || k >= n || out[k] != "" {
			return nil, fmt.Errorf("numgen entry %q", e)
		}
		out[k] = value
	}
	if i := slices.Index(out, ""); i >= 0 {
		return nil, fmt.Errorf("numgen: no entry for %d", i)
	}
	return out, nil
}

// parseTarget reads a DNAT target: "IP:port", "[IPv6]:port", "IP . PORT", or an
// address alone (port 0: the packet's).
func parseTarget(s string) (netip.AddrPort, error) {
	if addr, port, ok := strings.Cut(s, " . "); ok {
		a, err := netip.ParseAddr(addr)
		n, err2 := strconv.ParseUint(port, 10, 16)
		if err != nil || err2 != nil {
			return netip.AddrPort{}, fmt.Errorf("dnat target %q", addr+" . "+port)
		}
		return netip.AddrPortFrom(a, uint16(n)), nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dnat target %q", s)
	}
	return netip.AddrPortFrom(a, 0), nil
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
