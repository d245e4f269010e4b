package plan

import (
	"bytes"

	"github.com/svcgen/svcgen/nftables/syntax"
)

// Load says how a change is cut into "nft -f" transactions and how each ends: apply's
// protocol, not the sync's.
type Load struct {
	// StageAbove, when more than zero, loads a whole table onto a node without one as
	// the five transactions of rules.Table.Stages when it has more objects than this:
	// faster for a large table, but not atomic (see rules.Options.Stages). A table that
	// replaces one on the node is always one transaction.
	StageAbove int
	// MarkCommits ends each transaction with the commit mark (syntax.Writer.CommitMark):
	// nf_tables commits a transaction, and moves the ruleset generation by one, only
	// when it holds at least one change; an "add element" or "add chain" of an object
	// that is already there, or a "flush" of something empty, is none. The delete of a
	// chain the same transaction added always is one, so every transaction moves the
	// generation by exactly one, whatever the kernel holds (Tx.Counts.Sure; apply
	// relies on it, see apply/generation.go).
	MarkCommits bool
}

// Tx is one transaction of a load, written, and what it writes by kind.
type Tx struct {
	Text   []byte
	Counts syntax.Counts
}

// Transactions writes the change as the transactions of a load, in order: none for
// an empty change; the whole table in one, or staged (see Load.StageAbove); a partial
// sync in one.
func (c *Change) Transactions(l Load) ([]Tx, error) {
	if c.Empty() {
		return nil, nil
	}
	write := []func(*syntax.Writer){c.Write}
	if c.Full && c.noTable && l.StageAbove > 0 && c.table.Objects() > l.StageAbove {
		write = c.table.Stages()
	}
	var out []Tx
	for _, stage := range write {
		var b bytes.Buffer
		w := syntax.NewWriter(&b, c.table.Family())
		stage(w)
		if err := w.Flush(); err != nil || b.Len() == 0 {
			if err != nil {
				return nil, err
			}
			continue // a stage with nothing to load is no transaction
		}
		if l.MarkCommits {
			w.CommitMark()
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
		out = append(out, Tx{Text: b.Bytes(), Counts: w.Counts()})
	}
	return out, nil
}
