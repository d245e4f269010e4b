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

type entry struct {
	section string // table and name
	header  string
	key     string
	text    string
}

// Audit compares what a node should have with what it has, per service port, in the
// views' canonical order. A port whose entries (section, rule) agree in order and
// meaning has not drifted.
func Audit(want, have *View) []Drift {
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
	labels := map[string]string{}
	for _, v := range []*View{have, want} {
		for k, l := range v.Labels {
			labels[k] = l
		}
	}
	var out []Drift
	for _, p := range names {
		we, he := w[p], h[p]
		if sameOrder(we, he) {
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
func byPort(v *View) map[string][]entry {
	out := map[string][]entry{}
	for _, s := range v.Sections {
		id := s.Table + " " + s.Name
		out[s.Owner] = append(out[s.Owner], entry{section: id, header: s.Header})
		for _, l := range s.Lines {
			owner := l.Owner
			if s.Owner != "" {
				owner = s.Owner
			}
			out[owner] = append(out[owner], entry{section: id, header: s.Header, key: l.key(), text: l.Text})
		}
	}
	return out
}

// id is what makes two entries the same: the section and the line's meaning.
func (e entry) id() [2]string { return [2]string{e.section, e.key} }

// difference lists the entries of a that b lacks (as multisets).
func difference(a, b []entry) []entry {
	have := map[[2]string]int{}
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

func sameOrder(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].id() != b[i].id() {
			return false
		}
	}
	return true
}

func render(es []entry, labels map[string]string) []string {
	var out []string
	for _, e := range es {
		line := e.text
		if e.key == "" && e.text == "" {
			line = e.header
		}
		out = append(out, string(Annotate([]byte(line), labels)))
	}
	return out
}
