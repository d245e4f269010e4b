package nft

import (
	"bytes"

	"github.com/svcgen/svcgen/ir"
)

// Transactions are the "nft -f" texts that load sm's table over prev, the kube-proxy
// tables on the node now (nil or without a table of sm's family: none there): with a
// table there, one transaction with only what changed (kube-proxy's partial sync,
// Write with Previous); without, the whole table in one transaction, or, when it has
// more than stageAbove objects (0: never), as the five transactions of Stages, faster
// for a large table but not atomic (see Options.Stages). A partial sync that finds the
// table different outside the Services writes the whole table, in one transaction.
func Transactions(sm *ir.ServiceMap, prev *Ruleset, stageAbove int) ([][]byte, error) {
	st := Build(sm)
	var have *State
	if prev != nil {
		have = prev.Tables[st.Family]
	}
	if have == nil && stageAbove > 0 && len(st.Objects()) > stageAbove {
		var out [][]byte
		for _, ops := range Stages(st) {
			var b bytes.Buffer
			if err := writeOps(&b, st.Family, ops); err != nil {
				return nil, err
			}
			out = append(out, b.Bytes())
		}
		return out, nil
	}
	var b bytes.Buffer
	var err error
	if have == nil {
		err = writeScript(&b, st)
	} else {
		err = writeOps(&b, st.Family, partialOps(have, st))
	}
	if err != nil || b.Len() == 0 {
		return nil, err
	}
	return [][]byte{b.Bytes()}, nil
}
