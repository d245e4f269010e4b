package syntax

import (
	"slices"
	"strings"

	"github.com/svcgen/svcgen/ruleview"
	"sigs.k8s.io/knftables"
)

// View is the table as diff and audit compare it: one section per chain, set and map,
// headed by its "add" line; a chain's rules in order, each keyed by its canonical form
// (Canonical, so that nft's listing of a rule is the same rule), a set's or map's
// elements in the order of their text (the kernel lists them in its own). A
// per-service chain belongs to its service port, and so does an element that leads to
// one. A nil state is an empty view.
func (st *State) View() *ruleview.View {
	v := &ruleview.View{}
	if st == nil {
		return v
	}
	f := newLineFormat(st.Family)
	v.Key = f.ruleLineKey
	table := string(st.Family) + " " + TableName
	section := func(name string, def knftables.Object, rank int) *ruleview.Section {
		s := &ruleview.Section{Table: table, Name: name, Header: f.line(Add, def), Owner: PortOf(name), Rank: rank}
		v.Sections = append(v.Sections, s)
		return s
	}
	for _, name := range sortedKeys(st.Chains) {
		c := st.Chains[name]
		s := section(name, c.Obj, 1)
		for _, r := range c.Rules {
			l := ruleview.Line{Text: f.line(Add, r)}
			if !plainRule(r) || r.Chain != name {
				l.Key = name + " " + ruleKey(r) // not written as ruleLineKey reads it
			}
			s.Lines = append(s.Lines, l)
		}
	}
	for _, cs := range []map[string]*Container{st.Sets, st.Maps} {
		for _, name := range sortedKeys(cs) {
			c := cs[name]
			s := section(name, c.Object(), 0)
			for _, e := range c.Elements {
				s.Lines = append(s.Lines, ruleview.Line{Text: f.line(Add, e), Owner: LinePort(JoinKey(e.Key) + " " + JoinKey(e.Value))})
			}
			slices.SortFunc(s.Lines, func(a, b ruleview.Line) int { return strings.Compare(a.Text, b.Text) })
		}
	}
	v.Sort()
	return v
}

// ruleKey is a rule with its comment in canonical form.
func ruleKey(r *knftables.Rule) string { return Canonical(RuleLine(r)) }

// ruleLineKey is the key of a plain rule's line, "add rule FAMILY kube-proxy CHAIN
// RULE" as appendRule writes it: the chain and ruleKey, made from the line when diff
// or audit needs it (most lines of two tables of one node are the same text).
func (f lineFormat) ruleLineKey(line string) string {
	rest, ok := strings.CutPrefix(line, string(f.start(nil, "add rule ", "")))
	chain, rule, found := strings.Cut(rest, " ")
	if !ok || !found {
		return line // View keys every other line itself
	}
	return chain + " " + Canonical(rule)
}

// line is one operation's line without its newline; an object that does not write
// (knftables refuses it) shows as its error.
func (f lineFormat) line(verb string, o knftables.Object) string {
	b, err := f.appendOp(nil, verb, o)
	if err != nil {
		return "# " + err.Error()
	}
	return strings.TrimSuffix(string(b), "\n")
}
