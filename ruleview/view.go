// Package ruleview is a ruleset as diff and audit see it, whatever the mode: sections
// (an iptables chain, an nft chain, set or map, an IPVS virtual server) with their lines
// in one canonical order, each line with a key that is equal for every spelling of one
// rule and with the service port it belongs to. Each backend builds views of its own
// syntax; this package compares them: a unified diff whose hashed names carry their
// Service, and per service port what is missing, extra or different.
package ruleview

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/diff"
)

// View is a ruleset as sections.
type View struct {
	Sections []*Section
	// Label names what a hashed name belongs to ("KUBE-SVC-XPGD46QRK7WJZT7O" ->
	// "ns1/svc1:p80"; "" for a name of nothing); a diff shows the label beside every
	// such name. It is asked only for the words a diff or a drift shows; nil labels
	// nothing.
	Label func(name string) string
	// Key makes the key of a line whose Key is "" from its text; nil means the text is
	// the key. Two files of one node share nearly every line byte for byte, and a line
	// the other side has as it is needs no key: a backend whose keys are dear to make
	// (an iptables rule is parsed into its matches) leaves them to Key, and diff and
	// audit ask for the keys of the lines that differ only.
	Key func(text string) string
}

// Section is one object of a ruleset with its lines.
type Section struct {
	Table  string // "nat", "filter", "ip kube-proxy"
	Name   string
	Header string // the line that opens the section, as printed (":KUBE-SVC-X -")
	// Owner is the service port the whole section belongs to ("" for shared ones).
	Owner string
	// Rank orders sections within a table before their names do (built-in chains
	// first, then shared ones, then per-service ones).
	Rank  int
	Lines []Line
}

// Line is one rule or element.
type Line struct {
	Text string // as printed
	// Key is equal for equal meaning; "" means View.Key of Text (Text itself when the
	// view has no Key function), so two such lines of one text are the same line.
	Key   string
	Owner string // the service port the line belongs to; "" for the node's own
}

// key is the key of a line of v, made (and kept) on first use when the view makes
// keys from texts.
func (v *View) key(l *Line) string {
	if l.Key != "" {
		return l.Key
	}
	if v.Key == nil {
		return l.Text
	}
	l.Key = v.Key(l.Text)
	return l.Key
}

// sameText reports two lines that are the same without their keys: the same text,
// each keyed by the same explicit key or both by their text.
func sameText(a, b *Line) bool { return a.Text == b.Text && a.Key == b.Key }

