package syntax

import (
	"bufio"
	"fmt"
	"io"
)

// WriteSetChanges writes "ipset restore -exist" input that turns the sets from into
// the sets to entry by entry, as kube-proxy's sync does (ipset add and del, never a
// flush): a set to has and from lacks is created, then every entry to has and from
// lacks is added and every entry from has and to lacks deleted. Sets only in from are
// left alone (DestroySets removes them). A set whose type differs in the two is an
// error: ipset cannot turn one into the other while rules use it.
func WriteSetChanges(w io.Writer, from, to []*Set) error {
	bw := bufio.NewWriter(w)
	have := map[string]*Set{}
	for _, s := range from {
		have[s.Name] = s
	}
	for _, s := range to {
		old := have[s.Name]
		switch {
		case old == nil:
			bw.WriteString(CreateLine(s.Name, s) + "\n")
			old = &Set{}
		case old.Type != s.Type:
			return fmt.Errorf("set %s is a %s on the node, not a %s: destroy it first (svcgen cleanup)", s.Name, old.Type, s.Type)
		}
		in := func(entries []string) map[string]bool {
			m := make(map[string]bool, len(entries))
			for _, e := range entries {
				m[e] = true
			}
			return m
		}
		had, want := in(old.Entries), in(s.Entries)
		for _, e := range s.Entries {
			if !had[e] {
				bw.WriteString("add " + s.Name + " " + e + "\n")
			}
		}
		for _, e := range old.Entries {
			if !want[e] {
				bw.WriteString("del " + s.Name + " " + e + "\n")
			}
		}
	}
	return bw.Flush()
}

// WriteDestroySets writes "ipset restore" input that destroys the sets.
func WriteDestroySets(w io.Writer, sets []*Set) error {
	bw := bufio.NewWriter(w)
	for _, s := range sets {
		bw.WriteString("destroy " + s.Name + "\n")
	}
	return bw.Flush()
}
