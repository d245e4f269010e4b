package syntax

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"
)

// listing reads "nft list ruleset" text: nested blocks of tables, sets, maps and
// chains, one property or rule a line; a set's elements may span lines.
type listing struct {
	lines []string
	i     int
}

func parseListing(text string) (*Ruleset, error) {
	rs := &Ruleset{Tables: map[knftables.Family]*State{}}
	ls := &listing{lines: strings.Split(text, "\n")}
	for ls.i < len(ls.lines) {
		l := ls.next()
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "table" || f[3] != "{" {
			return nil, ls.errorf("%q: want \"table FAMILY NAME {\"", l)
		}
		family := knftables.Family(f[1])
		if f[2] != TableName || (family != knftables.IPv4Family && family != knftables.IPv6Family) {
			if err := ls.skipBlock(); err != nil {
				return nil, err
			}
			continue
		}
		st, err := ls.table(family)
		if err != nil {
			return nil, err
		}
		rs.Tables[family] = st
	}
	return rs, nil
}

// next returns the next line without indentation or a "# handle N" annotation.
func (ls *listing) next() string {
	l := strings.TrimSpace(ls.lines[ls.i])
	ls.i++
	if i := strings.Index(l, " # handle "); i >= 0 {
		l = l[:i]
	}
	return l
}

func (ls *listing) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", ls.i, fmt.Sprintf(format, args...))
}

// skipBlock passes over a block whose opening line was just read.
func (ls *listing) skipBlock() error {
	depth := 1
	for ls.i < len(ls.lines) {
		depth += braceDepth(ls.next())
		if depth == 0 {
			return nil
		}
	}
	return ls.errorf("unterminated block")
}

// braceDepth counts the braces of a line outside double quotes.
func braceDepth(l string) int {
	d, quoted := 0, false
	for i := 0; i < len(l); i++ {
		switch {
		case l[i] == '\\' && quoted:
			i++
		case l[i] == '"':
			quoted = !quoted
		case l[i] == '{' && !quoted:
			d++
		case l[i] == '}' && !quoted:
			d--
		}
	}
	return d
}

func (ls *listing) table(family knftables.Family) (*State, error) {
	st := NewState(family)
	st.Table = &knftables.Table{}
	for ls.i < len(ls.lines) {
		l := ls.next()
		switch {
		case l == "":
		case l == "}":
			return st, nil
		case strings.HasPrefix(l, "comment "):
			c, err := unquote(strings.TrimPrefix(l, "comment "))
			if err != nil {
				return nil, ls.errorf("table comment: %v", err)
			}
			st.Table.Comment = &c
		case strings.HasPrefix(l, "chain ") && strings.HasSuffix(l, " {"):
			if err := ls.chain(st, strings.TrimSuffix(strings.TrimPrefix(l, "chain "), " {")); err != nil {
				return nil, err
			}
		case (strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "map ")) && strings.HasSuffix(l, " {"):
			f := strings.Fields(l)
			if err := ls.container(st, f[0], f[1]); err != nil {
				return nil, err
			}
		default:
			// flowtables, counters, quotas...: kube-proxy makes none; pass them over.
			if braceDepth(l) > 0 {
				if err := ls.skipBlock(); err != nil {
					return nil, err
				}
			}
		}
	}
	return nil, ls.errorf("table %s %s: unterminated", family, TableName)
}

// baseChainRe matches a base chain's header line.
var baseChainRe = regexp.MustCompile(`^type (\S+) hook (\S+)(?: device "?([^";]*)"?)? priority ([^;]+);(?: policy (\S+);)?$`)

func (ls *listing) chain(st *State, name string) error {
	ch := st.AddChain(&knftables.Chain{Name: name})
	for ls.i < len(ls.lines) {
		l := ls.next()
		switch {
		case l == "":
		case l == "}":
			return nil
		case strings.HasPrefix(l, "type "):
			m := baseChainRe.FindStringSubmatch(l)
			if m == nil {
				return ls.errorf("chain %s: cannot read %q", name, l)
			}
			prio, err := knftables.ParsePriority(st.Family, strings.ReplaceAll(m[4], " ", ""))
			if err != nil {
				return ls.errorf("chain %s: %v", name, err)
			}
			ch.Obj.Type = knftables.PtrTo(knftables.BaseChainType(m[1]))
			ch.Obj.Hook = knftables.PtrTo(knftables.BaseChainHook(m[2]))
			ch.Obj.Priority = knftables.PtrTo(knftables.BaseChainPriority(strconv.Itoa(prio)))
			if m[3] != "" {
				ch.Obj.Device = knftables.PtrTo(m[3])
			}
			if m[5] != "" && m[5] != "accept" { // accept is the default knftables leaves unsaid
				ch.Obj.Policy = knftables.PtrTo(knftables.BaseChainPolicy(m[5]))
			}
		case strings.HasPrefix(l, "comment "):
			c, err := unquote(strings.TrimPrefix(l, "comment "))
			if err != nil {
				return ls.errorf("chain %s: comment: %v", name, err)
			}
			ch.Obj.Comment = &c
		default:
			text, comment, err := splitComment(l)
			if err != nil {
				return ls.errorf("chain %s: %v", name, err)
			}
			ch.Rules = append(ch.Rules, &knftables.Rule{Chain: name, Rule: respell(text), Comment: comment})
		}
	}
	return ls.errorf("chain %s: unterminated", name)
}

