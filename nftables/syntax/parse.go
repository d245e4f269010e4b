package syntax

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"sigs.k8s.io/knftables"
)

// Parse reads the kube-proxy tables of a file in either form nft speaks:
//
//   - a script for "nft -f": svcgen's output (whole, staged or partial; the shell lines
//     of a staged script are passed over), knftables' Fake.Dump, kube-proxy's
//     transactions. Its operations are applied in order, so the result is the table
//     the script leaves behind.
//   - the listing "nft list ruleset" or "nft list table" prints. Rules are read back
//     into the text knftables writes where nft only respells it ("meta mark set meta
//     mark | 0x4000" is "mark set mark or 0x4000"); see Canonical for what a listing
//     cannot give back.
//
// Other tables are passed over. name is used in errors.
func Parse(name string, r io.Reader) (*Ruleset, error) {
	// One string for the whole text: what the objects keep are pieces of it, not a
	// copy a line. A file says how large it is, so it is read at once into memory of
	// that size.
	var text strings.Builder
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := f.Stat(); err == nil {
			text.Grow(int(info.Size()) + 1)
		}
	}
	if _, err := io.Copy(&text, r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parseText(name, text.String())
}

// ParseBytes is Parse of a byte slice.
func ParseBytes(name string, data []byte) (*Ruleset, error) {
	return parseText(name, string(data))
}

func parseText(name, text string) (*Ruleset, error) {
	var rs *Ruleset
	var err error
	if isListing(text) {
		rs, err = parseListing(text)
	} else {
		rs, err = parseScript(text)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rs.Tables) == 0 {
		return nil, fmt.Errorf("%s: no %s table (want an nft script or \"nft list ruleset\" output)", name, TableName)
	}
	return rs, nil
}

// isListing reports whether the first significant line opens a "table" block.
func isListing(text string) bool {
	for l := range strings.Lines(text) {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		return strings.HasPrefix(l, "table ")
	}
	return false
}

// scriptParser applies a script's operations to one knftables Fake per family.
// Set and map elements are kept beside the Fake, by key: the Fake looks each new
// element up in a list, which a 10,000-Service table makes quadratic. Plain chains
// and rules, most of a table, are read here (see plainAdd); knftables' parser
// (Fake.ParseDump, a regular expression a line) reads the other "add" lines.
type scriptParser struct {
	fakes   map[knftables.Family]*knftables.Fake
	pending map[knftables.Family][]pendingAdd // "add" operations not yet applied
	elems   map[knftables.Family]map[string]*elementList
	// With beside, plain rules (see plainAdd) are kept beside the Fake too, by chain,
	// and checked as the Fake checks them against the chains, sets and maps that exist
	// at their line (known): the Fake copies each rule it adds and its table on each
	// run. A rule plainAdd does not read makes parseScript start again without.
	beside bool
	rules  map[knftables.Family]map[string][]*knftables.Rule
	known  map[knftables.Family]*names
}

// errNotPlain stops a parse with beside when a rule needs knftables' parser.
var errNotPlain = errors.New("a rule for knftables' parser")

// names are the chains, sets and maps of a table at a point of a script.
type names struct{ chains, sets, maps map[string]bool }

func newNames() *names {
	return &names{chains: map[string]bool{}, sets: map[string]bool{}, maps: map[string]bool{}}
}

// checkRule finds what knftables' Fake finds wrong with a rule: its chain, and the
// chains, sets and maps its words refer to, must exist (its checkRuleRefs).
func (n *names) checkRule(r *knftables.Rule) error {
	if !n.chains[r.Chain] {
		return fmt.Errorf("no such chain %q", r.Chain)
	}
	prev := ""
	for rest := r.Rule; ; {
		word, after, more := strings.Cut(rest, " ")
		switch {
		case strings.HasPrefix(word, "@") && !strings.Contains(word, ","):
			name := word[1:]
			switch {
			case prev == "map" || prev == "vmap":
				if !n.maps[name] {
					return fmt.Errorf("no such map %q", name)
				}
			case prev == "offload" || prev == "add":
				return fmt.Errorf("no such flowtable %q", name)
			case !n.sets[name] && !n.maps[name]:
				return fmt.Errorf("no such set %q", name)
			}
		case (word == "goto" || word == "jump") && more:
			if next, _, _ := strings.Cut(after, " "); !n.chains[next] {
				return fmt.Errorf("no such chain %q", next)
			}
		}
		if !more {
			return nil
		}
		prev, rest = word, after
	}
}

