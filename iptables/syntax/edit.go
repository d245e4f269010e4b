package syntax

import "slices"

// Jump is a rule a proxy keeps in a built-in chain, outside its restore payload.
type Jump struct {
	Table, From string
	Args        []string
}

// To is the chain the jump jumps to.
func (j Jump) To() string { return RuleTarget(j.Args) }

// EnsureJumps changes a ruleset as a proxy's EnsureRule with Prepend changes the
// kernel: each jump missing from its built-in chain is inserted at position 1, in the
// order given (so on a fresh node the last one comes first).
func EnsureJumps(rs *Ruleset, jumps []Jump) {
	for _, j := range jumps {
		t := rs.Table(j.Table)
		if t == nil {
			t = &Table{Name: j.Table, index: map[string]*Chain{}}
			rs.Tables = append(rs.Tables, t)
		}
		c := t.chain(j.From)
		if c.find(j.Args) < 0 {
			c.Rules = slices.Insert(c.Rules, 0, Rule{Chain: j.From, Args: j.Args})
		}
	}
}
