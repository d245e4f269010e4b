package syntax

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// Verbs of the operations svcgen writes and reads.
const (
	Add    = "add"
	Flush  = "flush"
	Delete = "delete"
)

// Op is one nft operation: a verb (Add, Flush or Delete) and its object.
type Op struct {
	Verb string
	Obj  knftables.Object
}

// Adds are "add" operations of objects.
func Adds(objs []knftables.Object) []Op {
	ops := make([]Op, len(objs))
	for i, o := range objs {
		ops[i] = Op{Add, o}
	}
	return ops
}

// ReplaceTable is "add table" then "delete table": whether or not the table existed,
// it is gone, and the table the following lines build holds only what they add.
func ReplaceTable(t *knftables.Table) []Op {
	return []Op{{Add, t}, DeleteTable()}
}

// DeleteTable deletes the kube-proxy table of the writer's family, the whole of it.
func DeleteTable() Op { return Op{Delete, &knftables.Table{}} }

// commitMark adds CommitChain and deletes it: a change to the ruleset that leaves
// nothing behind.
func commitMark() []Op {
	c := &knftables.Chain{Name: CommitChain}
	return []Op{{Add, c}, {Delete, c}}
}

// Counts are what a writer wrote, by kind: what a load adds, flushes and deletes.
type Counts struct {
	Chains, Rules, Elements int // added
	Flushed                 int // chains flushed
	Deleted                 int // objects of any kind deleted
	// Marked: the text ends with the commit mark (see CommitMark), which Chains and
	// Deleted leave out.
	Marked bool
}

// Sure reports whether the text is sure to change the ruleset when nf_tables commits
// it: it adds a rule (always a new one), deletes something (which fails if it is not
// there), or carries the commit mark. Text that only adds chains, sets or elements, or
// flushes, may find the kernel already as it wants it and commit nothing.
func (c Counts) Sure() bool { return c.Rules > 0 || c.Deleted > 0 || c.Marked }

// Plus is the sum of two counts (of several transactions: Marked, a transaction's
// own, is left false).
func (c Counts) Plus(o Counts) Counts {
	return Counts{Chains: c.Chains + o.Chains, Rules: c.Rules + o.Rules, Elements: c.Elements + o.Elements, Flushed: c.Flushed + o.Flushed, Deleted: c.Deleted + o.Deleted}
}

// Writer is the one writer of nft script lines: every line svcgen writes for nft -f,
// and the shell lines of a staged script, go through it, so newlines and quoting are
// in one place. It streams through a 64 KB buffer, and its first error sticks.
//
// Object text is knftables'. Nearly every line of a table is an "add" of a regular
// chain, a rule or an element, whose text is plain: the writer writes those itself,
// without fmt and without making a knftables object per rule, to the bytes knftables
// writes (TestScriptAsKnftables holds it to that). Everything else (the table, base
// chains, sets and maps, flush and delete, and any object that is not plain) goes
// through a knftables transaction, which checks the object and writes it.
type Writer struct {
	out    io.Writer
	lines  lineFormat
	buf    []byte
	err    error
	counts Counts
	// header is a comment line written before the first line, if any line is.
	header string
}

// Header has the output start with "# text" once anything is written (after a staged
// script's "#!/bin/sh"): an output that turns out empty stays empty. text must hold no
// newline.
func (w *Writer) Header(text string) {
	if strings.ContainsAny(text, "\n\r") {
		w.fail(fmt.Errorf("header %q holds a newline", text))
		return
	}
	w.header = text
}

// begin writes the header before the first line.
func (w *Writer) begin() {
	if w.header != "" {
		w.buf = append(append(append(w.buf, "# "...), w.header...), '\n')
		w.header = ""
	}
}

// lineFormat writes one operation's line for a family.
type lineFormat struct {
	family knftables.Family
	fake   *knftables.Fake // whose transactions write what is not plain
}

func newLineFormat(family knftables.Family) lineFormat {
	return lineFormat{family: family, fake: knftables.NewFake(family, TableName)}
}

// FlushSize is the chunk a writer sends on at once.
const FlushSize = 64 << 10

// NewWriter returns a writer of a family's lines to out.
func NewWriter(out io.Writer, family knftables.Family) *Writer {
	return &Writer{out: out, lines: newLineFormat(family), buf: make([]byte, 0, FlushSize+4096)}
}

// Op writes one operation.
func (w *Writer) Op(verb string, o knftables.Object) {
	w.begin()
	var err error
	w.buf, err = w.lines.appendOp(w.buf, verb, o)
	if err != nil {
		w.fail(err)
		return
	}
	w.count(verb, o)
	w.end()
}

// Ops writes operations in order.
func (w *Writer) Ops(ops []Op) {
	for _, o := range ops {
		w.Op(o.Verb, o.Obj)
	}
}

