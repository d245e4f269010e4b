package syntax

import "bytes"

// Same reports whether r is the rule that args spell: the same words, or the same
// canonical key (iptables-save spells rules differently from iptables-restore input:
// "-d 10.0.0.1/32" for "-d 10.0.0.1", options in another order). It is the one rule
// comparison every sync makes.
func (r *Rule) Same(args []string) bool {
	return equalWords(r.Args, args) || RuleKey(r.Args) == RuleKey(args)
}

// SameLine reports whether r is the rule a "-A CHAIN args" line adds. When r was read
// from svcgen's own text its line is compared first, byte for byte, without parsing.
func (r *Rule) SameLine(line []byte) bool {
	if r.Raw != "" && r.Raw == string(line) {
		return true
	}
	words, err := splitWords(string(line))
	if err != nil || len(words) < 2 || words[1] != r.Chain {
		return false
	}
	return r.Same(words[2:])
}

// SameRules reports whether two rule lists are the same rules in the same order.
func SameRules(a, b []Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Same(b[i].Args) {
			return false
		}
	}
	return true
}

// HasLines reports whether the chain holds exactly the rules of lines, in order (each
// line "-A NAME args"). A nil chain holds nothing, not even an empty list.
func (c *Chain) HasLines(lines [][]byte) bool {
	if c == nil || len(c.Rules) != len(lines) {
		return false
	}
	for i := range c.Rules {
		if !c.Rules[i].SameLine(lines[i]) {
			return false
		}
	}
	return true
}

// Holds reports whether the table has every chain that decls declares, each with
// exactly the rules that rules adds to it, in order. A service has a handful of chains,
// so they are looked up in a slice.
func (t *Table) Holds(decls, rules *Buffer) bool {
	if t == nil {
		return false
	}
	type cursor struct {
		name string
		c    *Chain
		next int
	}
	var chains []cursor
	same := true
	decls.EachLine(func(line []byte) {
		c := t.Chain(LineChain(line))
		same = same && c != nil
		chains = append(chains, cursor{name: LineChain(line), c: c})
	})
	if !same {
		return false
	}
	rules.EachLine(func(line []byte) {
		if !same {
			return
		}
		name := LineChain(line)
		for i := range chains {
			cur := &chains[i]
			if cur.name != name {
				continue
			}
			same = cur.next < len(cur.c.Rules) && cur.c.Rules[cur.next].SameLine(line)
			cur.next++
			return
		}
		same = false // a rule in a chain decls does not declare
	})
	for _, cur := range chains {
		same = same && cur.next == len(cur.c.Rules)
	}
	return same
}

// Changed returns, of the chains named, those whose rules in the table differ from the
// ones rules adds to them.
func (t *Table) Changed(rules *Buffer, names []string) map[string]bool {
	byChain := map[string][][]byte{}
	rules.EachLine(func(line []byte) {
		if bytes.HasPrefix(line, []byte("-A ")) {
			name := LineChain(line)
			byChain[name] = append(byChain[name], line)
		}
	})
	changed := make(map[string]bool, len(names))
	for _, name := range names {
		changed[name] = !t.Chain(name).HasLines(byChain[name])
	}
	return changed
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// EachLine calls fn with every line the buffer holds, without its "\n".
func (b *Buffer) EachLine(fn func(line []byte)) { forEachLine(b.buf, fn) }
