package plan

import (
	"fmt"
	"slices"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// SetChanges are the operations that turn the sets from into the sets to entry by
// entry, as kube-proxy's sync does (ipset add and del, never a flush, so no set is
// empty for a moment): for each set of to, in order, it is created if from lacks it,
// then every entry to has and from lacks is added and every entry from has and to
// lacks deleted. Sets only in from are left alone (Cleanup destroys them). A set whose
// type differs in the two is an error: ipset cannot turn one into the other while
// rules use it.
func SetChanges(from, to []*syntax.Set) ([]Op, error) {
	have := map[string]*syntax.Set{}
	for _, s := range from {
		have[s.Name] = s
	}
	var ops []Op
	for _, s := range to {
		old := have[s.Name]
		switch {
		case old == nil:
			ops = append(ops, Op{Kind: CreateSet, Set: s})
			old = &syntax.Set{}
		case old.Type != s.Type:
			return nil, fmt.Errorf("set %s is a %s on the node, not a %s: destroy it first (svcgen cleanup)", s.Name, old.Type, s.Type)
		}
		had, want := entrySet(old.Entries), entrySet(s.Entries)
		for _, e := range s.Entries {
			if !had[e] {
				ops = append(ops, Op{Kind: AddEntry, Set: s, Entry: e})
			}
		}
		for _, e := range old.Entries {
			if !want[e] {
				ops = append(ops, Op{Kind: DelEntry, Set: s, Entry: e})
			}
		}
	}
	return ops, nil
}

func entrySet(entries []string) map[string]bool {
	m := make(map[string]bool, len(entries))
	for _, e := range entries {
		m[e] = true
	}
	return m
}

// SetsBack are the operations that put the named sets back as they were (was), from
// how they are now: what undoes a set change, whether it was carried out whole or, as
// ipset restore stops at its first failing line, in part. A named set now has and was
// lacks is destroyed.
func SetsBack(now, was []*syntax.Set, names []string) ([]Op, error) {
	named := func(sets []*syntax.Set) []*syntax.Set {
		return slices.DeleteFunc(slices.Clone(sets), func(s *syntax.Set) bool { return !slices.Contains(names, s.Name) })
	}
	now, was = named(now), named(was)
	ops, err := SetChanges(now, was)
	if err != nil {
		return nil, err
	}
	for _, s := range now {
		if !slices.ContainsFunc(was, func(o *syntax.Set) bool { return o.Name == s.Name }) {
			ops = append(ops, Op{Kind: DestroySet, Set: s})
		}
	}
	return ops, nil
}
