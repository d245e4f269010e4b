package syntax

import (
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/knftables"
)

// Rule is what a rule does, read from its text (ParseRule): the conditions a packet
// must meet, all of them; then the statements, in order, that change the packet or
// the table; then how the rule ends. It is the one reading of rule text that trace and
// the tests evaluate, whether the text is knftables' (svcgen's, kube-proxy's) or nft's
// listing of it: both spellings give the same Rule.
type Rule struct {
	Matches []Match
	Stmts   []Stmt
	Verdict Verdict
}

// Field is a packet field a rule reads.
type Field string

// Fields.
const (
	SrcAddr Field = "saddr"   // ip saddr, ip6 saddr
	DstAddr Field = "daddr"   // ip daddr, ip6 daddr
	L4Proto Field = "l4proto" // meta l4proto: tcp, udp, sctp
	DstPort Field = "dport"   // th dport (tcp dport... match the protocol too)
	InIface Field = "iifname" // the interface a packet came in on
)

// MatchKind says what a Match tests.
type MatchKind string

// Kinds of match.
const (
	MatchAddr   MatchKind = "addr"    // Field is in Prefixes
	MatchSet    MatchKind = "set"     // Key (one field, or several concatenated) is in the named Set
	MatchLocal  MatchKind = "local"   // Field is an address of the host ("fib daddr type local")
	MatchValue  MatchKind = "value"   // Field is Value (an interface "veth*" is a prefix)
	MatchMark   MatchKind = "mark"    // the packet's mark & Mask is Want
	MatchCtNew  MatchKind = "ct new"  // the first packet of a connection
	MatchCtDNAT MatchKind = "ct dnat" // a packet of a connection that was DNATed
)

// Match is one condition of a rule; Not negates it.
type Match struct {
	Kind       MatchKind
	Field      Field
	Key        []Field
	Not        bool
	Prefixes   []netip.Prefix // sorted
	Set        string
	Value      string
	Mask, Want uint32
}

// StmtKind says what a statement does.
type StmtKind string

// Kinds of statement.
const (
	StmtMark       StmtKind = "mark"       // mark set mark Op Value
	StmtUpdate     StmtKind = "update"     // add the packet's Key to Set (ClientIP affinity)
	StmtDNAT       StmtKind = "dnat"       // to To[0], or to To[numgen random mod len(To)]
	StmtMasquerade StmtKind = "masquerade" // source NAT to the outgoing interface's address
	StmtCounter    StmtKind = "counter"    // count (Name: a named counter)
)

// Stmt is one statement of a rule.
type Stmt struct {
	Kind  StmtKind
	Op    string // mark: "or", "xor" or "and"
	Value uint32
	Set   string
	Key   []Field
	// To are the DNAT targets; a port of 0 keeps the packet's.
	To   []netip.AddrPort
	Name string
}

// VerdictKind says how a rule ends.
type VerdictKind string

// Kinds of verdict.
const (
	Continue VerdictKind = ""       // on to the next rule
	Accept   VerdictKind = "accept" // also after dnat and masquerade
	Drop     VerdictKind = "drop"
	Reject   VerdictKind = "reject"
	Return   VerdictKind = "return"
	Jump     VerdictKind = "jump"
	Goto     VerdictKind = "goto"
	Vmap     VerdictKind = "vmap"   // the value of Key's element in the named Map
	Numgen   VerdictKind = "numgen" // Entries[random mod len(Entries)]
)

// Verdict is how a rule, or a verdict map's element, ends.
type Verdict struct {
	Kind    VerdictKind
	Chain   string
	Map     string
	Key     []Field
	Entries []Verdict
}

// Ref is an object a rule names.
type Ref struct {
	Kind RefKind
	Name string
}

// Refs are the chains, sets and maps the rule names, in the order it names them.
func (r *Rule) Refs() []Ref {
	var out []Ref
	for _, m := range r.Matches {
		if m.Kind == MatchSet {
			out = append(out, Ref{RefSet, m.Set})
		}
	}
	for _, s := range r.Stmts {
		if s.Kind == StmtUpdate {
			out = append(out, Ref{RefSet, s.Set})
		}
	}
	return r.Verdict.refs(out)
}

func (v Verdict) refs(out []Ref) []Ref {
	switch v.Kind {
	case Jump, Goto:
		out = append(out, Ref{RefChain, v.Chain})
	case Vmap:
		out = append(out, Ref{RefMap, v.Map})
	case Numgen:
		for _, e := range v.Entries {
			out = e.refs(out)
		}
	}
	return out
}

// ParseRule reads a rule's text (without its comment) for a table of a family. It
// knows the expressions kube-proxy's nftables proxier writes, in every release svcgen
// reads (and nft's listing of them); any other rule is an error, so that a reader
// never passes silently over a rule it cannot read.
func ParseRule(text string, family knftables.Family) (*Rule, error) {
	p := &ruleParser{toks: tokens(text), ipX: string(family), r: &Rule{}}
	for !p.done() {
		if err := p.term(); err != nil {
			return nil, fmt.Errorf("rule %q: %v", text, err)
		}
	}
	return p.r, nil
}

// ParseVerdict reads a verdict: a verdict map's value ("goto CHAIN", "drop").
func ParseVerdict(text string) (Verdict, error) {
	f := strings.Fields(text)
	switch {
	case len(f) == 2 && (f[0] == "goto" || f[0] == "jump"):
		return Verdict{Kind: VerdictKind(f[0]), Chain: f[1]}, nil
	case len(f) == 1 && (f[0] == "accept" || f[0] == "drop" || f[0] == "reject" || f[0] == "return"):
		return Verdict{Kind: VerdictKind(f[0])}, nil
	}
	return Verdict{}, fmt.Errorf("verdict %q", text)
}