// note keeps track of beside rules and known names for an operation on an object.
func (p *scriptParser) note(family knftables.Family, verb string, obj knftables.Object) {
	if !p.beside {
		return
	}
	if p.known[family] == nil {
		p.known[family], p.rules[family] = newNames(), map[string][]*knftables.Rule{}
	}
	n, rules := p.known[family], p.rules[family]
	switch o := obj.(type) {
	case *knftables.Table:
		if verb != "add" {
			p.known[family], p.rules[family] = newNames(), map[string][]*knftables.Rule{}
		}
	case *knftables.Chain:
		switch verb {
		case "add":
			n.chains[o.Name] = true
		case "flush":
			delete(rules, o.Name)
		case "delete":
			delete(rules, o.Name)
			delete(n.chains, o.Name)
		}
	case *knftables.Set:
		if verb == "add" {
			n.sets[o.Name] = true
		} else if verb == "delete" {
			delete(n.sets, o.Name)
		}
	case *knftables.Map:
		if verb == "add" {
			n.maps[o.Name] = true
		} else if verb == "delete" {
			delete(n.maps, o.Name)
		}
	}
}

// pendingAdd is an "add" line for knftables' parser, or an object read here.
type pendingAdd struct {
	line string
	obj  knftables.Object
}

// parseDefinition reads the "add" line of a table, chain, set or map with knftables'
// parser, alone in a scratch table, so that it goes into the same transaction as the
// objects read here: the Fake copies its whole table on each run. Other kinds are
// left to the line's own run (nil).
func parseDefinition(family knftables.Family, kind, l string) (knftables.Object, error) {
	scratch := knftables.NewFake(family, TableName)
	text := l
	if kind != "table" {
		text = "add table " + string(family) + " " + TableName + "\n" + l
	}
	switch kind {
	case "table", "chain", "set", "map":
	default:
		return nil, nil
	}
	if err := scratch.ParseDump(text); err != nil {
		return nil, err
	}
	t := scratch.Table
	switch kind {
	case "table":
		o := t.Table
		o.Handle = nil
		return &o, nil
	case "chain":
		for _, c := range t.Chains {
			o := c.Chain
			o.Handle = nil
			return &o, nil
		}
	case "set":
		for _, c := range t.Sets {
			o := c.Set
			o.Handle = nil
			return &o, nil
		}
	case "map":
		for _, c := range t.Maps {
			o := c.Map
			o.Handle = nil
			return &o, nil
		}
	}
	return nil, fmt.Errorf("%q: knftables read no %s from it", l, kind)
}

// plainAdd reads the commonest "add" lines as knftables' parser would: a regular
// chain without properties ("add chain ip kube-proxy NAME") and a rule without index
// or handle ("add rule ip kube-proxy CHAIN RULE [comment "C"]"; knftables takes the
// comment's quotes off, and nothing else). rest is what follows the table's name.
// Anything else is left to knftables (nil).
func plainAdd(kind, rest string) knftables.Object {
	switch kind {
	case "chain":
		if rest != "" && !strings.ContainsAny(rest, " {\"") {
			return &knftables.Chain{Name: rest}
		}
	case "rule":
		chain, rule, ok := strings.Cut(rest, " ")
		if !ok || chain == "" || strings.HasPrefix(rule, "index ") || strings.HasPrefix(rule, "handle ") {
			return nil
		}
		q := strings.IndexByte(rule, '"')
		if q < 0 {
			if rule == "" {
				return nil
			}
			return &knftables.Rule{Chain: chain, Rule: rule}
		}
		const tag = " comment "
		text, comment := rule[:q], rule[q:]
		if !strings.HasSuffix(text, tag) || len(text) == len(tag) || len(comment) < 2 || !strings.HasSuffix(comment, `"`) {
			return nil
		}
		c := strings.Trim(comment, `"`)
		return &knftables.Rule{Chain: chain, Rule: text[:len(text)-len(tag)], Comment: &c}
	}
	return nil
}

// elementList is a container's elements in insertion order, indexed by key.
type elementList struct {
	order []string
	byKey map[string]*knftables.Element
}

func (l *elementList) add(e *knftables.Element) {
	k := strings.Join(e.Key, " . ")
	if l.byKey[k] == nil {
		l.order = append(l.order, k)
	}
	l.byKey[k] = e
}

func (l *elementList) list() []*knftables.Element {
	out := make([]*knftables.Element, 0, len(l.byKey))
	for _, k := range l.order {
		if e := l.byKey[k]; e != nil {
			out = append(out, e)
		}
	}
	return out
}

// parseScript reads nft -f text. Runs of "add" lines go through knftables' own
// parser (Fake.ParseDump); flush and delete operations are applied between them.
func parseScript(text string) (*Ruleset, error) {
	rs, err := parseScriptWith(text, true)
	if errors.Is(err, errNotPlain) {
		return parseScriptWith(text, false)
	}
	return rs, err
}

