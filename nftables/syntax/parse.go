package syntax

import (
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// Parse reads the kube-proxy tables of a file in either form nft speaks:
//
//   - a script for "nft -f": svcgen's output (whole, staged or partial; the shell lines
//     of a staged script are passed over), knftables' Fake.Dump, kube-proxy's
//     transactions. Its operations are applied in order as nf_tables applies them
//     (Ruleset.Run), so the result is the table the script leaves behind, and a
//     script nft would refuse is an error.
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

// parseScript reads nft -f text: its operations applied to an empty ruleset.
func parseScript(text string) (*Ruleset, error) {
	rs := &Ruleset{Tables: map[knftables.Family]*State{}}
	t := newTxn(rs)
	if err := t.script(text); err != nil {
		return nil, err
	}
	t.commit()
	return rs, nil
}

// scriptOp is one operation of a script on the kube-proxy table of a family: its verb
// and object, or the elements of an element line (each with Set set to the line's
// set or map until Run finds which it is).
type scriptOp struct {
	family knftables.Family
	verb   string
	obj    knftables.Object // nil for elements, and for what a State does not keep
	elems  []*knftables.Element
}

// readOp reads one line of a script; ok is false for a line that is no operation (a
// blank or comment line, the shell lines of a staged script).
func readOp(l string) (op scriptOp, ok bool, err error) {
	l = strings.TrimSpace(l)
	if l == "" || l[0] == '#' || isShellLine(l) {
		return op, false, nil
	}
	verb, kind, family, table, rest := splitHead(l)
	if table == "" {
		return op, false, fmt.Errorf("%q: not an nft operation on a table", l)
	}
	op.family, op.verb = knftables.Family(family), verb
	if op.family != knftables.IPv4Family && op.family != knftables.IPv6Family {
		return op, false, fmt.Errorf("%q: family %q (want ip or ip6)", l, family)
	}
	if table != TableName {
		return op, false, fmt.Errorf("%q: table %q (svcgen reads only the %s table)", l, table, TableName)
	}
	switch {
	case kind == "element" && (verb == Add || verb == Delete):
		op.elems, err = readElements(rest, l)
	case verb == Add:
		op.obj, err = readAdd(op.family, kind, rest, l)
	case verb == Flush || verb == Delete:
		op.obj, err = readTarget(kind, rest, l)
	default:
		err = fmt.Errorf("%q: verb %q is not one svcgen reads (add, flush, delete)", l, verb)
	}
	return op, err == nil, err
}

// splitHead splits "VERB KIND FAMILY TABLE REST" at its first four words.
func splitHead(l string) (verb, kind, family, table, rest string) {
	words := [4]*string{&verb, &kind, &family, &table}
	for i := range words {
		l = strings.TrimLeft(l, " \t")
		end := strings.IndexAny(l, " \t")
		if end < 0 {
			*words[i] = l
			return verb, kind, family, table, ""
		}
		*words[i], l = l[:end], l[end:]
	}
	return verb, kind, family, table, strings.TrimLeft(l, " \t")
}

// readAdd reads the object of an "add" line; rest is what follows the table's name.
func readAdd(family knftables.Family, kind, rest, l string) (knftables.Object, error) {
	if obj := plainAdd(kind, rest); obj != nil {
		return obj, nil
	}
	if kind == "rule" {
		return readRule(rest, l)
	}
	return parseDefinition(family, kind, l)
}

// plainAdd reads the commonest "add" lines as knftables' parser would: a regular
// chain without properties ("add chain ip kube-proxy NAME") and a rule without index
// or handle ("add rule ip kube-proxy CHAIN RULE [comment "C"]"; knftables takes the
// comment's quotes off, and nothing else). rest is what follows the table's name.
// Anything else is left to readRule or knftables (nil).
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

// readRule reads a rule line plainAdd does not: "CHAIN index N RULE" (added after the
// rule at index N, as nft does) or with a handle, which svcgen does not keep.
func readRule(rest, l string) (knftables.Object, error) {
	chain, after, _ := strings.Cut(rest, " ")
	if pos, ok := strings.CutPrefix(after, "index "); ok {
		n, rule, _ := strings.Cut(pos, " ")
		i, err := strconv.Atoi(n)
		if obj, _ := plainAdd("rule", chain+" "+rule).(*knftables.Rule); err == nil && obj != nil {
			obj.Index = &i
			return obj, nil
		}
	}
	if strings.HasPrefix(after, "handle ") {
		return nil, fmt.Errorf("%q: svcgen keeps no rule handles", l)
	}
	return nil, fmt.Errorf("%q: cannot read the rule", l)
}

// readElements reads "NAME { K1 . K2 [comment "C"] [: V] , ... }": the elements, each
// with Set set to NAME until Run finds whether NAME is a set or a map.
func readElements(rest, l string) ([]*knftables.Element, error) {
	name, body, _ := strings.Cut(rest, " ")
	open, end := strings.Index(body, "{"), strings.LastIndex(body, "}")
	if name == "" || open < 0 || end < open {
		return nil, fmt.Errorf("%q: element without { key }", l)
	}
	var elems []*knftables.Element
	for _, e := range splitElements(body[open+1 : end]) {
		el, err := parseElement(e)
		if err != nil {
			return nil, err
		}
		el.Set = name
		elems = append(elems, el)
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("%q: element without { key }", l)
	}
	return elems, nil
}

// parseDefinition reads the "add" line of a table, chain, set or map (and of counters
// and flowtables, which a State does not keep) with knftables' parser, alone in a
// scratch table. The object comes without the handle the scratch table gave it.
func parseDefinition(family knftables.Family, kind, l string) (knftables.Object, error) {
	scratch := knftables.NewFake(family, TableName)
	text := l
	if kind != "table" {
		text = "add table " + string(family) + " " + TableName + "\n" + l
	}
	if err := scratch.ParseDump(text); err != nil {
		return nil, err
	}
	t := scratch.Table
	var obj knftables.Object
	switch kind {
	case "table":
		o := t.Table
		o.Handle, obj = nil, &o
	case "chain":
		obj = only(t.Chains, func(c *knftables.FakeChain) knftables.Object { o := c.Chain; o.Handle = nil; return &o })
	case "set":
		obj = only(t.Sets, func(s *knftables.FakeSet) knftables.Object { o := s.Set; o.Handle = nil; return &o })
	case "map":
		obj = only(t.Maps, func(m *knftables.FakeMap) knftables.Object { o := m.Map; o.Handle = nil; return &o })
	case "counter", "flowtable":
		return nil, nil // read and checked, not kept
	default:
		return nil, fmt.Errorf("%q: unknown object %q", l, kind)
	}
	if obj == nil {
		return nil, fmt.Errorf("%q: knftables read no %s from it", l, kind)
	}
	return obj, nil
}

// only is the object made of a map's one value, nil for an empty map.
func only[V any](m map[string]V, object func(V) knftables.Object) knftables.Object {
	for _, v := range m {
		return object(v)
	}
	return nil
}

// readTarget is the object a flush or delete names: "table", "chain NAME", "set NAME",
// "map NAME".
func readTarget(kind, rest, l string) (knftables.Object, error) {
	name, _, _ := strings.Cut(rest, " ")
	switch {
	case kind == "table":
		return &knftables.Table{}, nil
	case name == "":
		return nil, fmt.Errorf("%q: no object name", l)
	case kind == "chain":
		return &knftables.Chain{Name: name}, nil
	case kind == "set":
		return &knftables.Set{Name: name}, nil
	case kind == "map":
		return &knftables.Map{Name: name}, nil
	}
	return nil, fmt.Errorf("%q: unknown object %q", l, kind)
}

// ScriptOp is one operation of a script, read as Run reads it: a verb (Add, Flush or
// Delete) on the kube-proxy table of a family, and its object, or, for an element
// line, its elements (each with Set set to the line's set or map, which may be a map).
// Obj is nil for an object a State does not keep (a counter, a flowtable).
type ScriptOp struct {
	Family knftables.Family
	Verb   string
	Obj    knftables.Object
	Elems  []*knftables.Element
	Line   int // from 1
}

// ReadScript reads a script's operations in order, without applying them (apply's
// netlink loader turns them into one batch; Run applies them).
func ReadScript(text string) ([]ScriptOp, error) {
	var ops []ScriptOp
	n := 0
	for l := range strings.Lines(text) {
		n++
		op, ok, err := readOp(l)
		if err != nil {
			return nil, &LineError{Line: n, Err: err}
		}
		if ok {
			ops = append(ops, ScriptOp{Family: op.family, Verb: op.verb, Obj: op.obj, Elems: op.elems, Line: n})
		}
	}
	return ops, nil
}
