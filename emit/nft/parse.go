package nft

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/knftables"
)

// Ruleset is every kube-proxy table of a file, by family.
type Ruleset struct {
	Tables map[knftables.Family]*State
}

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
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var rs *Ruleset
	if isListing(data) {
		rs, err = parseListing(data)
	} else {
		rs, err = parseScript(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(rs.Tables) == 0 {
		return nil, fmt.Errorf("%s: no %s table (want an nft script or \"nft list ruleset\" output)", name, tableName)
	}
	return rs, nil
}

// ParseBytes is Parse of a byte slice.
func ParseBytes(name string, data []byte) (*Ruleset, error) {
	return Parse(name, bytes.NewReader(data))
}

// isListing reports whether the first significant line opens a "table" block.
func isListing(data []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLine)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		return strings.HasPrefix(l, "table ")
	}
	return false
}

// maxLine bounds one line of input: a listing prints a whole anonymous vmap on one line.
const maxLine = 16 << 20

// scriptParser applies a script's operations to one knftables Fake per family.
type scriptParser struct {
	fakes   map[knftables.Family]*knftables.Fake
	pending map[knftables.Family][]string // "add" lines not yet applied
}

// parseScript reads nft -f text. Runs of "add" lines go through knftables' own
// parser (Fake.ParseDump); flush and delete operations are applied between them.
func parseScript(data []byte) (*Ruleset, error) {
	p := &scriptParser{fakes: map[knftables.Family]*knftables.Fake{}, pending: map[knftables.Family][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLine)
	for n := 1; sc.Scan(); n++ {
		if err := p.line(strings.TrimSpace(sc.Text())); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rs := &Ruleset{Tables: map[knftables.Family]*State{}}
	for family, fake := range p.fakes {
		if err := p.apply(family); err != nil {
			return nil, err
		}
		if fake.Table != nil {
			rs.Tables[family] = fromFake(family, fake.Table)
		}
	}
	return rs, nil
}

// isShellLine reports the lines of svcgen's staged script around its nft input.
func isShellLine(l string) bool {
	return l == "set -e" || strings.HasPrefix(l, "nft -f - <<'SVCGEN_STAGE_") || strings.HasPrefix(l, "SVCGEN_STAGE_")
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
	if table != tableName {
		return fmt.Errorf("%q: table %q (svcgen reads only the %s table)", l, table, tableName)
	}
	if p.fakes[family] == nil {
		p.fakes[family] = knftables.NewFake(family, tableName)
	}
	if verb == "add" {
		p.pending[family] = append(p.pending[family], l)
		return nil
	}
	if err := p.apply(family); err != nil {
		return err
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
	return fake.Run(context.Background(), tx)
}

// apply runs the pending "add" lines of a family.
func (p *scriptParser) apply(family knftables.Family) error {
	lines := p.pending[family]
	if len(lines) == 0 {
		return nil
	}
	p.pending[family] = nil
	return p.fakes[family].ParseDump(strings.Join(lines, "\n"))
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
// numbered its objects with (a State is text, as a script writes it).
func fromFake(family knftables.Family, t *knftables.FakeTable) *State {
	st := newState(family)
	table := t.Table
	table.Handle = nil
	st.Table = &table
	for name, c := range t.Chains {
		chain := c.Chain
		chain.Handle = nil
		rules := make([]*knftables.Rule, len(c.Rules))
		for i, r := range c.Rules {
			rule := *r
			rule.Handle, rule.Index = nil, nil
			rules[i] = &rule
		}
		st.Chains[name] = &Chain{Obj: &chain, Rules: rules}
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
