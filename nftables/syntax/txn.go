package syntax

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	"sigs.k8s.io/knftables"
)

// What nf_tables does with a script, as a model: Parse applies a script's operations
// with it, and Run applies one to a ruleset as the kernel commits a transaction (apply's
// FakeNFT is that). It refuses what the kernel refuses, with the errno nft reports:
//
//   - ENOENT: an operation on a table, chain, set, map or element that is not there;
//     a rule that names a chain, set or map that is not there (nor earlier in the same
//     transaction), or an element whose verdict names a missing chain.
//   - EBUSY: deleting a chain that a rule or a verdict map's element still names, or a
//     set or map that a rule names.
//   - EEXIST: adding an element whose key is there with another value (kube-proxy
//     deletes it first); adding one that is there as it is changes nothing.
//
// Adding what is there changes nothing; "delete chain" takes the chain's rules with
// it; "flush table" empties every chain and keeps chains, sets and maps.

// Refused is an operation nf_tables refuses.
type Refused struct {
	Errno syscall.Errno
	What  string
}

func (r *Refused) Error() string { return r.What }

func refused(errno syscall.Errno, format string, args ...any) error {
	return &Refused{Errno: errno, What: fmt.Sprintf(format, args...)}
}

// LineError is a script's line that could not be read, or that nf_tables refuses.
type LineError struct {
	Line int // from 1
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Run applies an nft script to the ruleset as nf_tables commits one transaction: its
// operations in order, and all of them or, when one is refused (a *LineError), none:
// the ruleset is then as it was. commits reports whether nf_tables would commit the
// transaction, moving its generation: whether any operation changed something (see
// apply/generation.go).
func (rs *Ruleset) Run(script string) (commits bool, err error) {
	next := rs.clone()
	t := newTxn(next)
	if err := t.script(script); err != nil {
		return false, err
	}
	t.commit()
	rs.Tables = next.Tables
	return t.changes > 0, nil
}

// txn applies operations to a ruleset.
type txn struct {
	rs     *Ruleset
	tables map[knftables.Family]*tableTxn
	// changes counts the operations that changed something.
	changes int
}

// tableTxn is one table under change, with what checking the operations needs: the
// elements of the sets and maps changed, by key, and how often each object is named.
type tableTxn struct {
	st      *State
	changes *int // the transaction's
	elems   map[string]*elementList
	// chainRefs counts the rules and verdict-map elements that name each chain;
	// setRefs the rules that name each set or map.
	chainRefs, setRefs map[string]int
}

func newTxn(rs *Ruleset) *txn {
	if rs.Tables == nil {
		rs.Tables = map[knftables.Family]*State{}
	}
	return &txn{rs: rs, tables: map[knftables.Family]*tableTxn{}}
}

// script applies every operation of a script.
func (t *txn) script(text string) error {
	n := 0
	for l := range strings.Lines(text) {
		n++
		op, ok, err := readOp(l)
		if err == nil && ok {
			err = t.apply(op)
		}
		if err != nil {
			return &LineError{Line: n, Err: err}
		}
	}
	return nil
}

// commit gives the sets and maps whose elements changed their elements.
func (t *txn) commit() {
	for _, tt := range t.tables {
		for name, list := range tt.elems {
			if c := tt.st.Container(name); c != nil {
				c.Elements = list.list()
			}
		}
		tt.elems = nil
	}
}

// table is a family's table under change, nil when there is none.
func (t *txn) table(f knftables.Family) *tableTxn {
	tt := t.tables[f]
	if tt == nil && t.rs.Tables[f] != nil {
		tt = newTableTxn(t.rs.Tables[f], &t.changes)
		t.tables[f] = tt
	}
	return tt
}

// newTableTxn counts what the table's rules and elements name.
func newTableTxn(st *State, changes *int) *tableTxn {
	tt := &tableTxn{st: st, changes: changes, elems: map[string]*elementList{}, chainRefs: map[string]int{}, setRefs: map[string]int{}}
	for _, c := range st.Chains {
		for _, r := range c.Rules {
			tt.countRefs(r, 1)
		}
	}
	for _, m := range st.Maps {
		for _, e := range m.Elements {
			if chain := verdictChain(e); chain != "" {
				tt.chainRefs[chain]++
			}
		}
	}
	return tt
}

func (t *txn) apply(op scriptOp) error {
	if tbl, ok := op.obj.(*knftables.Table); ok {
		return t.tableOp(op.family, op.verb, tbl)
	}
	tt := t.table(op.family)
	if tt == nil {
		return refused(syscall.ENOENT, "no such table %q", TableName)
	}
	if op.elems != nil {
		return tt.elementsOp(op.verb, op.elems)
	}
	switch o := op.obj.(type) {
	case *knftables.Chain:
		return tt.chainOp(op.verb, o)
	case *knftables.Rule:
		return tt.addRule(o)
	case *knftables.Set:
		return tt.containerOp(op.verb, o.Name, &Container{Set: o}, tt.st.Sets)
	case *knftables.Map:
		return tt.containerOp(op.verb, o.Name, &Container{Map: o}, tt.st.Maps)
	}
	return nil // a counter or flowtable: a State keeps none
}

func (t *txn) tableOp(f knftables.Family, verb string, o *knftables.Table) error {
	tt := t.table(f)
	switch {
	case verb == Add && tt == nil:
		st := NewState(f)
		st.Table = o
		t.rs.Tables[f] = st
		t.tables[f] = newTableTxn(st, &t.changes)
		t.changes++
	case verb == Add:
	case tt == nil:
		return refused(syscall.ENOENT, "no such table %q", TableName)
	case verb == Delete:
		delete(t.rs.Tables, f)
		delete(t.tables, f)
		t.changes++
	case verb == Flush:
		for _, c := range tt.st.Chains {
			tt.flushChain(c)
		}
	}
	return nil
}

func (tt *tableTxn) chainOp(verb string, o *knftables.Chain) error {
	c := tt.st.Chains[o.Name]
	switch {
	case verb == Add:
		if c == nil {
			tt.st.Chains[o.Name] = &Chain{Obj: o}
			*tt.changes++
		}
		return nil
	case c == nil:
		return refused(syscall.ENOENT, "no such chain %q", o.Name)
	case verb == Flush:
		tt.flushChain(c)
		return nil
	}
	tt.flushChain(c)
	if tt.chainRefs[o.Name] > 0 {
		return refused(syscall.EBUSY, "chain %q is in use", o.Name)
	}
	delete(tt.st.Chains, o.Name)
	*tt.changes++
	return nil
}

func (tt *tableTxn) flushChain(c *Chain) {
	for _, r := range c.Rules {
		tt.countRefs(r, -1)
		*tt.changes++
	}
	c.Rules = nil
}

// addRule appends a rule (or adds it after the rule at its index), checking that what
// it names is there.
func (tt *tableTxn) addRule(r *knftables.Rule) error {
	c := tt.st.Chains[r.Chain]
	if c == nil {
		return refused(syscall.ENOENT, "no such chain %q", r.Chain)
	}
	if err := tt.checkRefs(r); err != nil {
		return err
	}
	if r.Index != nil {
		i := *r.Index
		if i < 0 || i >= len(c.Rules) {
			return refused(syscall.ENOENT, "no rule with index %d", i)
		}
		at := *r
		at.Index = nil
		c.Rules = slices.Insert(c.Rules, i+1, &at)
	} else {
		c.Rules = append(c.Rules, r)
	}
	*tt.changes++
	return nil
}

// checkRefs checks that what a rule names is there, and counts it (a refused rule
// leaves counts that the refused transaction takes with it).
func (tt *tableTxn) checkRefs(r *knftables.Rule) error {
	var err error
	ruleRefs(r.Rule, func(kind RefKind, name string) {
		if err == nil && !tt.has(kind, name) {
			err = refused(syscall.ENOENT, "no such %s %q", kind, name)
		}
		tt.count(kind, name, 1)
	})
	return err
}

// has reports whether the object a rule names is there.
func (tt *tableTxn) has(kind RefKind, name string) bool {
	switch kind {
	case RefChain:
		return tt.st.Chains[name] != nil
	case RefMap:
		return tt.st.Maps[name] != nil
	}
	return tt.st.Container(name) != nil
}

// countRefs counts (by, 1 or -1) what a rule names.
func (tt *tableTxn) countRefs(r *knftables.Rule, by int) {
	ruleRefs(r.Rule, func(kind RefKind, name string) { tt.count(kind, name, by) })
}

func (tt *tableTxn) count(kind RefKind, name string, by int) {
	if kind == RefChain {
		tt.chainRefs[name] += by
	} else {
		tt.setRefs[name] += by
	}
}

func (tt *tableTxn) containerOp(verb, name string, add *Container, kind map[string]*Container) error {
	c := kind[name]
	switch {
	case verb == Add:
		if c == nil {
			kind[name] = add
			*tt.changes++
		}
		return nil
	case c == nil:
		return refused(syscall.ENOENT, "no such %s %q", kindOf(add), name)
	case verb == Delete && tt.setRefs[name] > 0:
		return refused(syscall.EBUSY, "%s %q is in use", kindOf(add), name)
	}
	list := tt.elements(c)
	for _, e := range list.list() {
		list.delete(tt, e)
	}
	if verb == Delete {
		delete(kind, name)
		delete(tt.elems, name)
		*tt.changes++
	}
	return nil
}

func kindOf(c *Container) string {
	if c.Set != nil {
		return "set"
	}
	return "map"
}

// elementsOp adds or deletes the elements of a line.
func (tt *tableTxn) elementsOp(verb string, elems []*knftables.Element) error {
	name := elems[0].Set
	c := tt.st.Container(name)
	if c == nil {
		return refused(syscall.ENOENT, "no such set or map %q", name)
	}
	list := tt.elements(c)
	for _, e := range elems {
		if c.Map != nil {
			e.Set, e.Map = "", name
		}
		var err error
		if verb == Add {
			err = list.add(tt, e)
		} else {
			err = list.deleteKey(tt, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// elements is the list of a set's or map's elements under change.
func (tt *tableTxn) elements(c *Container) *elementList {
	name := c.Name()
	if l := tt.elems[name]; l != nil {
		return l
	}
	l := &elementList{name: name, index: make(map[string]int, len(c.Elements))}
	for _, e := range c.Elements {
		l.index[JoinKey(e.Key)] = len(l.elems)
		l.elems = append(l.elems, e)
	}
	tt.elems[name] = l
	return l
}

// verdictChain is the chain a verdict map's element goes to ("goto CHAIN"), "" if
// none.
func verdictChain(e *knftables.Element) string {
	if len(e.Value) != 1 {
		return ""
	}
	verb, chain, ok := strings.Cut(e.Value[0], " ")
	if !ok || (verb != "goto" && verb != "jump") || strings.Contains(chain, " ") {
		return ""
	}
	return chain
}

// elementList is a set's or map's elements in insertion order (nil where one was
// deleted), indexed by key.
type elementList struct {
	name  string
	elems []*knftables.Element
	index map[string]int
}

func (l *elementList) add(tt *tableTxn, e *knftables.Element) error {
	k := JoinKey(e.Key)
	if i, ok := l.index[k]; ok {
		if JoinKey(l.elems[i].Value) != JoinKey(e.Value) {
			return refused(syscall.EEXIST, "element %s of %s is there with another value", k, l.name)
		}
		return nil
	}
	if chain := verdictChain(e); chain != "" {
		if tt.st.Chains[chain] == nil {
			return refused(syscall.ENOENT, "no such chain %q", chain)
		}
		tt.chainRefs[chain]++
	}
	l.index[k] = len(l.elems)
	l.elems = append(l.elems, e)
	*tt.changes++
	return nil
}

func (l *elementList) deleteKey(tt *tableTxn, e *knftables.Element) error {
	i, ok := l.index[JoinKey(e.Key)]
	if !ok {
		return refused(syscall.ENOENT, "no such element %s in %s", JoinKey(e.Key), l.name)
	}
	l.delete(tt, l.elems[i])
	return nil
}

func (l *elementList) delete(tt *tableTxn, e *knftables.Element) {
	k := JoinKey(e.Key)
	if chain := verdictChain(e); chain != "" {
		tt.chainRefs[chain]--
	}
	l.elems[l.index[k]] = nil
	delete(l.index, k)
	*tt.changes++
}

// list is the elements, in order.
func (l *elementList) list() []*knftables.Element {
	out := make([]*knftables.Element, 0, len(l.index))
	for _, e := range l.elems {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// clone copies the ruleset deep enough that a transaction on the copy leaves it as
// it is (objects, which nothing changes, are shared).
func (rs *Ruleset) clone() *Ruleset {
	out := &Ruleset{Tables: make(map[knftables.Family]*State, len(rs.Tables))}
	for f, st := range rs.Tables {
		c := &State{Family: st.Family, Table: st.Table, Chains: make(map[string]*Chain, len(st.Chains)),
			Sets: make(map[string]*Container, len(st.Sets)), Maps: make(map[string]*Container, len(st.Maps))}
		for n, ch := range st.Chains {
			c.Chains[n] = &Chain{Obj: ch.Obj, Rules: slices.Clone(ch.Rules)}
		}
		for n, s := range st.Sets {
			c.Sets[n] = &Container{Set: s.Set, Elements: slices.Clone(s.Elements)}
		}
		for n, m := range st.Maps {
			c.Maps[n] = &Container{Map: m.Map, Elements: slices.Clone(m.Elements)}
		}
		out.Tables[f] = c
	}
	return out
}
