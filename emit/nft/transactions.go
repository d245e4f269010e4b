package nft

import (
	"bytes"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// Transactions are the "nft -f" texts that load sm's table over prev, the kube-proxy
// tables on the node now (nil or without a table of sm's family: none there): with a
// table there, one transaction with only what changed (kube-proxy's partial sync,
// Write with Previous, and Minimal when minimal); without, the whole table in one
// transaction, or, when it has more than stageAbove objects (0: never), as the five
// transactions of Stages, faster for a large table but not atomic (see
// Options.Stages). A partial sync that finds the table different outside the Services
// writes the whole table, in one transaction.
//
// Each transaction ends by adding and deleting CommitChain. nf_tables commits a
// transaction, and moves the ruleset generation by one, only when it holds at least
// one change; an "add element" or "add chain" of an object that is already there, or
// a "flush" of something empty, is none. The delete of a chain the same transaction
// added always is one, so every transaction here moves the generation by exactly one,
// whatever the kernel holds (SureChange; apply relies on it, see apply/generation.go).
func Transactions(sm *ir.ServiceMap, prev *Ruleset, stageAbove int, minimal bool) ([][]byte, error) {
	t := newTable(sm)
	var have *State
	if prev != nil {
		have = prev.Tables[t.fixed.Family]
	}
	text := func(write func(lw *lineWriter)) ([]byte, error) {
		var b bytes.Buffer
		lw := newLineWriter(&b, t.fixed.Family)
		write(lw)
		if err := lw.flush(); err != nil || b.Len() == 0 {
			return nil, err
		}
		writeOps(lw, commitMark())
		err := lw.flush()
		return b.Bytes(), err
	}
	if have == nil && stageAbove > 0 && t.objects() > stageAbove {
		var out [][]byte
		for _, stage := range t.stages() {
			b, err := text(stage)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	}
	b, err := text(func(lw *lineWriter) { writePartial(lw, have, t, minimal) })
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return [][]byte{b}, nil
}

// commitMark adds CommitChain and deletes it: a change to the ruleset that leaves
// nothing behind.
func commitMark() []Op {
	c := &knftables.Chain{Name: CommitChain}
	return []Op{{"add", c}, {"delete", c}}
}

// SureChange reports whether an nft transaction is sure to change the ruleset when it
// commits: it adds a rule (always a new one) or deletes something (which fails if it is
// not there), as every transaction of Transactions does (its CommitChain). A
// transaction that only adds chains, sets or elements, or flushes, may find the kernel
// already as it wants it and commit nothing.
func SureChange(tx []byte) bool {
	for len(tx) > 0 {
		line := tx
		if i := bytes.IndexByte(tx, '\n'); i >= 0 {
			line, tx = tx[:i], tx[i+1:]
		} else {
			tx = nil
		}
		if bytes.HasPrefix(line, []byte("add rule ")) || bytes.HasPrefix(line, []byte("delete ")) {
			return true
		}
	}
	return false
}
