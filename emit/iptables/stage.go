package iptables

import "slices"

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
	b      *lineBuf
	table  string
	decls  lineBuf
	rules  lineBuf
	chains int
}

func (s *stager) add(table string, g *group) {
	if s.table != table || (s.chains > 0 && s.chains+g.chains > s.max) {
		s.flush()
		s.table = table
	}
	s.decls.buf = append(s.decls.buf, g.decls...)
	s.rules.buf = append(s.rules.buf, g.rules...)
	s.chains += g.chains
}

func (s *stager) flush() {
	if s.table == "" || (len(s.decls.buf) == 0 && len(s.rules.buf) == 0) {
		s.table = ""
		return
	}
	s.b.line("*" + s.table)
	s.b.buf = append(s.b.buf, s.decls.buf...)
	s.b.buf = append(s.b.buf, s.rules.buf...)
	s.b.commit()
	s.b.flush()
	s.decls.reset()
	s.rules.reset()
	s.chains = 0
	s.table = ""
}

// deleteOrder orders chains to be deleted so that a chain comes after every chain (of
// the set) that jumps to it: deleting them in that order, block by block, never deletes
// a chain something still jumps to. Otherwise it keeps the given order.
func deleteOrder(t *Table, names []string) []string {
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
			to := ruleTarget(r.Args)
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

// ruleTarget is the chain or target a rule's -j or -g names, "" if none.
func ruleTarget(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--comment" {
			i++
			continue
		}
		if args[i] == "-j" || args[i] == "-g" || args[i] == "--jump" || args[i] == "--goto" {
			return args[i+1]
		}
	}
	return ""
}
