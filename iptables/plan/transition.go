package plan

import (
	"bufio"
	"io"
	"slices"
	"strconv"

	"github.com/svcgen/svcgen/iptables/syntax"
)

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
func WriteTransition(w io.Writer, from, to *syntax.Ruleset, maxChains int) error {
	bw := bufio.NewWriterSize(w, syntax.FlushSize)
	b := syntax.NewStream(bw, false)
	max := maxChains
	if max <= 0 {
		max = int(^uint(0) >> 1)
	}
	st := &stager{max: max, b: b}
	var names []string
	for _, rs := range []*syntax.Ruleset{to, from} {
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
	if err := b.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

func transitionTable(st *stager, table string, from, to *syntax.Table) {
	var toChains, fromChains []*syntax.Chain
	if to != nil {
		toChains = to.Chains
	}
	if from != nil {
		fromChains = from.Chains
	}
	// 1. Create the chains to has and from lacks, empty, so every rewrite can jump
	// to them.
	for _, c := range toChains {
		if !syntax.IsBuiltin(table, c.Name) && from.Chain(c.Name) == nil {
			var d syntax.Buffer
			d.ChainLine(c.Name, "-")
			st.add(table, &group{decls: d.Bytes(), chains: 1})
		}
	}
	// 2. Rewrite the user chains that differ (or are new), edit the built-in ones.
	for _, c := range toChains {
		old := from.Chain(c.Name)
		if syntax.IsBuiltin(table, c.Name) {
			var oldRules []syntax.Rule
			if old != nil {
				oldRules = old.Rules
			}
			var r syntax.Buffer
			builtinEdits(c.Name, oldRules, c.Rules, &r)
			st.add(table, &group{rules: r.Bytes()})
			continue
		}
		if old != nil && syntax.SameRules(old.Rules, c.Rules) {
			continue
		}
		var d, r syntax.Buffer
		d.ChainLine(c.Name, "-")
		for _, rule := range c.Rules {
			r.Start(c.Name)
			r.Args(rule.Args)
			r.End()
		}
		st.add(table, &group{decls: d.Bytes(), rules: r.Bytes(), chains: 1})
		if r.Err() != nil {
			st.b.Fail(r.Err())
		}
	}
	for _, c := range fromChains {
		if syntax.IsBuiltin(table, c.Name) && to.Chain(c.Name) == nil {
			var r syntax.Buffer
			builtinEdits(c.Name, c.Rules, nil, &r)
			st.add(table, &group{rules: r.Bytes()})
		}
	}
	// 3. Delete the chains only from has, those that jump first.
	var gone []string
	for _, c := range fromChains {
		if !syntax.IsBuiltin(table, c.Name) && to.Chain(c.Name) == nil {
			gone = append(gone, c.Name)
		}
	}
	for _, name := range deleteOrder(from, gone) {
		var d, x syntax.Buffer
		d.ChainLine(name, "-")
		x.Line("-X", name)
		st.add(table, &group{decls: d.Bytes(), rules: x.Bytes(), chains: 2})
	}
}

// builtinEdits writes the -D and -I lines that turn a built-in chain's rules from
// into to, leaving the rules both have where they are.
func builtinEdits(chain string, from, to []syntax.Rule, b *syntax.Buffer) {
	need := map[string]int{}
	for _, r := range to {
		need[syntax.RuleKey(r.Args)]++
	}
	var kept []string // keys of the rules left, in order
	for _, r := range from {
		k := syntax.RuleKey(r.Args)
		if need[k] > 0 {
			need[k]--
			kept = append(kept, k)
			continue
		}
		b.Op("-D", chain)
		b.Args(r.Args)
		b.End()
	}
	for i, r := range to {
		k := syntax.RuleKey(r.Args)
		if i < len(kept) && kept[i] == k {
			continue
		}
		b.Op("-I", chain)
		b.Words(strconv.Itoa(i + 1))
		b.Args(r.Args)
		b.End()
		kept = slices.Insert(kept, i, k)
	}
	// Rules that were only out of order are now left over at the end.
	for len(kept) > len(to) {
		b.Op("-D", chain)
		b.Words(strconv.Itoa(len(kept)))
		b.End()
		kept = kept[:len(kept)-1]
	}
}
