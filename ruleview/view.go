// Package ruleview is a ruleset as diff and audit see it, whatever the mode: sections
// (an iptables chain, an nft chain, set or map, an IPVS virtual server) with their lines
// in one canonical order, each line with a key that is equal for every spelling of one
// rule and with the service port it belongs to. Each backend builds views of its own
// syntax; this package compares them: a unified diff whose hashed names carry their
// Service, and per service port what is missing, extra or different.
package ruleview

import (
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/diff"
)

// View is a ruleset as sections.
type View struct {
	Sections []*Section
	// Labels names what a hashed name belongs to ("KUBE-SVC-XPGD46QRK7WJZT7O" ->
	// "ns1/svc1:p80"); a diff shows the label beside every such name.
	Labels map[string]string
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
	Text  string // as printed
	Key   string // equal for equal meaning ("" means Text)
	Owner string // the service port the line belongs to; "" for the node's own
}

func (l Line) key() string {
	if l.Key == "" {
		return l.Text
	}
	return l.Key
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

func (v *View) section(table, name string) *Section {
	for _, s := range v.Sections {
		if s.Table == table && s.Name == name {
			return s
		}
	}
	return nil
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
// printed as the other view spells it (spelling is not a difference).
func (v *View) text(spelling map[[2]string]*Section) []byte {
	var b strings.Builder
	table := ""
	for _, s := range v.Sections {
		if s.Table != table {
			table = s.Table
			b.WriteString("*" + table + "\n")
		}
		b.WriteString(s.Header + "\n")
		var alt map[string]string
		if o := spelling[[2]string{s.Table, s.Name}]; o != nil {
			alt = make(map[string]string, len(o.Lines))
			for _, l := range o.Lines {
				alt[l.key()] = l.Text
			}
		}
		for _, l := range s.Lines {
			text := l.Text
			if t, ok := alt[l.key()]; ok {
				text = t
			}
			b.WriteString(text + "\n")
		}
	}
	return []byte(b.String())
}

// Unified is the unified diff from old to new (empty when they say the same), every
// labelled name followed by its label in parentheses. The lines are compared as new
// spells them, so iptables-save's spelling of a rule equals svcgen's.
//
// The diff is github.com/rogpeppe/go-internal/diff (the Go toolchain's internal/diff):
// its anchored algorithm is O(n log n) with a bounded output, and on two 10,000-service
// rulesets it was the fastest of the libraries that give a correct unified diff (see
// README).
func Unified(oldName string, old *View, newName string, new *View) []byte {
	newText := new.text(nil)
	oldText := old.text(new.index())
	d := diff.Diff(oldName, oldText, newName, newText)
	if len(d) == 0 {
		return nil
	}
	labels := map[string]string{}
	for k, l := range old.Labels {
		labels[k] = l
	}
	for k, l := range new.Labels {
		labels[k] = l
	}
	return Annotate(d, labels)
}

// Annotate writes each labelled word of text followed by " (label)". A word may carry
// a diff's "+" or "-" and a chain line's ":" in front.
func Annotate(text []byte, labels map[string]string) []byte {
	if len(labels) == 0 {
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
		if l, ok := labels[strings.TrimRight(strings.TrimLeft(word, "+-:"), `"`)]; ok {
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
