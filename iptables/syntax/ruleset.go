package syntax

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/internal/textutil"
)

// Ruleset is iptables-restore or iptables-save text read back: tables with their
// chains and rules, in file order.
type Ruleset struct {
	Tables []*Table
}

// Table is one "*name ... COMMIT" block.
type Table struct {
	Name   string
	Chains []*Chain
	// Deleted lists chains removed with -X, in order.
	Deleted []string
	index   map[string]*Chain
}

// Chain is a declared chain (or one only appended to) with its rules in order.
type Chain struct {
	Name string
	// Policy is "-" for user chains, the policy of a built-in chain otherwise.
	Policy string
	// Declared: the file has a ":NAME" line for it (which flushes it on --noflush).
	Declared bool
	Rules    []Rule
}

// Rule is one "-A CHAIN args..." line; Args are the words after the chain name, with
// quotes removed.
type Rule struct {
	Chain string
	Args  []string
	// Line is the line number in the parsed text (0 for rules not read from text).
	Line int
	// Raw is the line as read, "-A CHAIN args" ("" for rules not read from text): two
	// rules with the same Raw are the same rule, whatever their spelling. Args are
	// Raw's words after the chain (ParseRuleLine reads them again).
	Raw string
}

// ParseRuleLine reads one "-A CHAIN args" line as Parse reads it: the rule with its
// chain, words and Raw. A reader that holds many rules may keep Raw alone and read
// the words again when it needs them.
func ParseRuleLine(line string) (Rule, error) {
	words, err := splitWords(line)
	if err != nil {
		return Rule{}, err
	}
	if len(words) < 2 || (words[0] != "-A" && words[0] != "--append") {
		return Rule{}, fmt.Errorf("%q is not an -A line", line)
	}
	return Rule{Chain: words[1], Args: words[2:], Raw: line}, nil
}

