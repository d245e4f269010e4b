package syntax

import (
	"maps"
	"slices"

	"sigs.k8s.io/knftables"
)

// Ruleset is every kube-proxy table of a file, or of a node, by family.
type Ruleset struct {
	Tables map[knftables.Family]*State
}

// Of is a ruleset of one table (none when st is nil).
func Of(st *State) *Ruleset {
	rs := &Ruleset{Tables: map[knftables.Family]*State{}}
	if st != nil {
		rs.Tables[st.Family] = st
	}
	return rs
}

// State is one family's kube-proxy table as objects: what svcgen wants, or what an
// earlier script left. Object text is knftables', so svcgen writes what kube-proxy
// writes.
type State struct {
	Family knftables.Family
	Table  *knftables.Table
	Chains map[string]*Chain
	Sets   map[string]*Container
	Maps   map[string]*Container
}

// Chain is a chain with its rules in order.
type Chain struct {
	Obj   *knftables.Chain
	Rules []*knftables.Rule
}

// Container is a set or a map with its elements in insertion order.
type Container struct {
	Set      *knftables.Set
	Map      *knftables.Map
	Elements []*knftables.Element
}

// NewState is an empty kube-proxy table of a family, with kube-proxy's comment.
func NewState(family knftables.Family) *State {
	return &State{
		Family: family,
		Table:  &knftables.Table{Comment: knftables.PtrTo(TableComment)},
		Chains: map[string]*Chain{},
		Sets:   map[string]*Container{},
		Maps:   map[string]*Container{},
	}
}

// AddChain adds a chain unless it is there, and returns the chain.
func (s *State) AddChain(c *knftables.Chain) *Chain {
	return addOnce(s.Chains, c.Name, func() *Chain { return &Chain{Obj: c} })
}

// addOnce is m[name], made and kept first when there is none.
func addOnce[V any](m map[string]*V, name string, newV func() *V) *V {
	v := m[name]
	if v == nil {
		v = newV()
		m[name] = v
	}
	return v
}

// AddRule appends a rule to a chain, adding the chain if need be; comment "" is none.
// It is a RuleSink: text is copied.
func (s *State) AddRule(chain string, text []byte, comment string) {
	ch := s.AddChain(&knftables.Chain{Name: chain})
	r := &knftables.Rule{Chain: chain, Rule: string(text)}
	if comment != "" {
		r.Comment = &comment
	}
	ch.Rules = append(ch.Rules, r)
}

// AddSet adds a set unless it is there, and returns it.
func (s *State) AddSet(set *knftables.Set) *Container {
	return addOnce(s.Sets, set.Name, func() *Container { return &Container{Set: set} })
}

// AddMap adds a map (replacing one of that name) and returns it.
func (s *State) AddMap(m *knftables.Map) *Container {
	c := &Container{Map: m}
	s.Maps[m.Name] = c
	return c
}

// AddElement adds an element to its set or map, which must be there.
func (s *State) AddElement(e *knftables.Element) {
	var c *Container
	if e.Set != "" {
		c = s.Sets[e.Set]
	} else {
		c = s.Maps[e.Map]
	}
	c.Elements = append(c.Elements, e)
}

// Container is the set or map of that name, nil if there is none.
func (s *State) Container(name string) *Container {
	if c := s.Sets[name]; c != nil {
		return c
	}
	return s.Maps[name]
}

// Name is the set's or map's name.
func (c *Container) Name() string {
	if c.Set != nil {
		return c.Set.Name
	}
	return c.Map.Name
}

// Object is the set or the map.
func (c *Container) Object() knftables.Object {
	if c.Set != nil {
		return c.Set
	}
	return c.Map
}

// sortedKeys are a map's keys in order: the order objects of a kind are written in.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Objects lists the state in the order knftables' Fake.Dump prints it (and upstream's
// test expectations list it): table; chains, sets and maps by name; then the rules
// chain by chain; then the elements of each set and map. Every object a line refers
// to comes before it, so an "nft -f" of this order never refers forward.
func (s *State) Objects() []knftables.Object {
	var out []knftables.Object
	out = append(out, s.Table)
	chains, sets, mapNames := sortedKeys(s.Chains), sortedKeys(s.Sets), sortedKeys(s.Maps)
	for _, n := range chains {
		out = append(out, s.Chains[n].Obj)
	}
	for _, n := range sets {
		out = append(out, s.Sets[n].Set)
	}
	for _, n := range mapNames {
		out = append(out, s.Maps[n].Map)
	}
	for _, n := range chains {
		for _, r := range s.Chains[n].Rules {
			out = append(out, r)
		}
	}
	for _, n := range sets {
		for _, e := range s.Sets[n].Elements {
			out = append(out, e)
		}
	}
	for _, n := range mapNames {
		for _, e := range s.Maps[n].Elements {
			out = append(out, e)
		}
	}
	return out
}
