package rules

import (
	"cmp"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// Table is the table svcgen wants, planned but not made: the fixed part as a small
// State, and each service port as its plan, from which the port's rules and elements
// are made as they are needed. A 10,000-Service table holds 200,000 rules; Write makes
// each when its line is due and keeps none, so only names and plans stay in memory.
type Table struct {
	b      *builder
	fixed  *syntax.State
	ports  []*portPlan
	chains []chainRef       // every chain, by name
	sets   []*knftables.Set // every set (fixed and affinity), by name
	maps   []*knftables.Map // by name
}

// chainRef is one chain of the table: a fixed chain with its rules, or a port's chain.
type chainRef struct {
	name  string
	fixed *syntax.Chain
	pp    *portPlan
	pc    portChain
}

// NewTable plans the table of a service map: the fixed part, a plan per service
// port, and every chain and set by name, which is the order they are written in.
func NewTable(sm *ir.ServiceMap) *Table {
	return newTable(sm, sm.Services)
}

// NewPart plans the part of a service map's table that the Services keys names
// ("namespace/name") write, with the whole fixed part: their chains, affinity sets and
// elements, as NewTable's table holds them (a key the map has no Service of writes
// nothing). A sync that knows which Services changed compares only these parts of
// two tables (see nftables/plan.Since).
func NewPart(sm *ir.ServiceMap, keys []string) *Table {
	var services []*ir.Service
	for _, key := range keys {
		if s := sm.Service(key); s != nil {
			services = append(services, s)
		}
	}
	slices.SortFunc(services, func(x, y *ir.Service) int { // the map's order
		return cmp.Or(strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	return newTable(sm, slices.Compact(services))
}

func newTable(sm *ir.ServiceMap, services []*ir.Service) *Table {
	b := newBuilder(sm)
	t := &Table{b: b, fixed: b.fixed()}
	n := len(t.fixed.Chains)
	for _, s := range services {
		for _, p := range s.Ports {
			n += len(p.Reachable) + 4
		}
	}
	t.chains = make([]chainRef, 0, n)
	for name, c := range t.fixed.Chains {
		t.chains = append(t.chains, chainRef{name: name, fixed: c})
	}
	for _, s := range t.fixed.Sets {
		t.sets = append(t.sets, s.Set)
	}
	for _, m := range t.fixed.Maps {
		t.maps = append(t.maps, m.Map)
	}
	for _, s := range services {
		for _, p := range s.Ports {
			pp := b.plan(p)
			t.ports = append(t.ports, pp)
			pp.eachChain(func(name string, c portChain) {
				t.chains = append(t.chains, chainRef{name: name, pp: pp, pc: c})
			})
			b.eachAffinitySet(pp, func(s *knftables.Set) { t.sets = append(t.sets, s) })
		}
	}
	slices.SortFunc(t.chains, func(x, y chainRef) int { return strings.Compare(x.name, y.name) })
	slices.SortFunc(t.sets, func(x, y *knftables.Set) int { return strings.Compare(x.Name, y.Name) })
	slices.SortFunc(t.maps, func(x, y *knftables.Map) int { return strings.Compare(x.Name, y.Name) })
	return t
}

// Family is the table's family.
func (t *Table) Family() knftables.Family { return t.b.family }

// Fixed is everything of the table that is no Service's: the table, base and fixed
// chains with their rules, the fixed sets and maps (nodeport-ips with its elements).
// It is the table's own: not to be changed.
func (t *Table) Fixed() *syntax.State { return t.fixed }

// ServiceChains calls f with each of the Services' chains by name, and a function
// that makes its rules.
func (t *Table) ServiceChains(f func(name string, rules func(syntax.RuleSink))) {
	for _, c := range t.chains {
		if c.fixed == nil {
			f(c.name, func(out syntax.RuleSink) { t.rules(c, out) })
		}
	}
}

// AffinitySets are the Services' sets by name.
func (t *Table) AffinitySets() []*knftables.Set {
	var out []*knftables.Set
	for _, s := range t.sets {
		if t.fixed.Sets[s.Name] == nil {
			out = append(out, s)
		}
	}
	return out
}

// rules makes a chain's rules.
func (t *Table) rules(c chainRef, out syntax.RuleSink) {
	if c.fixed == nil {
		t.b.chainRules(c.pp, c.pc, out)
		return
	}
	for _, r := range c.fixed.Rules {
		out(r.Chain, []byte(r.Rule), ptrString(r.Comment))
	}
}

// Elements makes the elements of a fixed set or map: its own (nodeport-ips), then
// every port's in service-map order.
func (t *Table) Elements(name string, out func(*knftables.Element)) {
	if c := t.fixed.Container(name); c != nil {
		for _, e := range c.Elements {
			out(e)
		}
	}
	t.portElements(name, out)
}

// portElements makes every port's elements of a set or map, in service-map order.
func (t *Table) portElements(name string, out func(*knftables.Element)) {
	if name == syntax.HairpinSet {
		out = once(out) // two Services may share an endpoint (and so its element)
	}
	t.PortElements(name, out)
}

// PortElements makes the elements each service port writes into one of
// ElementContainers, port by port in service-map order, an element two ports write
// once for each (the table holds it once).
func (t *Table) PortElements(name string, out func(*knftables.Element)) {
	if !slices.Contains(ElementContainers, name) {
		return
	}
	for _, pp := range t.ports {
		t.b.elements(pp, name, out)
	}
}

// once passes on each element the first time its key comes.
func once(out func(*knftables.Element)) func(*knftables.Element) {
	seen := map[string]bool{}
	return func(e *knftables.Element) {
		if k := strings.Join(e.Key, " . "); !seen[k] {
			seen[k] = true
			out(e)
		}
	}
}

// State makes every object: the table as a State (a new one: the table can still be
// written after).
func (t *Table) State() *syntax.State {
	st := t.b.fixed()
	for _, c := range t.chains {
		if c.fixed == nil {
			st.AddChain(&knftables.Chain{Name: c.name})
			t.rules(c, st.AddRule)
		}
	}
	for _, s := range t.sets {
		st.AddSet(s)
	}
	for _, name := range ElementContainers {
		t.portElements(name, st.AddElement)
	}
	return st
}

// WriteScript writes the whole table as one transaction that replaces an older one.
func (t *Table) WriteScript(w *syntax.Writer) {
	w.Ops(syntax.ReplaceTable(t.fixed.Table))
	t.write(w)
}

// write writes the table as "add" lines in the order of State.Objects (knftables'
// Fake.Dump): table; chains, sets and maps by name; rules chain by chain; elements of
// each set and map. Rules and elements are made as they are written.
func (t *Table) write(w *syntax.Writer) {
	w.Op(syntax.Add, t.fixed.Table)
	for _, c := range t.chains {
		t.writeChain(w, c)
	}
	t.writeContainers(w)
	for _, c := range t.chains {
		t.rules(c, w.Rule)
	}
	t.writeElements(w)
}

func (t *Table) writeChain(w *syntax.Writer, c chainRef) {
	if c.fixed != nil {
		w.Op(syntax.Add, c.fixed.Obj)
	} else {
		w.Chain(c.name)
	}
}

func (t *Table) writeContainers(w *syntax.Writer) {
	for _, s := range t.sets {
		w.Op(syntax.Add, s)
	}
	for _, m := range t.maps {
		w.Op(syntax.Add, m)
	}
}

// writeElements writes the elements of every set, then every map, by name. Only fixed
// sets and maps have elements (affinity sets are filled by the kernel).
func (t *Table) writeElements(w *syntax.Writer) {
	t.eachElement(w.Element)
}

func (t *Table) eachElement(out func(*knftables.Element)) {
	for _, s := range t.sets {
		if t.fixed.Sets[s.Name] != nil {
			t.Elements(s.Name, out)
		}
	}
	for _, m := range t.maps {
		t.Elements(m.Name, out)
	}
}

// isBase reports a base chain (one hooked into netfilter).
func (c chainRef) isBase() bool { return c.fixed != nil && c.fixed.Obj.Hook != nil }

// Stages are the table as five transactions, in load order, each a function that
// writes its operations:
//
//  1. the table (replacing an older one) with its regular chains, sets and maps;
//  2. the rules of the regular chains, up to the first one with an anonymous set or
//     map in each chain;
//  3. those rules and the ones after them (numgen vmaps, source-range sets);
//  4. every set and map element;
//  5. the base chains with their rules, which hook the table into netfilter.
//
// Each stage refers only to objects of earlier stages, rules keep their order in
// their chain, and no packet meets the table before the last stage. Rules with
// anonymous sets are apart because nft 1.0.6 loads a transaction that mixes many of
// them with many other rules several times slower than the two apart (see docs/compile.md, "nftables mode").
func (t *Table) Stages() []func(w *syntax.Writer) {
	return []func(w *syntax.Writer){
		func(w *syntax.Writer) {
			w.Ops(syntax.ReplaceTable(t.fixed.Table))
			w.Op(syntax.Add, t.fixed.Table)
			for _, c := range t.chains {
				if !c.isBase() {
					t.writeChain(w, c)
				}
			}
			t.writeContainers(w)
		},
		func(w *syntax.Writer) { t.writeRegularRules(w, false) },
		func(w *syntax.Writer) { t.writeRegularRules(w, true) },
		t.writeElements,
		func(w *syntax.Writer) {
			for _, c := range t.chains {
				if c.isBase() {
					t.writeChain(w, c)
				}
			}
			for _, c := range t.chains {
				if c.isBase() {
					t.rules(c, w.Rule)
				}
			}
		},
	}
}

// Objects counts the table's objects (table, chains, sets, maps, rules, elements),
// making every rule and element but keeping none.
func (t *Table) Objects() int {
	n := 1 + len(t.chains) + len(t.sets) + len(t.maps)
	for _, c := range t.chains {
		t.rules(c, func(string, []byte, string) { n++ })
	}
	t.eachElement(func(*knftables.Element) { n++ })
	return n
}

// writeRegularRules writes the rules of the regular chains before the first rule with
// an anonymous set in each chain (late false), or that rule and the rest (late true).
func (t *Table) writeRegularRules(w *syntax.Writer, late bool) {
	for _, c := range t.chains {
		if c.isBase() {
			continue
		}
		seen := false
		t.rules(c, func(chain string, text []byte, comment string) {
			seen = seen || syntax.HasAnonymousSet(text)
			if seen == late {
				w.Rule(chain, text, comment)
			}
		})
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
