package plan

import (
	"maps"
	"slices"

	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// target is the table a sync goes to, as the sync reads it: everything that is no
// Service's (fixed), then the Services' chains and affinity sets by name, and the
// elements of each set and map. A planned table gives one without making more than
// one chain's rules at a time (fromTable), a State from its objects (fromState).
type target struct {
	fixed    *syntax.State
	chains   []targetChain
	sets     []*knftables.Set
	elements func(container string, out func(*knftables.Element))
}

// targetChain is one of the Services' chains, and how to make its rules.
type targetChain struct {
	name  string
	rules func(syntax.RuleSink)
}

func fromTable(t *rules.Table) *target {
	w := &target{fixed: t.Fixed(), sets: t.AffinitySets(), elements: t.Elements}
	t.ServiceChains(func(name string, rules func(syntax.RuleSink)) {
		w.chains = append(w.chains, targetChain{name, rules})
	})
	return w
}

func fromState(st *syntax.State) *target {
	w := &target{fixed: st, elements: func(name string, out func(*knftables.Element)) {
		if c := st.Container(name); c != nil {
			for _, e := range c.Elements {
				out(e)
			}
		}
	}}
	for _, name := range slices.Sorted(maps.Keys(st.Chains)) {
		if c := st.Chains[name]; syntax.IsServiceChain(name) {
			w.chains = append(w.chains, targetChain{name, func(out syntax.RuleSink) {
				for _, r := range c.Rules {
					out(r.Chain, []byte(r.Rule), ptrString(r.Comment))
				}
			}})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.Sets)) {
		if syntax.IsAffinitySet(name) {
			w.sets = append(w.sets, st.Sets[name].Set)
		}
	}
	return w
}

// changes are the Services' chains and affinity sets that differ between two tables.
type changes struct {
	owners []string        // the Services ("namespace/name") with any of them, sorted
	chains map[string]bool // wanted chains that are new or whose rules differ
	sets   map[string]bool // wanted affinity sets that are new or defined otherwise
}

// changedParts compares the Services' chains and affinity sets of want with have's,
// rule by rule as they are made.
func changedParts(have *syntax.State, want *target) changes {
	d := changes{chains: map[string]bool{}, sets: map[string]bool{}}
	owners := map[string]bool{}
	for _, c := range want.chains {
		p := have.Chains[c.name]
		same, i := p != nil, 0
		c.rules(func(_ string, text []byte, comment string) {
			if same = same && i < len(p.Rules) && syntax.SameRule(p.Rules[i], text, comment); same {
				i++
			}
		})
		if !same || i != len(p.Rules) {
			d.chains[c.name] = true
			owners[syntax.OwnerOf(c.name)] = true
		}
	}
	for _, s := range want.sets {
		if p := have.Sets[s.Name]; p == nil || !syntax.SameSet(p.Set, s) {
			d.sets[s.Name] = true
			owners[syntax.OwnerOf(s.Name)] = true
		}
	}
	d.owners = slices.Sorted(maps.Keys(owners))
	return d
}

// sameFixed compares everything that is no Service's: base and fixed chains with
// their rules, the definitions of sets and maps, the node-port addresses.
func sameFixed(have, want *syntax.State) bool {
	for _, st := range [][2]*syntax.State{{have, want}, {want, have}} {
		for name, c := range st[0].Chains {
			o := st[1].Chains[name]
			if !syntax.IsServiceChain(name) && (o == nil || !syntax.SameChain(want.Family, o.Obj, c.Obj) || !syntax.SameRules(o.Rules, c.Rules)) {
				return false
			}
		}
		for name, s := range st[0].Sets {
			o := st[1].Sets[name]
			if !syntax.IsAffinitySet(name) && (o == nil || !syntax.SameSet(o.Set, s.Set)) {
				return false
			}
		}
		for name, m := range st[0].Maps {
			if o := st[1].Maps[name]; o == nil || !syntax.SameMap(o.Map, m.Map) {
				return false
			}
		}
	}
	if p, w := have.Sets[syntax.NodePortIPsSet], want.Sets[syntax.NodePortIPsSet]; p != nil && w != nil {
		return slices.EqualFunc(p.Elements, w.Elements, func(a, b *knftables.Element) bool { return slices.Equal(a.Key, b.Key) })
	}
	return true
}

// elementChanges reconciles the service containers as kube-proxy's nftElementStorage
// does: a new key is added; a key whose value changed is deleted and added; a key no
// Service wants any more is deleted; each key once, however many ports write it (the
// ports of a Service share its cluster IP). With rest (have and want are the parts of
// the Services that changed), a key the other Services write is in both tables, and
// wanted.
func elementChanges(have *syntax.State, want *target, rest restKeys) (del, add []*knftables.Element) {
	for _, name := range rules.ElementContainers {
		p := have.Container(name)
		old := map[string]string{}
		if p != nil {
			for _, e := range p.Elements {
				old[syntax.JoinKey(e.Key)] = syntax.JoinKey(e.Value)
			}
		}
		elsewhere := func(string) bool { return false }
		if rest != nil {
			elsewhere = func(k string) bool { return rest(name, k) }
		}
		seen := map[string]bool{}
		want.elements(name, func(e *knftables.Element) {
			k, v := syntax.JoinKey(e.Key), syntax.JoinKey(e.Value)
			seen[k] = true
			was, exists := old[k]
			switch {
			case !exists && elsewhere(k):
				// In the table already, another Service's (only sets share keys: see Since).
			case !exists:
				add = append(add, e)
			case was != v:
				del = append(del, keyOnly(e))
				add = append(add, e)
			}
			old[k] = v
		})
		if p != nil {
			for _, e := range p.Elements {
				if k := syntax.JoinKey(e.Key); !seen[k] && !elsewhere(k) {
					del = append(del, keyOnly(e))
					seen[k] = true // deleted once
				}
			}
		}
	}
	return del, add
}

// keyOnly is the element as "delete element" names it.
func keyOnly(e *knftables.Element) *knftables.Element {
	return &knftables.Element{Set: e.Set, Map: e.Map, Key: e.Key}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
