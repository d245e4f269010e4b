package syntax

import (
	"slices"

	"sigs.k8s.io/knftables"
)

// SameRule reports whether r is the rule that text and comment spell: the same text, or
// the same canonical form (nft lists a rule in its own spelling; see Canonical), and
// the same comment. It is the one rule comparison every sync makes.
func SameRule(r *knftables.Rule, text []byte, comment string) bool {
	return ptrString(r.Comment) == comment && (r.Rule == string(text) || Canonical(r.Rule) == Canonical(string(text)))
}

// SameRules reports whether two chains hold the same rules in the same order.
func SameRules(a, b []*knftables.Rule) bool {
	return slices.EqualFunc(a, b, func(x, y *knftables.Rule) bool { return SameRule(x, []byte(y.Rule), ptrString(y.Comment)) })
}

// SameChain reports whether two chains are defined alike: both regular, or hooked in
// the same way (a priority compared as the number it stands for: "dstnat-10" is -110),
// with the same comment. Rules are not compared.
func SameChain(family knftables.Family, a, b *knftables.Chain) bool {
	return eq(a.Type, b.Type) && eq(a.Hook, b.Hook) && eq(a.Device, b.Device) && eq(a.Policy, b.Policy) &&
		eq(a.Comment, b.Comment) && samePriority(family, a.Priority, b.Priority)
}

func samePriority(family knftables.Family, a, b *knftables.BaseChainPriority) bool {
	if a == nil || b == nil {
		return a == b
	}
	pa, errA := knftables.ParsePriority(family, string(*a))
	pb, errB := knftables.ParsePriority(family, string(*b))
	if errA != nil || errB != nil {
		return *a == *b
	}
	return pa == pb
}

// SameSet reports whether two sets are defined alike (their elements not compared).
// Durations count in whole seconds, as nft writes them.
func SameSet(a, b *knftables.Set) bool {
	return a.Type == b.Type && a.TypeOf == b.TypeOf && slices.Equal(a.Flags, b.Flags) &&
		sameSeconds(a.Timeout, b.Timeout) && sameSeconds(a.GCInterval, b.GCInterval) && eq(a.Size, b.Size) &&
		eq(a.Policy, b.Policy) && (a.AutoMerge != nil && *a.AutoMerge) == (b.AutoMerge != nil && *b.AutoMerge) &&
		eq(a.Comment, b.Comment)
}

// SameMap reports whether two maps are defined alike (their elements not compared).
func SameMap(a, b *knftables.Map) bool {
	return a.Type == b.Type && a.TypeOf == b.TypeOf && slices.Equal(a.Flags, b.Flags) &&
		sameSeconds(a.Timeout, b.Timeout) && sameSeconds(a.GCInterval, b.GCInterval) && eq(a.Size, b.Size) &&
		eq(a.Policy, b.Policy) && eq(a.Comment, b.Comment)
}

// eq compares two optional values.
func eq[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameSeconds[D ~int64](a, b *D) bool {
	if a == nil || b == nil {
		return a == b
	}
	const second = 1e9
	return int64(*a)/second == int64(*b)/second
}