// CommitMark ends a transaction with the commit mark: CommitChain added and deleted
// again, a change to the ruleset that leaves nothing behind, so that nf_tables
// commits the transaction (and moves its generation by one) whatever the kernel
// holds. Counts leave it out.
func (w *Writer) CommitMark() {
	before := w.counts
	w.Ops(commitMark())
	w.counts = before
	w.counts.Marked = true
}

func (w *Writer) count(verb string, o knftables.Object) {
	switch o.(type) {
	case *knftables.Chain:
		switch verb {
		case Add:
			w.counts.Chains++
		case Flush:
			w.counts.Flushed++
		}
	case *knftables.Rule:
		if verb == Add {
			w.counts.Rules++
		}
	case *knftables.Element:
		if verb == Add {
			w.counts.Elements++
		}
	}
	if verb == Delete {
		w.counts.Deleted++
	}
}

// Counts are what the writer has written.
func (w *Writer) Counts() Counts { return w.counts }

// Chain writes "add chain FAMILY kube-proxy NAME" for a regular chain.
func (w *Writer) Chain(name string) {
	w.begin()
	w.buf = w.lines.appendChain(w.buf, name)
	w.counts.Chains++
	w.end()
}

// Rule writes "add rule FAMILY kube-proxy CHAIN RULE [comment "..."]"; it is a
// RuleSink.
func (w *Writer) Rule(chain string, text []byte, comment string) {
	w.begin()
	w.buf = w.lines.appendRule(w.buf, chain, text, comment)
	w.counts.Rules++
	w.end()
}

// Element writes "add element FAMILY kube-proxy NAME { KEY [comment "..."] [: VALUE] }"
// for a plain element (see Op for the others).
func (w *Writer) Element(e *knftables.Element) {
	w.begin()
	w.buf = w.lines.appendElement(w.buf, e)
	w.counts.Elements++
	w.end()
}

// RuleSink receives a chain's rules in order: the rule's text, only valid during the
// call, and its comment ("" for none).
type RuleSink func(chain string, text []byte, comment string)

// stagedHeader starts a staged shell script (after "#!/bin/sh" and the header).
const stagedHeader = `# kube-proxy's nftables table, loaded in stages (svcgen compile --stages): regular chains,
# sets and maps; their rules (those with anonymous sets apart); the set and map
# elements; then the base chains that hook the table into netfilter. Not atomic: see
# svcgen's README.
set -e
`

// stageTag names a stage's here-document: SVCGEN_STAGE_1 for the first.
const stageTag = "SVCGEN_STAGE_"

// Staged writes a shell script that runs each stage as an "nft -f" transaction of
// its own, in order, stopping at the first that fails. Parse passes over its shell
// lines (isShellLine).
func (w *Writer) Staged(stages []func(*Writer)) {
	w.raw("#!/bin/sh\n")
	w.begin()
	w.raw(stagedHeader)
	for i, stage := range stages {
		tag := stageTag + strconv.Itoa(i+1)
		w.raw("nft -f - <<'" + tag + "'\n")
		stage(w)
		w.raw(tag + "\n")
	}
}

// isShellLine reports the lines of a staged script around its nft input.
func isShellLine(l string) bool {
	return l == "set -e" || strings.HasPrefix(l, "nft -f - <<'"+stageTag) || strings.HasPrefix(l, stageTag)
}

// raw writes text that is not an nft operation (the shell lines of a staged script).
func (w *Writer) raw(text string) {
	w.buf = append(w.buf, text...)
	w.end()
}

// end sends the buffer on once it is full.
func (w *Writer) end() {
	if len(w.buf) >= FlushSize {
		w.Flush()
	}
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Flush sends what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.out.Write(w.buf)
	}
	w.buf = w.buf[:0]
	return w.err
}

// WriteState writes a state as knftables' Fake.Dump would: "add" lines only.
func WriteState(out io.Writer, st *State) error {
	w := NewWriter(out, st.Family)
	w.Ops(Adds(st.Objects()))
	return w.Flush()
}

// WriteOps writes operations on the kube-proxy table of a family.
func WriteOps(out io.Writer, family knftables.Family, ops []Op) error {
	w := NewWriter(out, family)
	w.Ops(ops)
	return w.Flush()
}

// appendOp appends one operation's line.
func (f lineFormat) appendOp(b []byte, verb string, o knftables.Object) ([]byte, error) {
	if verb == Add {
		switch o := o.(type) {
		case *knftables.Chain:
			if plainChain(o) {
				return f.appendChain(b, o.Name), nil
			}
		case *knftables.Rule:
			if plainRule(o) {
				return f.appendRule(b, o.Chain, []byte(o.Rule), ptrString(o.Comment)), nil
			}
		case *knftables.Element:
			if plainElement(o) {
				return f.appendElement(b, o), nil
			}
		}
	}
	tx := f.fake.NewTransaction()
	switch verb {
	case Add:
		tx.Add(o)
	case Flush:
		tx.Flush(o)
	case Delete:
		tx.Delete(o)
	default:
		return b, fmt.Errorf("nftables: verb %q is not one svcgen writes", verb)
	}
	text := tx.String()
	if msg, failed := strings.CutPrefix(text, "# ERROR: "); failed {
		return b, fmt.Errorf("nftables: %s", msg)
	}
	return append(b, text...), nil
}