// Table returns the table of that name, or nil.
func (rs *Ruleset) Table(name string) *Table {
	for _, t := range rs.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Chain returns the chain of that name, or nil.
func (t *Table) Chain(name string) *Chain {
	if t == nil {
		return nil
	}
	return t.index[name]
}

// Reindex makes a ruleset built by hand (not by Parse) answer Table.Chain.
func Reindex(rs *Ruleset) *Ruleset {
	for _, t := range rs.Tables {
		t.index = make(map[string]*Chain, len(t.Chains))
		for _, c := range t.Chains {
			t.index[c.Name] = c
		}
	}
	return rs
}

// chain returns the named chain, adding it if it is new.
func (t *Table) chain(name string) *Chain {
	if c := t.index[name]; c != nil {
		return c
	}
	c := &Chain{Name: name, Policy: "-"}
	if IsBuiltin(t.Name, name) {
		c.Policy = "ACCEPT" // the policy of a table the kernel has just made
	}
	t.Chains = append(t.Chains, c)
	t.index[name] = c
	return c
}

// ParseError is a line iptables-restore would refuse.
type ParseError struct {
	Name string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s: line %d: %s", e.Name, e.Line, e.Msg) }

// Parse reads iptables-restore input or iptables-save output. name is used in errors.
// -X lines are recorded in Table.Deleted, so a payload can be written back as it was.
func Parse(name string, r io.Reader) (*Ruleset, error) {
	rs := &Ruleset{}
	if err := rs.restore(name, r, true); err != nil {
		return nil, err
	}
	return rs, nil
}

// ParseBytes is Parse over a byte slice.
func ParseBytes(name string, data []byte) (*Ruleset, error) {
	return Parse(name, bytes.NewReader(data))
}

// ParseString is Parse of a text the caller has as a string: rules keep pieces of
// it, not of a copy.
func ParseString(name, text string) (*Ruleset, error) {
	rs := &Ruleset{}
	if err := (&parser{name: name, rs: rs, recordDeleted: true}).text(text); err != nil {
		return nil, err
	}
	return rs, nil
}

// ParseLight reads text as Parse does, but the rules of -A lines keep their line
// (Raw) and not its words (Args nil; Rule.Words reads them again): a reader that
// holds a large ruleset and reads few of its rules at a time (the tracer) keeps 70
// MB less at 10,000 Services. Rules keep pieces of text; it is not copied.
func ParseLight(name, text string) (*Ruleset, error) {
	rs := &Ruleset{}
	p := &parser{name: name, rs: rs, recordDeleted: true, light: true}
	if err := p.text(text); err != nil {
		return nil, err
	}
	return rs, nil
}

// Words are the rule's words: Args, or those of its line when a light parse left
// them out.
func (r *Rule) Words() []string {
	if r.Args == nil && r.Raw != "" {
		if full, err := ParseRuleLine(r.Raw); err == nil {
			return full.Args
		}
	}
	return r.Args
}

// Restore changes the ruleset as "iptables-restore --noflush" changes the kernel's: a
// chain line creates a chain or flushes an existing user chain (a built-in chain keeps
// its rules), -A, -I and -D edit a chain, -X deletes one, and tables and chains the
// payload does not name stay as they are. It keeps a model of the kernel's tables up
// to date without reading them back. On error the ruleset may be half changed, as a
// table of the kernel is not (callers restore into a copy, or rebuild).
func (rs *Ruleset) Restore(name string, r io.Reader) error {
	return rs.restore(name, r, false)
}

func (rs *Ruleset) restore(name string, r io.Reader, recordDeleted bool) error {
	// One string for the whole text: rules keep pieces of it, not a copy a line. A
	// file says how large it is, so its text is read into memory of that size at once.
	var text strings.Builder
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := f.Stat(); err == nil {
			text.Grow(int(info.Size()) + 1)
		}
	} else if b, ok := r.(interface{ Len() int }); ok { // bytes.Reader, bytes.Buffer
		text.Grow(b.Len() + 1)
	}
	if _, err := io.Copy(&text, r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	p := &parser{name: name, rs: rs, recordDeleted: recordDeleted}
	return p.text(text.String())
}

// text reads every line of text.
func (p *parser) text(text string) error {
	for line := range strings.Lines(text) {
		p.line++
		if err := p.parseLine(strings.TrimSpace(line)); err != nil {
			return err
		}
	}
	if p.table != nil {
		return p.errorf("table %s has no COMMIT", p.table.Name)
	}
	return nil
}

type parser struct {
	name          string
	line          int
	rs            *Ruleset
	table         *Table
	recordDeleted bool
	// rules and words are chunks that rules and their words are cut from (see
	// appendRule and words).
	rules []Rule
	words []string
	// light: -A rules keep no words (ParseLight); their words are read into the
	// start of words, again for each line.
	light bool
}

// Chunk sizes: a 10,000-Service ruleset has 290,000 rules in 100,000 chains of a few
// rules each; a slice grown per chain and a slice of words per rule were a third of
// what reading it allocated.
const (
	ruleChunk = 4096
	wordChunk = 16384
)

// appendRule appends r to c's rules. A file lists a chain's rules one after another,
// so they are kept side by side in a chunk: c.Rules grows over the chunk while its
// last rule is the chunk's. c.Rules' capacity ends at its length, so whoever appends
// to it otherwise gets a copy, and a chunk is never written twice.
func (p *parser) appendRule(c *Chain, r Rule) {
	n := len(c.Rules)
	switch {
	case n > 0 && len(p.rules) > 0 && &c.Rules[n-1] == &p.rules[len(p.rules)-1] && len(p.rules) < cap(p.rules):
		p.rules = append(p.rules, r)
		c.Rules = p.rules[len(p.rules)-n-1 : len(p.rules) : len(p.rules)]
	case n > 0:
		c.Rules = append(c.Rules, r)
	default:
		if len(p.rules) == cap(p.rules) {
			p.rules = make([]Rule, 0, ruleChunk)
		}
		p.rules = append(p.rules, r)
		c.Rules = p.rules[len(p.rules)-1 : len(p.rules) : len(p.rules)]
	}
}

// splitWords is splitWords into the parser's chunk of words; the words' capacity
// ends at their length.
func (p *parser) splitWords(l string) ([]string, error) {
	if p.light {
		var err error
		p.words, err = appendWords(p.words[:0], l)
		return p.words, err
	}
	need := strings.Count(l, " ") + 1
	if cap(p.words)-len(p.words) < need {
		p.words = make([]string, 0, max(wordChunk, need))
	}
	start := len(p.words)
	words, err := appendWords(p.words[start:start:start+need], l)
	if err != nil {
		return nil, err
	}
	if len(words) <= need {
		p.words = p.words[:start+len(words)] // cut from the chunk, not grown out of it
	}
	return words[:len(words):len(words)], nil
}

func (p *parser) errorf(format string, args ...any) error {
	return &ParseError{Name: p.name, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) parseLine(l string) error {
	switch {
	case l == "" || l[0] == '#':
		return nil
	case l[0] == '*':
		if p.table != nil {
			return p.errorf("table %s starts before %s has its COMMIT", l[1:], p.table.Name)
		}
		p.table = p.rs.Table(l[1:])
		if p.table == nil {
			p.table = &Table{Name: l[1:], index: map[string]*Chain{}}
			p.rs.Tables = append(p.rs.Tables, p.table)
		} else if p.table.index == nil {
			Reindex(&Ruleset{Tables: []*Table{p.table}})
		}
		return nil
	}
	if p.table == nil {
		return p.errorf("%q outside a table (a *table line is missing)", l)
	}
	switch {
	case l == "COMMIT":
		p.table = nil
		return nil
	case l[0] == ':':
		return p.chainLine(l)
	}
	words, err := p.splitWords(l)
	if err != nil {
		return p.errorf("%v", err)
	}
	return p.command(l, words)
}

// chainLine reads ":NAME POLICY [counters]". It flushes a user chain; a built-in
// chain (one with a policy) only takes the policy, as iptables-restore --noflush does.
func (p *parser) chainLine(l string) error {
	f := strings.Fields(l[1:])
	if len(f) < 2 || f[0] == "" {
		return p.errorf("bad chain line %q", l)
	}
	c := p.table.chain(f[0])
	c.Policy = f[1]
	c.Declared = true
	if f[1] == "-" {
		c.Rules = nil
	}
	return nil
}

func (p *parser) command(line string, words []string) error {
	if len(words) < 2 {
		return p.errorf("%q has no chain", strings.Join(words, " "))
	}
	op, name := words[0], words[1]
	switch op {
	case "-A", "--append":
		c := p.table.chain(name)
		r := Rule{Chain: name, Args: words[2:], Line: p.line, Raw: line}
		if p.light {
			r.Args = nil // the words are the parser's, read again for the next line
		}
		p.appendRule(c, r)
	case "-I", "--insert":
		args, pos := words[2:], 1
		if len(args) > 0 && isNumber(args[0]) {
			pos, _ = strconv.Atoi(args[0])
			args = args[1:]
		}
		c := p.table.chain(name)
		if pos < 1 || pos > len(c.Rules)+1 {
			return p.errorf("-I %s %d: the chain has %s", name, pos, textutil.Count(len(c.Rules), "rule", "rules"))
		}
		c.Rules = slices.Insert(c.Rules, pos-1, Rule{Chain: name, Args: slices.Clip(slices.Clone(args)), Line: p.line})
	case "-D", "--delete":
		c := p.table.Chain(name)
		i := -1
		switch {
		case c == nil:
		case len(words) == 3 && isNumber(words[2]):
			if n, _ := strconv.Atoi(words[2]); n >= 1 && n <= len(c.Rules) {
				i = n - 1
			}
		default:
			i = c.find(words[2:])
		}
		if i < 0 {
			return p.errorf("-D %s: no such rule: %s", name, strings.Join(words[2:], " "))
		}
		c.Rules = slices.Delete(c.Rules, i, i+1)
	case "-N", "--new-chain":
		p.table.chain(name).Declared = true
	case "-F", "--flush":
		p.table.chain(name).Rules = nil
	case "-X", "--delete-chain":
		if p.recordDeleted {
			p.table.Deleted = append(p.table.Deleted, name)
		}
		p.table.remove(name)
	default:
		return p.errorf("unsupported command %q", op)
	}
	return nil
}

// find returns the index of the first rule with these words (or another spelling of
// them, as iptables -D compares rules by meaning), or -1.
func (c *Chain) find(args []string) int {
	for i, r := range c.Rules {
		if equalWords(r.Words(), args) {
			return i
		}
	}
	key := RuleKey(args)
	for i, r := range c.Rules {
		if RuleKey(r.Words()) == key {
			return i
		}
	}
	return -1
}

func (t *Table) remove(name string) {
	if t.index[name] == nil {
		return
	}
	delete(t.index, name)
	for i, c := range t.Chains {
		if c.Name == name {
			t.Chains = append(t.Chains[:i], t.Chains[i+1:]...)
			return
		}
	}
}

func isNumber(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// splitWords splits a rule line at spaces, keeping double-quoted words together (as
// iptables-save quotes comments) and removing the quotes.
func splitWords(l string) ([]string, error) {
	return appendWords(make([]string, 0, strings.Count(l, " ")+1), l) // room for every word at once
}

// appendWords appends the words of l to words, as splitWords splits them.
func appendWords(words []string, l string) ([]string, error) {
	for i := 0; i < len(l); {
		switch {
		case l[i] == ' ' || l[i] == '\t':
			i++
		case l[i] == '"' && plainQuoted(l[i+1:]) >= 0: // the word is a piece of l
			j := i + 1 + plainQuoted(l[i+1:])
			words = append(words, l[i+1:j])
			i = j + 1
		case l[i] == '"':
			var sb strings.Builder
			j := i + 1
			for ; j < len(l) && l[j] != '"'; j++ {
				if l[j] == '\\' && j+1 < len(l) {
					j++
				}
				sb.WriteByte(l[j])
			}
			if j >= len(l) {
				return nil, fmt.Errorf("unterminated quote in %q", l)
			}
			words = append(words, sb.String())
			i = j + 1
		default:
			j := i
			for j < len(l) && l[j] != ' ' && l[j] != '\t' {
				j++
			}
			words = append(words, l[i:j])
			i = j
		}
	}
	return words, nil
}

// plainQuoted is the index of the quote that ends a quoted word at the start of s,
// or -1 when there is none or the word holds a backslash (an escape to undo).
func plainQuoted(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i
		case '\\':
			return -1
		}
	}
	return -1
}

// Text prints the rule as iptables-restore reads it: "-A CHAIN args". A rule read
// from a line that is spelled so already is that line (no copy is made).
func (r Rule) Text() string {
	if r.Raw != "" && r.spelledAsRaw() {
		return r.Raw
	}
	return r.built()
}

// built is Text written with the line writer.
func (r Rule) built() string {
	var b Buffer
	b.Start(r.Chain)
	b.Args(r.Args)
	return string(b.buf)
}

// spelledAsRaw reports whether Text would print Raw byte for byte: Buffer's words
// (Start, Args, Comment) compared with Raw piece by piece, nothing built.
func (r Rule) spelledAsRaw() bool {
	rest, ok := strings.CutPrefix(r.Raw, "-A ")
	if !ok {
		return false
	}
	if rest, ok = strings.CutPrefix(rest, r.Chain); !ok {
		return false
	}
	args := r.Args
	for i := 0; i < len(args); i++ {
		if i+3 < len(args) && args[i] == "-m" && args[i+1] == "comment" && args[i+2] == "--comment" {
			text := args[i+3]
			if rest, ok = strings.CutPrefix(rest, " -m comment --comment "); !ok || strings.ContainsAny(text, "\"\\\n\r") {
				return false
			}
			if strings.IndexByte(text, ' ') >= 0 {
				if len(rest) < len(text)+2 || rest[0] != '"' || rest[1:1+len(text)] != text || rest[1+len(text)] != '"' {
					return false
				}
				rest = rest[len(text)+2:]
			} else if rest, ok = strings.CutPrefix(rest, text); !ok {
				return false
			}
			i += 3
			continue
		}
		if len(rest) < len(args[i])+1 || rest[0] != ' ' || rest[1:1+len(args[i])] != args[i] {
			return false
		}
		rest = rest[1+len(args[i]):]
	}
	return rest == ""
}

// Write prints a ruleset in iptables-restore form: for each table its chain lines, its
// rules chain by chain, its -X lines and COMMIT.
func (rs *Ruleset) Write(w io.Writer) error {
	b := &Buffer{out: w}
	for _, t := range rs.Tables {
		b.Line("*" + t.Name)
		for _, c := range t.Chains {
			if c.Declared {
				b.ChainLine(c.Name, c.Policy)
			}
		}
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				b.Start(r.Chain)
				b.Args(r.Args)
				b.End()
			}
		}
		for _, d := range t.Deleted {
			b.Line("-X", d)
		}
		b.Line("COMMIT")
	}
	b.Flush()
	return b.err
}

