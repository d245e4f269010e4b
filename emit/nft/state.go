package nft

import (
	"sort"

	"sigs.k8s.io/knftables"
)

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

func newState(family knftables.Family) *State {
	return &State{
		Family: family,
		Table:  &knftables.Table{Comment: knftables.PtrTo("rules for kube-proxy")},
		Chains: map[string]*Chain{},
		Sets:   map[string]*Container{},
		Maps:   map[string]*Container{},
	}
}

// chain adds (once) and returns a chain.
func (s *State) chain(c *knftables.Chain) *Chain {
	if ch := s.Chains[c.Name]; ch != nil {
		return ch
	}
	ch := &Chain{Obj: c}
	s.Chains[c.Name] = ch
	return ch
}

// rule appends a rule to a chain that must exist.
func (s *State) rule(chain, rule string, comment *string) {
	ch := s.chain(&knftables.Chain{Name: chain})
	ch.Rules = append(ch.Rules, &knftables.Rule{Chain: chain, Rule: rule, Comment: comment})
}

// addRule is a ruleSink that keeps the rules.
func (s *State) addRule(chain string, text []byte, comment string) {
	var c *string
	if comment != "" {
		c = &comment
	}
	s.rule(chain, string(text), c)
}

func (s *State) set(set *knftables.Set) *Container {
	if c := s.Sets[set.Name]; c != nil {
		return c
	}
	c := &Container{Set: set}
	s.Sets[set.Name] = c
	return c
}

func (s *State) addMap(m *knftables.Map) *Container {
	c := &Container{Map: m}
	s.Maps[m.Name] = c
	return c
}

// element adds an element to a set or map.
func (s *State) element(e *knftables.Element) {
	var c *Container
	if e.Set != "" {
		c = s.Sets[e.Set]
	} else {
		c = s.Maps[e.Map]
	}
	c.Elements = append(c.Elements, e)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Objects lists the state in the order knftables' Fake.Dump prints it (and upstream's
// test expectations list it): table; chains, sets and maps by name; then the rules
// chain by chain; then the elements of each set and map. Every object a line refers
// to comes before it, so an "nft -f" of this order never refers forward.
func (s *State) Objects() []knftables.Object {
	var out []knftables.Object
	out = append(out, s.Table)
	chains, sets, maps := sortedKeys(s.Chains), sortedKeys(s.Sets), sortedKeys(s.Maps)
	for _, n := range chains {
		out = append(out, s.Chains[n].Obj)
	}
	for _, n := range sets {
		out = append(out, s.Sets[n].Set)
	}
	for _, n := range maps {
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
	for _, n := range maps {
		for _, e := range s.Maps[n].Elements {
			out = append(out, e)
		}
	}
	return out
}