// start appends "VERB KIND FAMILY kube-proxy NAME".
func (f lineFormat) start(b []byte, what, name string) []byte {
	b = append(b, what...)
	b = append(b, f.family...)
	b = append(b, " "+TableName+" "...)
	return append(b, name...)
}

func (f lineFormat) appendChain(b []byte, name string) []byte {
	return append(f.start(b, "add chain ", name), '\n')
}

func (f lineFormat) appendRule(b []byte, chain string, text []byte, comment string) []byte {
	b = f.start(b, "add rule ", chain)
	b = append(b, ' ')
	return append(appendRuleBody(b, text, comment), '\n')
}

// appendRuleBody appends a rule's text and its comment as knftables writes them:
// `RULE comment "C"` (Go quoting).
func appendRuleBody(b, text []byte, comment string) []byte {
	b = append(b, text...)
	if comment != "" {
		b = append(b, " comment "...)
		b = strconv.AppendQuote(b, comment)
	}
	return b
}

// RuleLine is a rule's text with its comment, as an "add rule" line ends.
func RuleLine(r *knftables.Rule) string {
	if r.Comment == nil {
		return r.Rule
	}
	return string(appendRuleBody(nil, []byte(r.Rule), *r.Comment))
}

func (f lineFormat) appendElement(b []byte, e *knftables.Element) []byte {
	name := e.Set
	if name == "" {
		name = e.Map
	}
	b = f.start(b, "add element ", name)
	b = append(b, " { "...)
	b = appendJoined(b, e.Key)
	if e.Comment != nil {
		b = append(b, " comment "...)
		b = strconv.AppendQuote(b, *e.Comment)
	}
	if len(e.Value) > 0 {
		b = append(b, " : "...)
		b = appendJoined(b, e.Value)
	}
	return append(b, " }\n"...)
}

// appendJoined appends the parts of a key or value joined by " . ".
func appendJoined(b []byte, parts []string) []byte {
	for i, p := range parts {
		if i > 0 {
			b = append(b, " . "...)
		}
		b = append(b, p...)
	}
	return b
}

// plainChain: a regular chain without a comment, in the writer's own table.
func plainChain(c *knftables.Chain) bool {
	return c.Name != "" && c.Family == "" && c.Table == "" && c.Handle == nil && c.Type == nil && c.Hook == nil &&
		c.Priority == nil && c.Policy == nil && c.Device == nil && c.Comment == nil
}

// plainRule: a rule appended to a chain of the writer's own table (no index or
// handle), with no comment or one that is not empty (rule's "" is none).
func plainRule(r *knftables.Rule) bool {
	return r.Chain != "" && r.Rule != "" && r.Index == nil && r.Handle == nil && r.Family == "" && r.Table == "" &&
		(r.Comment == nil || *r.Comment != "")
}

// plainElement: an element of one set or map of the writer's own table, with a key,
// and a value exactly when it is a map's.
func plainElement(e *knftables.Element) bool {
	return e.Family == "" && e.Table == "" && len(e.Key) > 0 &&
		((e.Set != "" && e.Map == "" && len(e.Value) == 0) || (e.Map != "" && e.Set == "" && len(e.Value) > 0))
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Text builds one rule's text in memory it reuses, words joined by single spaces as
// knftables.Concat joins them. The rules layer writes every rule through it.
type Text struct{ b []byte }

// Reset empties the text.
func (t *Text) Reset() *Text {
	t.b = t.b[:0]
	return t
}

// Bytes is the text, valid until the next Reset.
func (t *Text) Bytes() []byte { return t.b }

func (t *Text) space() {
	if len(t.b) > 0 {
		t.b = append(t.b, ' ')
	}
}

// W appends words.
func (t *Text) W(words ...string) *Text {
	for _, w := range words {
		t.space()
		t.b = append(t.b, w...)
	}
	return t
}

// At appends a reference to a named set or map: "@name".
func (t *Text) At(name string) *Text {
	t.space()
	t.b = append(t.b, '@')
	t.b = append(t.b, name...)
	return t
}

// Int appends a decimal number.
func (t *Text) Int(n int) *Text {
	t.space()
	t.b = strconv.AppendInt(t.b, int64(n), 10)
	return t
}

// Addr appends an address.
func (t *Text) Addr(a netip.Addr) *Text {
	t.space()
	t.b = a.AppendTo(t.b)
	return t
}

// Prefix appends a prefix.
func (t *Text) Prefix(p netip.Prefix) *Text {
	t.space()
	t.b = p.AppendTo(t.b)
	return t
}

// AddrPort appends "IP:port" ("[IPv6]:port").
func (t *Text) AddrPort(ap netip.AddrPort) *Text {
	t.space()
	t.b = ap.AppendTo(t.b)
	return t
}
