package nft

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// lineWriter is the one writer of nft script lines; it streams through a 64 KB
// buffer, and its first error sticks.
//
// Object text is knftables'. Nearly every line of a table is an "add" of a regular
// chain, a rule or an element, whose text is plain: lineWriter writes those itself,
// without fmt and without making a knftables object per rule, to the bytes knftables
// writes (TestScriptAsKnftables holds it to that). Everything else (the table, base
// chains, sets and maps, flush and delete, and any object that is not plain) goes
// through a knftables transaction, which checks the object and writes it.
type lineWriter struct {
	out    io.Writer
	family knftables.Family
	fake   *knftables.Fake
	buf    []byte
	err    error
}

const flushSize = 64 << 10

func newLineWriter(out io.Writer, family knftables.Family) *lineWriter {
	return &lineWriter{out: out, family: family, fake: knftables.NewFake(family, tableName), buf: make([]byte, 0, flushSize+4096)}
}

// op writes one operation.
func (lw *lineWriter) op(verb string, o knftables.Object) {
	if verb == "add" {
		switch o := o.(type) {
		case *knftables.Chain:
			if plainChain(o) {
				lw.chain(o.Name)
				return
			}
		case *knftables.Rule:
			if plainRule(o) {
				lw.rule(o.Chain, []byte(o.Rule), ptrString(o.Comment))
				return
			}
		case *knftables.Element:
			if plainElement(o) {
				lw.element(o)
				return
			}
		}
	}
	tx := lw.fake.NewTransaction()
	switch verb {
	case "add":
		tx.Add(o)
	case "flush":
		tx.Flush(o)
	case "delete":
		tx.Delete(o)
	}
	text := tx.String()
	if msg, failed := strings.CutPrefix(text, "# ERROR: "); failed {
		lw.fail(fmt.Errorf("nftables: %s", msg))
		return
	}
	lw.buf = append(lw.buf, text...)
	lw.end()
}

// raw writes text that is not an nft operation (the shell lines of a staged script).
func (lw *lineWriter) raw(text string) {
	lw.buf = append(lw.buf, text...)
	lw.end()
}

// start begins "VERB KIND FAMILY kube-proxy NAME".
func (lw *lineWriter) start(what, name string) {
	lw.buf = append(lw.buf, what...)
	lw.buf = append(lw.buf, lw.family...)
	lw.buf = append(lw.buf, " "+tableName+" "...)
	lw.buf = append(lw.buf, name...)
}

// chain writes "add chain FAMILY kube-proxy NAME" for a regular chain.
func (lw *lineWriter) chain(name string) {
	lw.start("add chain ", name)
	lw.buf = append(lw.buf, '\n')
	lw.end()
}

// rule writes "add rule FAMILY kube-proxy CHAIN RULE [comment "..."]"; it is a ruleSink.
func (lw *lineWriter) rule(chain string, text []byte, comment string) {
	lw.start("add rule ", chain)
	lw.buf = append(lw.buf, ' ')
	lw.buf = append(lw.buf, text...)
	if comment != "" {
		lw.buf = append(lw.buf, " comment "...)
		lw.buf = strconv.AppendQuote(lw.buf, comment)
	}
	lw.buf = append(lw.buf, '\n')
	lw.end()
}

// element writes "add element FAMILY kube-proxy NAME { KEY [comment "..."] [: VALUE] }"
// for a plain element.
func (lw *lineWriter) element(e *knftables.Element) {
	name := e.Set
	if name == "" {
		name = e.Map
	}
	lw.start("add element ", name)
	lw.buf = append(lw.buf, " { "...)
	lw.buf = appendJoined(lw.buf, e.Key)
	if e.Comment != nil {
		lw.buf = append(lw.buf, " comment "...)
		lw.buf = strconv.AppendQuote(lw.buf, *e.Comment)
	}
	if len(e.Value) > 0 {
		lw.buf = append(lw.buf, " : "...)
		lw.buf = appendJoined(lw.buf, e.Value)
	}
	lw.buf = append(lw.buf, " }\n"...)
	lw.end()
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

// end sends the buffer on once it is full.
func (lw *lineWriter) end() {
	if len(lw.buf) >= flushSize {
		lw.flush()
	}
}

func (lw *lineWriter) fail(err error) {
	if lw.err == nil {
		lw.err = err
	}
}

// flush sends what is buffered and returns the first error.
func (lw *lineWriter) flush() error {
	if lw.err == nil && len(lw.buf) > 0 {
		_, lw.err = lw.out.Write(lw.buf)
	}
	lw.buf = lw.buf[:0]
	return lw.err
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

// ruleText builds one rule's text in memory it reuses, words joined by single spaces
// as knftables.Concat joins them.
type ruleText struct{ b []byte }

func (t *ruleText) reset() *ruleText {
	t.b = t.b[:0]
	return t
}

func (t *ruleText) space() {
	if len(t.b) > 0 {
		t.b = append(t.b, ' ')
	}
}

// w appends words.
func (t *ruleText) w(words ...string) *ruleText {
	for _, w := range words {
		t.space()
		t.b = append(t.b, w...)
	}
	return t
}

// at appends a reference to a named set or map: "@name".
func (t *ruleText) at(name string) *ruleText {
	t.space()
	t.b = append(t.b, '@')
	t.b = append(t.b, name...)
	return t
}

func (t *ruleText) int(n int) *ruleText {
	t.space()
	t.b = strconv.AppendInt(t.b, int64(n), 10)
	return t
}

func (t *ruleText) addr(a netip.Addr) *ruleText {
	t.space()
	t.b = a.AppendTo(t.b)
	return t
}

func (t *ruleText) prefix(p netip.Prefix) *ruleText {
	t.space()
	t.b = p.AppendTo(t.b)
	return t
}

// addrPort appends "IP:port" ("[IPv6]:port").
func (t *ruleText) addrPort(ap netip.AddrPort) *ruleText {
	t.space()
	t.b = ap.AppendTo(t.b)
	return t
}
