package ruleview

import "sort"

// Drift is how one service port (or the node's own rules, Port "") differs between
// the rules it should have and the rules it has.
type Drift struct {
	Port string
	Kind Kind
	// Missing and Extra are the lines (section header, then line) the node lacks and
	// has beyond what it should, with labels.
	Missing, Extra []string
}

// Kind says how a service port drifted.
type Kind string

// Kinds of drift.
const (
	Missing   Kind = "missing"   // the port has no rules on the node
	Extra     Kind = "extra"     // the node has rules for a port that should have none
	Different Kind = "different" // both have rules, and they differ
)

// NodePort names the node's own rules (kube-proxy's fixed chains and jumps) in a report.
const NodePort = "(node)"

// entry is a section's header (line nil) or one of its lines, in a view.
type entry struct {
	section *Section
	line    *Line
	view    *View
}

// Audit compares what a node should have with what it has, per service port, in the
// views' canonical order. A port whose entries (section, rule) agree in order and
// meaning has not drifted.
func Audit(want, have *View) []Drift { return audit(want, have, same) }

func audit(want, have *View, same func(a, b entry) bool) []Drift {
	w, h := byPort(want), byPort(have)
	ports := map[string]bool{}
	for p := range w {
		ports[p] = true
	}
	for p := range h {
		ports[p] = true
	}
	names := make([]string, 0, len(ports))
	for p := range ports {
		names = append(names, p)
	}
	sort.Strings(names)
	labels := labelOf(have, want)
	var out []Drift
	for _, p := range names {
		we, he := w[p], h[p]
		if sameOrder(we, he, same) {
			continue // nearly every port: nothing to count
		}
		miss, extra := difference(we, he), difference(he, we)
		d := Drift{Port: p, Kind: Different}
		switch {
		case len(he) == 0:
			d.Kind = Missing
		case len(we) == 0:
			d.Kind = Extra
		}
		if d.Port == "" {
			d.Port = NodePort
		}
		d.Missing = render(miss, labels)
		d.Extra = render(extra, labels)
		if len(miss) == 0 && len(extra) == 0 {
			d.Missing = []string{"(the same rules in another order)"}
		}
		out = append(out, d)
	}
	return out
}

// byPort lists each port's entries: every section it owns (its header, then each
// line) and its lines in shared sections. Shared sections' headers are the node's.
// The entries are counted first and cut from one slice: a 10,000-Service view has
// 400,000 of them.
func byPort(v *View) map[string][]entry {
	count := map[string]int{}
	v.eachEntry(func(owner string, _ entry) { count[owner]++ })
	all := make([]entry, 0, len(v.Sections)+v.lines())
	out := make(map[string][]entry, len(count))
	for owner, n := range count {
		out[owner] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	v.eachEntry(func(owner string, e entry) { out[owner] = append(out[owner], e) })
	return out
}

// eachEntry calls fn with every entry of the view and the port it belongs to, in
// order.
func (v *View) eachEntry(fn func(owner string, e entry)) {
	for _, s := range v.Sections {
		fn(s.Owner, entry{section: s, view: v})
		for i := range s.Lines {
			owner := s.Lines[i].Owner
			if s.Owner != "" {
				owner = s.Owner
			}
			fn(owner, entry{section: s, line: &s.Lines[i], view: v})
		}
	}
}

// lines is the number of lines of the view's sections.
func (v *View) lines() int {
	n := 0
	for _, s := range v.Sections {
		n += len(s.Lines)
	}
	return n
}

// id is what makes two entries the same: the section and the line's meaning ("" for
// a header).
func (e entry) id() [3]string {
	if e.line == nil {
		return [3]string{e.section.Table, e.section.Name, ""}
	}
	return [3]string{e.section.Table, e.section.Name, e.view.key(e.line)}
}

// same reports entries with the same id, making keys only for lines of different
// texts.
func same(a, b entry) bool {
	if a.section.Table != b.section.Table || a.section.Name != b.section.Name || (a.line == nil) != (b.line == nil) {
		return false
	}
	return a.line == nil || sameText(a.line, b.line) || a.id() == b.id()
}

// difference lists the entries of a that b lacks (as multisets).
func difference(a, b []entry) []entry {
	have := map[[3]string]int{}
	for _, e := range b {
		have[e.id()]++
	}
	var out []entry
	for _, e := range a {
		if have[e.id()] > 0 {
			have[e.id()]--
			continue
		}
		out = append(out, e)
	}
	return out
}

func sameOrder(a, b []entry, same func(a, b entry) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}

func render(es []entry, labels func(string) string) []string {
	var out []string
	for _, e := range es {
		line := e.section.Header
		if e.line != nil {
			line = e.line.Text
		}
		out = append(out, string(Annotate([]byte(line), labels)))
	}
	return out
}
