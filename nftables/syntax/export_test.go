package syntax

import (
	"context"
	"strings"

	"sigs.k8s.io/knftables"
)

// KnftablesRun runs a script's operations, as readOp reads them, through knftables'
// Fake in one transaction and returns its Dump: the reference Run is held to where
// the Fake models the kernel.
func KnftablesRun(script string) (string, error) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	tx := fake.NewTransaction()
	maps := map[string]bool{}
	for l := range strings.Lines(script) {
		op, ok, err := readOp(l)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		do := map[string]func(knftables.Object){Add: tx.Add, Flush: tx.Flush, Delete: tx.Delete}[op.verb]
		if m, isMap := op.obj.(*knftables.Map); isMap {
			maps[m.Name] = true
		}
		if op.obj != nil {
			do(op.obj)
		}
		for _, e := range op.elems {
			if maps[e.Set] {
				e = &knftables.Element{Map: e.Set, Key: e.Key, Value: e.Value, Comment: e.Comment}
			}
			do(e)
		}
	}
	if err := fake.Run(context.Background(), tx); err != nil {
		return "", err
	}
	return fake.Dump(), nil
}
