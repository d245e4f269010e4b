package nft

import (
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// table is the table svcgen wants, planned but not made: the fixed part as a small
// State, and each service port as its plan, from which the port's rules and elements
// are made as they are needed. A 10,000-Service table holds 200,000 rules; Write makes
// each when its line is due and keeps none, so only names and plans stay in memory.
type table struct {
	b      *builder
	fixed  *State
	ports  []*portPlan
	chains []chainRef       // every chain, by name
	sets   []*knftables.Set // every set (fixed and affinity), by name
	maps   []*knftables.Map // by name
}

// chainRef is one chain of the table: a fixed chain with its rules, or a port's chain.
type chainRef struct {
	name  string
	fixed *Chain
	pp    *portPlan
	pc    portChain
}

// newTable plans the table of a service map: the fixed part, a plan per service
// port, and every chain and set by name, which is the order they are written in.
func newTable(sm *ir.ServiceMap) *table {
	b := newBuilder(sm)
	t := &table{b: b, fixed: b.fixed()}
	n := len(t.fixed.Chains)
	for _, s := range sm.Services {
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
	for _, s := range sm.Services {
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

// rules makes a chain's rules.
func (t *table) rules(c chainRef, out ruleSink) {
	if c.fixed == nil {
		t.b.chainRules(c.pp, c.pc, out)
		return
	}
	for _, r := range c.fixed.Rules {
		out(r.Chain, []byte(r.Rule), ptrString(r.Comment))
	}
}

// elements makes the elements of a fixed set or map: its own (nodeport-ips), then
// every port's in service-map order.
func (t *table) elements(name string, out func(*knftables.Element)) {
	for _, e := range container(t.fixed, name).Elements {
		out(e)
	}
	if !slices.Contains(elementContainers, name) {
		return
	}
	for _, pp := range t.ports {
		t.b.elements(pp, name, out)
	}
}

// wanted is the table as a partial sync reads it (see partialOps): its Services'
// rules are made when they are asked for.
func (t *table) wanted() *wanted {
	w := &wanted{fixed: t.fixed, elements: t.elements}
	for _, c := range t.chains {
		if c.fixed == nil {
			w.chains = append(w.chains, wantedChain{c.name, func(out ruleSink) { t.rules(c, out) }})
		}
	}
	for _, s := range t.sets {
		if t.fixed.Sets[s.Name] == nil {
			w.sets = append(w.sets, s)
		}
	}
	return w
}

// state makes every object: the table as a State (a new one: the table can still be
// written after).
func (t *table) state() *State {
	st := t.b.fixed()
	for _, c := range t.chains {
		if c.fixed == nil {
			st.chain(&knftables.Chain{Name: c.name})
			t.rules(c, st.addRule)
		}
	}
	for _, s := range t.sets {
		st.set(s)
	}
	for _, name := range elementContainers {
		for _, pp := range t.ports {
			t.b.elements(pp, name, st.element)
		}
	}
	return st
}

// write writes the table as "add" lines in the order of State.Objects (knftables'
// Fake.Dump): table; chains, sets and maps by name; rules chain by chain; elements of
// each set and map. Rules and elements are made as they are written.
func (t *table) write(lw *lineWriter) {
	lw.op("add", t.fixed.Table)
	for _, c := range t.chains {
		t.writeChain(lw, c)
	}
	t.writeContainers(lw)
	for _, c := range t.chains {
		t.rules(c, lw.rule)
	}
	t.writeElements(lw)
}

func (t *table) writeChain(lw *lineWriter, c chainRef) {
	if c.fixed != nil {
		lw.op("add", c.fixed.Obj)
	} else {
		lw.chain(c.name)
	}
}

func (t *table) writeContainers(lw *lineWriter) {
	for _, s := range t.sets {
		lw.op("add", s)
	}
	for _, m := range t.maps {
		lw.op("add", m)
	}
}

// writeElements writes the elements of every set, then every map, by name. Only fixed
// sets and maps have elements (affinity sets are filled by the kernel).
func (t *table) writeElements(lw *lineWriter) {
	for _, s := range t.sets {
		if t.fixed.Sets[s.Name] != nil {
			t.elements(s.Name, lw.element)
		}
	}
	for _, m := range t.maps {
		t.elements(m.Name, lw.element)
	}
}

// isBase reports a base chain (one hooked into netfilter).
func (c chainRef) isBase() bool { return c.fixed != nil && c.fixed.Obj.Hook != nil }

// writeStages writes the table as the five transactions of Options.Stages, in load
// order:
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
// them with many other rules several times slower than the two apart (see README).
func (t *table) writeStages(lw *lineWriter) {
	lw.raw(stageHeader)
	for i, stage := range t.stages() {
		tag := "SVCGEN_STAGE_" + strconv.Itoa(i+1)
		lw.raw("nft -f - <<'" + tag + "'\n")
		stage(lw)
		lw.raw(tag + "\n")
	}
}

// stages are the transactions of writeStages, each a function that writes its
// operations.
func (t *table) stages() []func(lw *lineWriter) {
	return []func(lw *lineWriter){
		func(lw *lineWriter) {
			writeOps(lw, replaceTable(t.fixed.Table))
			lw.op("add", t.fixed.Table)
			for _, c := range t.chains {
				if !c.isBase() {
					t.writeChain(lw, c)
				}
			}
			t.writeContainers(lw)
		},
		func(lw *lineWriter) { t.writeRegularRules(lw, false) },
		func(lw *lineWriter) { t.writeRegularRules(lw, true) },
		t.writeElements,
		func(lw *lineWriter) {
			for _, c := range t.chains {
				if c.isBase() {
					t.writeChain(lw, c)
				}
			}
			for _, c := range t.chains {
				if c.isBase() {
					t.rules(c, lw.rule)
				}
			}
		},
	}
}

// objects counts the table's objects (table, chains, sets, maps, rules, elements),
// making every rule and element but keeping none.
func (t *table) objects() int {
	n := 1 + len(t.chains) + len(t.sets) + len(t.maps)
	for _, c := range t.chains {
		t.rules(c, func(string, []byte, string) { n++ })
	}
	count := func(*knftables.Element) { n++ }
	for _, s := range t.sets {
		if t.fixed.Sets[s.Name] != nil {
			t.elements(s.Name, count)
		}
	}
	for _, m := range t.maps {
		t.elements(m.Name, count)
	}
	return n
}

// writeRegularRules writes the rules of the regular chains before the first rule with
// an anonymous set in each chain (late false), or that rule and the rest (late true).
func (t *table) writeRegularRules(lw *lineWriter, late bool) {
	for _, c := range t.chains {
		if c.isBase() {
			continue
		}
		seen := false
		t.rules(c, func(chain string, text []byte, comment string) {
			seen = seen || hasAnonymousSet(text)
			if seen == late {
				lw.rule(chain, text, comment)
			}
		})
	}
}