// builtins are netfilter's built-in chains per table. They are never created or
// deleted, and a chain line for one in a --noflush restore sets its policy without
// flushing it.
var builtins = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// BuiltinChains are the built-in chains of a table, in the order iptables-save lists
// them.
func BuiltinChains(table string) []string { return builtins[table] }

// IsBuiltin reports a built-in chain of a table.
func IsBuiltin(table, chain string) bool {
	return slices.Contains(builtins[table], chain)
}

// Clone returns a copy of the ruleset that can be changed (Restore) on its own. Rule
// words are shared: nothing changes them in place.
func (rs *Ruleset) Clone() *Ruleset {
	out := &Ruleset{Tables: make([]*Table, len(rs.Tables))}
	for i, t := range rs.Tables {
		nt := &Table{Name: t.Name, Chains: make([]*Chain, len(t.Chains)), Deleted: slices.Clone(t.Deleted)}
		for j, c := range t.Chains {
			nc := *c
			nc.Rules = slices.Clone(c.Rules)
			nt.Chains[j] = &nc
		}
		out.Tables[i] = nt
	}
	return Reindex(out)
}

// RuleTarget is the chain or target a rule's -j or -g names, "" if none.
func RuleTarget(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--comment" {
			i++
			continue
		}
		if args[i] == "-j" || args[i] == "-g" || args[i] == "--jump" || args[i] == "--goto" {
			return args[i+1]
		}
	}
	return ""
}