func (ls *listing) container(st *State, kind, name string) error {
	var typ, comment string
	var flags []knftables.SetFlag
	var timeout *time.Duration
	var size *uint64
	var elems []string
	hasComment := false
	for ls.i < len(ls.lines) {
		l := ls.next()
		switch {
		case l == "":
		case l == "}":
			var c *string
			if hasComment {
				c = &comment
			}
			return ls.addContainer(st, kind, name, typ, c, flags, timeout, size, elems)
		case strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "typeof "):
			typ = l
		case strings.HasPrefix(l, "flags "):
			for _, f := range strings.Split(strings.TrimPrefix(l, "flags "), ",") {
				flags = append(flags, knftables.SetFlag(strings.TrimSpace(f)))
			}
		case strings.HasPrefix(l, "timeout "):
			d, err := parseNFTDuration(strings.TrimPrefix(l, "timeout "))
			if err != nil {
				return ls.errorf("%s %s: %v", kind, name, err)
			}
			timeout = &d
		case strings.HasPrefix(l, "size "):
			n, err := strconv.ParseUint(strings.TrimPrefix(l, "size "), 10, 64)
			if err != nil {
				return ls.errorf("%s %s: size: %v", kind, name, err)
			}
			size = &n
		case strings.HasPrefix(l, "comment "):
			c, err := unquote(strings.TrimPrefix(l, "comment "))
			if err != nil {
				return ls.errorf("%s %s: comment: %v", kind, name, err)
			}
			comment, hasComment = c, true
		case strings.HasPrefix(l, "elements = {"):
			text := strings.TrimPrefix(l, "elements = {")
			for braceDepth("{"+text) > 0 && ls.i < len(ls.lines) {
				text += " " + ls.next()
			}
			text = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), "}"))
			elems = splitElements(text)
		case strings.HasPrefix(l, "policy ") || strings.HasPrefix(l, "gc-interval ") || l == "auto-merge":
			// properties kube-proxy never sets
		default:
			return ls.errorf("%s %s: cannot read %q", kind, name, l)
		}
	}
	return ls.errorf("%s %s: unterminated", kind, name)
}

func (ls *listing) addContainer(st *State, kind, name, typ string, comment *string, flags []knftables.SetFlag, timeout *time.Duration, size *uint64, elems []string) error {
	dynamic := false
	for _, f := range flags {
		dynamic = dynamic || f == knftables.DynamicFlag
	}
	if dynamic && size != nil && *size == 65535 {
		size = nil // the size nft gives every dynamic set that does not name one
	}
	var c *Container
	if kind == "set" {
		s := &knftables.Set{Name: name, Comment: comment, Flags: flags, Timeout: timeout, Size: size}
		s.Type, s.TypeOf = splitType(typ)
		c = st.AddSet(s)
	} else {
		m := &knftables.Map{Name: name, Comment: comment, Flags: flags, Timeout: timeout, Size: size}
		m.Type, m.TypeOf = splitType(typ)
		c = st.AddMap(m)
	}
	if dynamic {
		return nil // entries the kernel adds at run time (affinity): state, not ruleset
	}
	for _, e := range elems {
		el, err := parseElement(e)
		if err != nil {
			return ls.errorf("%s %s: %v", kind, name, err)
		}
		if kind == "set" {
			el.Set = name
		} else {
			el.Map = name
		}
		c.Elements = append(c.Elements, el)
	}
	return nil
}

func splitType(l string) (typ, typeOf string) {
	if v, ok := strings.CutPrefix(l, "typeof "); ok {
		return "", v
	}
	return strings.TrimPrefix(l, "type "), ""
}