// sameLines reports two sections' lines that are pairwise sameText.
func sameLines(a, b []Line) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameText(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// Sort puts sections in the canonical order: by table, rank, owner, then name. A
// Service's sections end up side by side.
func (v *View) Sort() {
	sort.SliceStable(v.Sections, func(i, j int) bool {
		a, b := v.Sections[i], v.Sections[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		return a.Name < b.Name
	})
}

func (v *View) index() map[[2]string]*Section {
	m := make(map[[2]string]*Section, len(v.Sections))
	for _, s := range v.Sections {
		m[[2]string{s.Table, s.Name}] = s
	}
	return m
}

// text renders a view: "*table" before each table's sections, then each section's
// header and lines. A line whose key the other view's same section also has is
// printed as the other view spells it (spelling is not a difference). A section whose
// lines are sameLines as the other's is printed as it is, its keys not made: most
// sections of two rulesets of one node are.
func (v *View) text(other *View) []byte {
	var spelling map[[2]string]*Section
	if other != nil {
		spelling = other.index()
	}
	size := 0
	for _, s := range v.Sections {
		size += len(s.Table) + len(s.Header) + 3
		for _, l := range s.Lines {
			size += len(l.Text) + 1
		}
	}
	var b bytes.Buffer
	b.Grow(size + size/8) // another spelling may be a little longer
	table := ""
	for _, s := range v.Sections {
		if s.Table != table {
			table = s.Table
			b.WriteString("*" + table + "\n")
		}
		b.WriteString(s.Header)
		b.WriteByte('\n')
		var alt map[string]string
		if o := spelling[[2]string{s.Table, s.Name}]; o != nil && !sameLines(s.Lines, o.Lines) {
			alt = make(map[string]string, len(o.Lines))
			for i := range o.Lines {
				alt[other.key(&o.Lines[i])] = o.Lines[i].Text
			}
		}
		for i := range s.Lines {
			text := s.Lines[i].Text
			if alt != nil {
				if t, ok := alt[v.key(&s.Lines[i])]; ok {
					text = t
				}
			}
			b.WriteString(text)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// Unified is the unified diff from old to new (empty when they say the same), every
// labelled name followed by its label in parentheses. The lines are compared as new
// spells them, so iptables-save's spelling of a rule equals svcgen's.
//
// The diff is github.com/rogpeppe/go-internal/diff (the Go toolchain's internal/diff):
// its anchored algorithm is O(n log n) whatever the change, and on two 10,000-service
// rulesets it was the one library whose unified diff was correct and compact for small
// and large changes alike (see docs/dependencies.md, "The diff library").
func Unified(oldName string, old *View, newName string, new *View) []byte {
	newText := new.text(nil)
	oldText := old.text(new)
	d := unified(oldName, oldText, newName, newText)
	if len(d) == 0 {
		return nil
	}
	return Annotate(d, labelOf(old, new))
}

// context is the number of unchanged lines a hunk shows around a change, as diff does.
const context = 3

// unified is diff.Diff of the lines that are not the same at both ends: the texts a
// node and its manifests give share nearly everything, and the library's setup cost
// grows with the whole text (1.5 s for two 395,000-line rulesets that differ in one
// line, 0.02 s for what is left after the ends are cut). Hunk headers are put back
// on the lines of the whole texts.
func unified(oldName string, old []byte, newName string, new []byte) []byte {
	a, b := lines(old), lines(new)
	head := 0
	for head < len(a) && head < len(b) && bytes.Equal(a[head], b[head]) {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && bytes.Equal(a[len(a)-1-tail], b[len(b)-1-tail]) {
		tail++
	}
	cut, cutEnd := max(0, head-context), max(0, tail-context)
	start := size(a[:cut])
	d := diff.Diff(oldName, old[start:len(old)-size(a[len(a)-cutEnd:])], newName, new[start:len(new)-size(b[len(b)-cutEnd:])])
	if cut == 0 || len(d) == 0 {
		return d
	}
	var out bytes.Buffer
	for _, l := range bytes.SplitAfter(d, []byte("\n")) {
		var x, nx, y, ny int
		if n, _ := fmt.Sscanf(string(l), "@@ -%d,%d +%d,%d @@", &x, &nx, &y, &ny); n == 4 && bytes.HasPrefix(l, []byte("@@ -")) {
			fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", x+cut, nx, y+cut, ny)
			continue
		}
		out.Write(l)
	}
	return out.Bytes()
}

// lines splits a text after each newline.
func lines(text []byte) [][]byte {
	l := bytes.SplitAfter(text, []byte("\n"))
	if len(l) > 0 && len(l[len(l)-1]) == 0 {
		l = l[:len(l)-1] // the text ended with a newline
	}
	return l
}

// size is the length of lines in bytes.
func size(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// labelOf labels a name as the last of the views that labels it does.
func labelOf(views ...*View) func(string) string {
	var with []*View
	for _, v := range views {
		if v.Label != nil {
			with = append(with, v)
		}
	}
	if len(with) == 0 {
		return nil
	}
	return func(name string) string {
		for i := len(with) - 1; i >= 0; i-- {
			if l := with[i].Label(name); l != "" {
				return l
			}
		}
		return ""
	}
}

// Annotate writes each labelled word of text followed by " (label)". A word may carry
// a diff's "+" or "-" and a chain line's ":" in front.
func Annotate(text []byte, label func(word string) string) []byte {
	if label == nil {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + len(text)/4)
	s := string(text)
	for len(s) > 0 {
		i := strings.IndexAny(s, " \n\t")
		if i < 0 {
			i = len(s)
		}
		word := s[:i]
		b.WriteString(word)
		if l := label(strings.TrimRight(strings.TrimLeft(word, "+-:"), `"`)); l != "" {
			b.WriteString(" (" + l + ")")
		}
		if i < len(s) {
			b.WriteByte(s[i])
			i++
		}
		s = s[i:]
	}
	return []byte(b.String())
}
