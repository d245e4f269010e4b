package plan

import (
	"reflect"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// Keys counts, in each of the service sets and maps (rules.ElementContainers), the
// service ports that write each element key into a table. The chains and affinity
// sets a Service writes carry its name (syntax.OwnerOf); these containers are the
// table's one shared part, so a sync that looks at the changed Services only (Since)
// needs to know which keys the others write. Kept beside the table it counts, and
// moved with it (Change.MoveKeys), it costs one walk of the elements per table
// loaded whole.
type Keys struct {
	n map[string]map[string]int // container, key: how many ports write it
	// shared counts the keys more than one port writes into a map. (Keys of a set are
	// shared as a matter of course: the ports of a Service share its cluster IP, two
	// Services on one endpoint its hairpin element. A shared map key is an input the
	// compiler lets through, two Services on one external IP and port: see Since.)
	shared int
}

// NewKeys counts the keys of a table.
func NewKeys(t *rules.Table) *Keys {
	k := &Keys{n: make(map[string]map[string]int, len(rules.ElementContainers))}
	for _, name := range rules.ElementContainers {
		k.n[name] = map[string]int{}
	}
	k.add(countKeys(t), 1)
	return k
}

// partKeys are the keys of a part of a table, counted per container.
type partKeys map[string]map[string]int

func countKeys(t *rules.Table) partKeys {
	out := partKeys{}
	for _, name := range rules.ElementContainers {
		m := map[string]int{}
		t.PortElements(name, func(e *knftables.Element) { m[syntax.JoinKey(e.Key)]++ })
		out[name] = m
	}
	return out
}

// add adds (sign 1) or takes away (sign -1) a part's counts.
func (k *Keys) add(part partKeys, sign int) {
	for name, m := range part {
		have := k.n[name]
		for key, n := range m {
			before := have[key]
			after := before + sign*n
			if after == 0 {
				delete(have, key)
			} else {
				have[key] = after
			}
			if rules.IsMap(name) {
				k.shared += b2i(after > 1) - b2i(before > 1)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// restKeys says whether the Services outside a change's parts write a key into a
// container.
type restKeys func(container, key string) bool

// Since plans the sync from the table of the service map prev, as loaded (keys are
// its counts), to the table of sm, when only the Services changed names
// ("namespace/name") may differ between the two maps (compiler.Session's hint, or
// ir.ChangedServices). It plans exactly the change Partial plans from prev's whole
// table, minimal or not, from the changed Services' parts of the two tables only
// (rules.NewPart): their chains and affinity sets are theirs by name, and the keys
// they write into the shared sets and maps are weighed against keys.
//
// A key of a set that another Service writes too is in the table before and after:
// Partial adds a key no port wrote, and deletes a key no port writes any more, each
// once, so only the changed Services' keys can be added or deleted, in the order of
// their parts. Since returns false, and the caller plans the whole table, when its
// change would not be Partial's: a setting of the maps or the fixed part of the table
// differs (every rule may depend on them), or a key of a map is written by more than
// one port before or after (Partial's change then depends on which one the table
// lists last).
func Since(prev *ir.ServiceMap, keys *Keys, sm *ir.ServiceMap, changed []string, minimal bool) (*Change, bool) {
	if keys.shared > 0 || !sameSettings(prev, sm) {
		return nil, false
	}
	from, to := rules.NewPart(prev, changed), rules.NewPart(sm, changed)
	oldKeys, newKeys := countKeys(from), countKeys(to)
	for name, m := range newKeys {
		if !rules.IsMap(name) {
			continue
		}
		for key, n := range m {
			if keys.n[name][key]-oldKeys[name][key]+n > 1 {
				return nil, false
			}
		}
	}
	rest := func(name, key string) bool { return keys.n[name][key]-oldKeys[name][key] > 0 }
	c := &Change{table: to, moved: [2]partKeys{oldKeys, newKeys}}
	if !partial(c, from.State(), fromTable(to), minimal, rest) {
		return nil, false
	}
	return c, true
}

// sameSettings: the two maps differ in their Services only (every rule may depend on
// the rest).
func sameSettings(a, b *ir.ServiceMap) bool {
	x, y := *a, *b
	x.Services, y.Services = nil, nil
	return reflect.DeepEqual(x, y)
}

// MoveKeys makes the counts of the table a change planned by Since starts from
// those of the table it leaves (once it is loaded). It reports false for a change
// planned otherwise, which leaves keys as they were.
func (c *Change) MoveKeys(keys *Keys) bool {
	if c.moved[0] == nil {
		return false
	}
	keys.add(c.moved[0], -1)
	keys.add(c.moved[1], 1)
	return true
}
