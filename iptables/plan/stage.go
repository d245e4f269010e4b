package plan

import (
	"slices"

	"github.com/svcgen/svcgen/iptables/syntax"
)

// Staged restores.
//
// iptables-nft (1.8.9) spends time that grows much faster than linearly with the number
// of chain lines and -X lines in one "*table ... COMMIT" block: 5,000 new one-rule chains
// in one block take 0.1 s of user time, 20,000 take 1.4 s and 40,000 take 6 s, while
// 40,000 in eight blocks of one restore take 1.6 s. (The chains already in the table
// hardly matter.) A cold 10,000-service node declares about 100,000 chains, so one block
// is minutes; split into blocks it is seconds.
//
// Each block is its own transaction, so a staged restore is ordered to be safe at every
// block boundary:
//
//  1. nat blocks of service chains, whole service ports per block (a port's chains
//     jump to each other), the fixed chains they jump to (KUBE-MARK-MASQ) declared
//     first when the table lacks them; nothing jumps to the new chains yet;
//  2. the filter block;
//  3. the nat block of fixed chains: KUBE-SERVICES and KUBE-NODEPORTS switch to the
//     new service chains at once;
//  4. blocks that delete the chains nothing uses any more, those that jump first.
//
// A restore with fewer chain lines than the limit is one block per table, exactly
// kube-proxy's shape.

// group is lines that must be in one block: a service port's chains, or one chain to
// delete.
type group struct {
	decls, rules []byte
	chains       int // chain lines, -X lines
}

// stager cuts groups of one table into blocks of at most max chain lines (a bigger
// group gets a block of its own).
type stager struct {
	max    int
	b      *syntax.Buffer
	table  string
	decls  syntax.Buffer
	rules  syntax.Buffer
	chains int
}

func (s *stager) add(table string, g *group) {
	if s.table != table || (s.chains > 0 && s.chains+g.chains > s.max) {
		s.flush()
		s.table = table
	}
	s.decls.AppendText(g.decls)
	s.rules.AppendText(g.rules)
	s.chains += g.chains
}

func (s *stager) flush() {
	if s.table == "" || (s.decls.Len() == 0 && s.rules.Len() == 0) {
		s.table = ""
		return
	}
	s.b.Line("*" + s.table)
	s.b.Append(&s.decls)
	s.b.Append(&s.rules)
	s.b.Commit()
	s.b.Flush()
	s.decls.Reset()
	s.rules.Reset()
	s.chains = 0
	s.table = ""
}

// deleteOrder orders chains to be deleted so that a chain comes after every chain (of
// the set) that jumps to it: deleting them in that order, block by block, never deletes
// a chain something still jumps to. Otherwise it keeps the given order.
func deleteOrder(t *syntax.Table, names []string) []string {
	if len(names) < 2 {
		return names
	}
	in := make(map[string]int, len(names))
	for _, n := range names {
		in[n] = 0
	}
	edges := map[string][]string{}
	for _, n := range names {
		c := t.Chain(n)
		if c == nil {
			continue
		}
		for _, r := range c.Rules {
			to := syntax.RuleTarget(r.Args)
			if _, ok := in[to]; ok && to != n {
				edges[n] = append(edges[n], to)
				in[to]++
			}
		}
	}
	out := make([]string, 0, len(names))
	ready := slices.Clone(names)
	for len(ready) > 0 {
		var next []string
		for _, n := range ready {
			if in[n] != 0 {
				next = append(next, n)
				continue
			}
			in[n] = -1
			out = append(out, n)
			for _, to := range edges[n] {
				in[to]--
			}
		}
		if len(next) == len(ready) {
			return append(out, next...) // a loop, which the kernel does not allow
		}
		ready = next
	}
	return out
}