func parseScriptWith(text string, beside bool) (*Ruleset, error) {
	p := &scriptParser{fakes: map[knftables.Family]*knftables.Fake{}, pending: map[knftables.Family][]pendingAdd{},
		elems: map[knftables.Family]map[string]*elementList{}, beside: beside,
		rules: map[knftables.Family]map[string][]*knftables.Rule{}, known: map[knftables.Family]*names{}}
	n := 0
	for l := range strings.Lines(text) {
		n++
		if err := p.line(strings.TrimSpace(l)); err != nil {
			if errors.Is(err, errNotPlain) {
				return nil, err
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	rs := &Ruleset{Tables: map[knftables.Family]*State{}}
	for family, fake := range p.fakes {
		if err := p.apply(family); err != nil {
			return nil, err
		}
		if fake.Table == nil {
			continue
		}
		st := fromFake(family, fake.Table)
		for name, rules := range p.rules[family] {
			if c := st.Chains[name]; c != nil {
				c.Rules = rules
			}
		}
		if err := p.attachElements(family, st); err != nil {
			return nil, err
		}
		rs.Tables[family] = st
	}
	return rs, nil
}

// attachElements gives the state its elements, checking that their set or map exists
// and that every chain a verdict names does.
func (p *scriptParser) attachElements(family knftables.Family, st *State) error {
	for _, name := range sortedKeys(p.elems[family]) {
		c := st.Container(name)
		if c == nil {
			return fmt.Errorf("elements of %q, which does not exist", name)
		}
		c.Elements = p.elems[family][name].list()
		for _, e := range c.Elements {
			if c.Set != nil {
				e.Set = name
			} else {
				e.Map = name
			}
			if v := strings.Fields(strings.Join(e.Value, " ")); len(v) == 2 && (v[0] == "goto" || v[0] == "jump") && st.Chains[v[1]] == nil {
				return fmt.Errorf("element %s of %s: %s to %q, which does not exist", strings.Join(e.Key, " . "), name, v[0], v[1])
			}
		}
	}
	return nil
}

func (p *scriptParser) line(l string) error {
	if l == "" || l[0] == '#' || isShellLine(l) {
		return nil
	}
	f := strings.Fields(l)
	if len(f) < 4 {
		return fmt.Errorf("%q: not an nft operation on a table", l)
	}
	verb, kind, family, table := f[0], f[1], knftables.Family(f[2]), f[3]
	if family != knftables.IPv4Family && family != knftables.IPv6Family {
		return fmt.Errorf("%q: family %q (want ip or ip6)", l, family)
	}
	if table != TableName {
		return fmt.Errorf("%q: table %q (svcgen reads only the %s table)", l, table, TableName)
	}
	if p.fakes[family] == nil {
		p.fakes[family] = knftables.NewFake(family, TableName)
	}
	if verb == "add" && kind == "element" {
		return p.addElement(family, f[4], l)
	}
	if verb == "add" {
		add := pendingAdd{line: l}
		// What follows the table's name, when the words before it are single-spaced
		// (otherwise knftables' parser reads the line).
		if rest, ok := strings.CutPrefix(l, strings.Join(f[:4], " ")+" "); ok {
			add.obj = plainAdd(kind, rest)
		}
		if r, ok := add.obj.(*knftables.Rule); ok && p.beside {
			p.note(family, "", nil)
			if err := p.known[family].checkRule(r); err != nil {
				return err
			}
			p.rules[family][r.Chain] = append(p.rules[family][r.Chain], r)
			return nil
		}
		if add.obj == nil && kind == "rule" && p.beside {
			return errNotPlain
		}
		if add.obj == nil && kind != "rule" {
			obj, err := parseDefinition(family, kind, l)
			if err != nil {
				return err
			}
			add.obj = obj
		}
		p.note(family, "add", add.obj)
		p.pending[family] = append(p.pending[family], add)
		return nil
	}
	if err := p.dropElements(family, verb, kind, f[4:], l); err != nil {
		return err
	}
	if err := p.apply(family); err != nil {
		return err
	}
	if kind == "element" {
		return nil
	}
	obj, err := p.target(family, kind, f[4:], l)
	if err != nil {
		return err
	}
	fake := p.fakes[family]
	tx := fake.NewTransaction()
	switch verb {
	case "flush":
		tx.Flush(obj)
	case "delete":
		tx.Delete(obj)
	default:
		return fmt.Errorf("%q: verb %q is not one svcgen reads (add, flush, delete)", l, verb)
	}
	if err := fake.Run(context.Background(), tx); err != nil {
		return err
	}
	p.note(family, verb, obj)
	return nil
}

// addElement reads "add element FAMILY TABLE NAME { KEY [comment "C"] [: VALUE] }".
func (p *scriptParser) addElement(family knftables.Family, name, l string) error {
	open, end := strings.Index(l, "{"), strings.LastIndex(l, "}")
	if open < 0 || end < open {
		return fmt.Errorf("%q: element without { key }", l)
	}
	e, err := parseElement(strings.TrimSpace(l[open+1 : end]))
	if err != nil {
		return err
	}
	if p.elems[family] == nil {
		p.elems[family] = map[string]*elementList{}
	}
	list := p.elems[family][name]
	if list == nil {
		list = &elementList{byKey: map[string]*knftables.Element{}}
		p.elems[family][name] = list
	}
	list.add(e)
	return nil
}

// dropElements applies what a flush or delete does to the elements kept beside the
// Fake: a deleted table, set or map, or a flushed one, loses them; a deleted element
// is gone.
func (p *scriptParser) dropElements(family knftables.Family, verb, kind string, rest []string, l string) error {
	switch {
	case kind == "table" && verb == "delete":
		delete(p.elems, family)
	case kind == "set" || kind == "map":
		if len(rest) > 0 {
			delete(p.elems[family], rest[0])
		}
	case kind == "element" && verb == "delete":
		open, end := strings.Index(l, "{"), strings.LastIndex(l, "}")
		if open < 0 || end < open || len(rest) == 0 {
			return fmt.Errorf("%q: element without { key }", l)
		}
		list := p.elems[family][rest[0]]
		key := strings.TrimSpace(l[open+1 : end])
		if list == nil || list.byKey[key] == nil {
			return fmt.Errorf("%q: no such element", l)
		}
		delete(list.byKey, key)
	}
	return nil
}

// apply runs the pending "add" operations of a family, in order: runs of objects
// read here in one transaction, runs of lines through knftables' parser.
func (p *scriptParser) apply(family knftables.Family) error {
	fake, pending := p.fakes[family], p.pending[family]
	p.pending[family] = nil
	for len(pending) > 0 {
		n := 1
		for n < len(pending) && (pending[n].obj == nil) == (pending[0].obj == nil) {
			n++
		}
		run := pending[:n]
		pending = pending[n:]
		if run[0].obj == nil {
			lines := make([]string, len(run))
			for i, a := range run {
				lines[i] = a.line
			}
			if err := fake.ParseDump(strings.Join(lines, "\n")); err != nil {
				return err
			}
			continue
		}
		tx := fake.NewTransaction()
		for _, a := range run {
			tx.Add(a.obj)
		}
		if err := fake.Run(context.Background(), tx); err != nil {
			return err
		}
	}
	return nil
}

// target is the object a flush or delete names: "table", "chain NAME", "set NAME",
// "map NAME", "element NAME { K1 . K2 }".
func (p *scriptParser) target(family knftables.Family, kind string, rest []string, l string) (knftables.Object, error) {
	if kind == "table" {
		return &knftables.Table{}, nil
	}
	if len(rest) == 0 {
		return nil, fmt.Errorf("%q: no object name", l)
	}
	name := rest[0]
	switch kind {
	case "chain":
		return &knftables.Chain{Name: name}, nil
	case "set":
		return &knftables.Set{Name: name}, nil
	case "map":
		return &knftables.Map{Name: name}, nil
	case "element":
		open, end := strings.Index(l, "{"), strings.LastIndex(l, "}")
		if open < 0 || end < open {
			return nil, fmt.Errorf("%q: element without { key }", l)
		}
		key := strings.Split(strings.TrimSpace(l[open+1:end]), " . ")
		if t := p.fakes[family].Table; t != nil && t.Sets[name] != nil {
			return &knftables.Element{Set: name, Key: key}, nil
		}
		return &knftables.Element{Map: name, Key: key}, nil
	}
	return nil, fmt.Errorf("%q: unknown object %q", l, kind)
}

// fromFake turns a knftables Fake table into a State, without the handles the Fake
// numbered its objects with (a State is text, as a script writes it). The State takes
// the Fake's rules, which it changes: the Fake is not to be used after.
func fromFake(family knftables.Family, t *knftables.FakeTable) *State {
	st := NewState(family)
	table := t.Table
	table.Handle = nil
	st.Table = &table
	for name, c := range t.Chains {
		chain := c.Chain
		chain.Handle = nil
		for _, r := range c.Rules {
			r.Handle, r.Index = nil, nil
		}
		st.Chains[name] = &Chain{Obj: &chain, Rules: c.Rules}
	}
	for name, s := range t.Sets {
		set := s.Set
		set.Handle = nil
		st.Sets[name] = &Container{Set: &set, Elements: s.Elements}
	}
	for name, m := range t.Maps {
		mp := m.Map
		mp.Handle = nil
		st.Maps[name] = &Container{Map: &mp, Elements: m.Elements}
	}
	return st
}
