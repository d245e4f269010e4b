package iptables

import (
	"bufio"
	"io"
	"slices"
	"strconv"
)

// builtins are netfilter's built-in chains per table. They are never created or
// deleted, and a chain line for one in a --noflush restore sets its policy without
// flushing it.
var builtins = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// IsBuiltin reports a built-in chain of a table.
func IsBuiltin(table, chain string) bool {
	return slices.Contains(builtins[table], chain)
}

// WriteTransition writes the restore, for iptables-restore --noflush, that turns the
// tables of from into those of to: user chains created, rewritten and deleted whole,
// built-in chains edited rule by rule (-D, -I; their policies are left alone). Chains
// that are the same in both are not named, so nothing else in the kernel is touched.
// A missing table counts as an empty one.
//
// Blocks are ordered so that every block boundary is safe (stage.go): chains are
// created before anything jumps to them, rewritten, then deleted after everything that
// jumps to them; with maxChains > 0 each stage is cut into blocks of at most that many
// chain lines. It rolls a failed apply back (from: the kernel as the apply left it, to:
// as it was) and cleans up (to: the kernel without kube-proxy's chains).
func WriteTransition(w io.Writer, from, to *Ruleset, maxChains int) error {
	bw := bufio.NewWriterSize(w, flushSize)
	b := &lineBuf{out: bw}
	max := maxChains
	if max <= 0 {
		max = int(^uint(0) >> 1)
	}
	st := &stager{max: max, b: b}
	var names []string
	for _, rs := range []*Ruleset{to, from} {
		for _, t := range rs.Tables {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	for _, name := range names {
		transitionTable(st, name, from.Table(name), to.Table(name))
		st.flush()
	}
	b.flush()
	if b.err != nil {
		return b.err
	}
	return bw.Flush()
}

func transitionTable(st *stager, table string, from, to *Table) {
	var toChains, fromChains []*Chain
	if to != nil {
		toChains = to.Chains
	}
	if from != nil {
		fromChains = from.Chains
	}
	// 1. Create the chains to has and from lacks, empty, so every rewrite can jump
	// to them.
	for _, c := range toChains {
		if !IsBuiltin(table, c.Name) && from.Chain(c.Name) == nil {
			var d lineBuf
			d.chainLine(c.Name, "-")
			st.add(table, &group{decls: d.buf, chains: 1})
		}
	}
	// 2. Rewrite the user chains that differ (or are new), edit the built-in ones.
	for _, c := range toChains {
		old := from.Chain(c.Name)
		if IsBuiltin(table, c.Name) {
			var oldRules []Rule
			if old != nil {
				oldRules = old.Rules
			}
			var r lineBuf
			builtinEdits(c.Name, oldRules, c.Rules, &r)
			st.add(table, &group{rules: r.buf})
			continue
		}
		if old != nil && sameRuleList(old.Rules, c.Rules) {
			continue
		}
		var d, r lineBuf
		d.chainLine(c.Name, "-")
		for _, rule := range c.Rules {
			r.start(c.Name)
			writeArgs(&r, rule.Args)
			r.end()
		}
		st.add(table, &group{decls: d.buf, rules: r.buf, chains: 1})
		if r.err != nil {
			st.b.fail(r.err)
		}
	}
	for _, c := range fromChains {
		if IsBuiltin(table, c.Name) && to.Chain(c.Name) == nil {
			var r lineBuf
			builtinEdits(c.Name, c.Rules, nil, &r)
			st.add(table, &group{rules: r.buf})
		}
	}
	// 3. Delete the chains only from has, those that jump first.
	var gone []string
	for _, c := range fromChains {
		if !IsBuiltin(table, c.Name) && to.Chain(c.Name) == nil {
			gone = append(gone, c.Name)
		}
	}
	for _, name := range deleteOrder(from, gone) {
		var d, x lineBuf
		d.chainLine(name, "-")
		x.line("-X", name)
		st.add(table, &group{decls: d.buf, rules: x.buf, chains: 2})
	}
}

// builtinEdits writes the -D and -I lines that turn a built-in chain's rules from
// into to, leaving the rules both have where they are.
func builtinEdits(chain string, from, to []Rule, b *lineBuf) {
	need := map[string]int{}
	for _, r := range to {
		need[RuleKey(r.Args)]++
	}
	var kept []string // keys of the rules left, in order
	for _, r := range from {
		k := RuleKey(r.Args)
		if need[k] > 0 {
			need[k]--
			kept = append(kept, k)
			continue
		}
		b.op("-D", chain)
		writeArgs(b, r.Args)
		b.end()
	}
	for i, r := range to {
		k := RuleKey(r.Args)
		if i < len(kept) && kept[i] == k {
			continue
		}
		b.op("-I", chain)
		b.w(strconv.Itoa(i + 1))
		writeArgs(b, r.Args)
		b.end()
		kept = slices.Insert(kept, i, k)
	}
	// Rules that were only out of order are now left over at the end.
	for len(kept) > len(to) {
		b.op("-D", chain)
		b.w(strconv.Itoa(len(kept)))
		b.end()
		kept = kept[:len(kept)-1]
	}
}

// sameRuleList compares two chains' rules, each pair byte for byte or by meaning.
func sameRuleList(a, b []Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalWords(a[i].Args, b[i].Args) && RuleKey(a[i].Args) != RuleKey(b[i].Args) {
			return false
		}
	}
	return true
}

// Clone returns a copy of the ruleset that can be changed (Restore) on its own. Rule
// words are shared: nothing changes them in place.
func (rs *Ruleset) Clone() *Ruleset {
	out := &Ruleset{Tables: make([]*Table, len(rs.Tables))}
	for i, t := range rs.Tables {
		nt := &Table{Name: t.Name, Chains: make([]*Chain, len(t.Chains)), Deleted: slices.Clone(t.Deleted)}
		for j, c := range t.Chains {
			nc := *c
			nc.Rules = slices.Clone(c.Rules)
			nt.Chains[j] = &nc
		}
		out.Tables[i] = nt
	}
	return Reindex(out)
}