// splitElements splits an element list at the commas outside quotes and braces.
func splitElements(text string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == '{' && !quoted:
			depth++
		case c == '}' && !quoted:
			depth--
		case c == ',' && !quoted && depth == 0:
			out = append(out, strings.TrimSpace(text[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(text[start:]); last != "" {
		out = append(out, last)
	}
	return out
}

// parseElement reads "K1 . K2 [comment "C"] [: V]".
func parseElement(e string) (*knftables.Element, error) {
	el := &knftables.Element{}
	key := e
	if i := strings.Index(e, " : "); i >= 0 {
		key, el.Value = e[:i], []string{strings.TrimSpace(e[i+3:])}
	}
	if i := strings.Index(key, ` comment "`); i >= 0 {
		c, err := unquote(key[i+len(" comment "):])
		if err != nil {
			return nil, fmt.Errorf("element %q: comment: %v", e, err)
		}
		el.Comment = &c
		key = key[:i]
	}
	el.Key = strings.Split(strings.TrimSpace(key), " . ")
	return el, nil
}

// splitComment takes a rule's trailing comment "C" off.
func splitComment(l string) (string, *string, error) {
	if !strings.HasSuffix(l, `"`) {
		return l, nil, nil
	}
	i := strings.LastIndex(l, ` comment "`)
	if i < 0 {
		return l, nil, nil
	}
	c, err := unquote(l[i+len(" comment "):])
	if err != nil {
		return "", nil, fmt.Errorf("rule %q: comment: %v", l, err)
	}
	return l[:i], &c, nil
}

func unquote(s string) (string, error) {
	return strconv.Unquote(strings.TrimSpace(s))
}

// parseNFTDuration reads nft's durations: "10800s", "3h", "2h59m59s", "1d".
func parseNFTDuration(s string) (time.Duration, error) {
	var total time.Duration
	for rest := s; rest != ""; {
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 {
			return 0, fmt.Errorf("duration %q", s)
		}
		n, _ := strconv.Atoi(rest[:i])
		rest = rest[i:]
		j := strings.IndexFunc(rest, func(r rune) bool { return r >= '0' && r <= '9' })
		if j < 0 {
			j = len(rest)
		}
		unit := map[string]time.Duration{"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute, "s": time.Second, "ms": time.Millisecond}[rest[:j]]
		if unit == 0 {
			return 0, fmt.Errorf("duration %q: unit %q", s, rest[:j])
		}
		total += time.Duration(n) * unit
		rest = rest[j:]
	}
	return total, nil
}

// WriteListing writes a table as "nft list table" prints it (in knftables' spelling of
// rules, which nft respells: Parse reads both): what apply's fake kernel lists.
func WriteListing(out io.Writer, st *State) error {
	var b []byte
	b = fmt.Appendf(b, "table %s %s {\n", st.Family, TableName)
	if st.Table.Comment != nil {
		b = fmt.Appendf(b, "\tcomment %q\n", *st.Table.Comment)
	}
	for _, name := range sortedKeys(st.Sets) {
		s := st.Sets[name]
		b = appendListedContainer(b, "set", name, s.Set.Type, s.Set.TypeOf, s.Set.Flags, s.Set.Timeout, s.Set.Comment, s.Elements)
	}
	for _, name := range sortedKeys(st.Maps) {
		m := st.Maps[name]
		b = appendListedContainer(b, "map", name, m.Map.Type, m.Map.TypeOf, m.Map.Flags, m.Map.Timeout, m.Map.Comment, m.Elements)
	}
	for _, name := range sortedKeys(st.Chains) {
		b = appendListedChain(b, st.Family, st.Chains[name])
	}
	b = append(b, "}\n"...)
	_, err := out.Write(b)
	return err
}

func appendListedContainer(b []byte, kind, name, typ, typeOf string, flags []knftables.SetFlag, timeout *time.Duration, comment *string, elems []*knftables.Element) []byte {
	b = fmt.Appendf(b, "\t%s %s {\n", kind, name)
	if typeOf != "" {
		b = fmt.Appendf(b, "\t\ttypeof %s\n", typeOf)
	} else {
		b = fmt.Appendf(b, "\t\ttype %s\n", typ)
	}
	if len(flags) > 0 {
		parts := make([]string, len(flags))
		for i, f := range flags {
			parts[i] = string(f)
		}
		b = fmt.Appendf(b, "\t\tflags %s\n", strings.Join(parts, ","))
	}
	if timeout != nil {
		b = fmt.Appendf(b, "\t\ttimeout %ds\n", int64(timeout.Seconds()))
	}
	if comment != nil {
		b = fmt.Appendf(b, "\t\tcomment %q\n", *comment)
	}
	for i, e := range elems {
		if i == 0 {
			b = append(b, "\t\telements = { "...)
		} else {
			b = append(b, ",\n\t\t\t     "...)
		}
		b = appendJoined(b, e.Key)
		if e.Comment != nil {
			b = fmt.Appendf(b, " comment %q", *e.Comment)
		}
		if len(e.Value) > 0 {
			b = appendJoined(append(b, " : "...), e.Value)
		}
	}
	if len(elems) > 0 {
		b = append(b, " }\n"...)
	}
	return append(b, "\t}\n"...)
}

func appendListedChain(b []byte, family knftables.Family, c *Chain) []byte {
	b = fmt.Appendf(b, "\tchain %s {\n", c.Obj.Name)
	if o := c.Obj; o.Hook != nil {
		prio, err := knftables.ParsePriority(family, string(*o.Priority))
		if err != nil {
			prio = 0
		}
		policy := knftables.AcceptPolicy
		if o.Policy != nil {
			policy = *o.Policy
		}
		b = fmt.Appendf(b, "\t\ttype %s hook %s priority %d; policy %s;\n", *o.Type, *o.Hook, prio, policy)
	}
	if c.Obj.Comment != nil {
		b = fmt.Appendf(b, "\t\tcomment %q\n", *c.Obj.Comment)
	}
	for _, r := range c.Rules {
		b = append(appendRuleBody(append(b, "\t\t"...), []byte(r.Rule), ptrString(r.Comment)), '\n')
	}
	return append(b, "\t}\n"...)
}
