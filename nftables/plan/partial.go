// Package plan is the nftables sync: from the kube-proxy table on a node (have) and a
// service map (want), the change that makes one into the other, as kube-proxy's
// partial sync makes it (Partial). The change is planned as a model, by comparing the
// wanted table (nftables/rules) with the node's (nftables/syntax's State), one
// Service's rules at a time, and written as "nft -f" text last: in one script
// (Change.Write), or as apply loads it (Change.Transactions: staged, each transaction
// with the commit mark). Told which Services changed since a table was loaded, Since
// plans the same change from those Services' parts of the two tables alone.
package plan

import (
	"io"
	"maps"
	"slices"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// Options choose a sync.
type Options struct {
	// Previous is what is loaded now: an earlier svcgen script or "nft list ruleset"
	// output (see syntax.Parse). Without a kube-proxy table of the service map's family
	// (or without Previous), the change is the whole table.
	Previous *syntax.Ruleset
	// Minimal writes only what differs: chains whose rules did not change and affinity
	// sets that are the same are left out even when their Service changed (kube-proxy's
	// partial sync rewrites every chain of a changed Service), a new chain is only
	// added and a changed one only flushed (see Partial).
	Minimal bool
}

// Change is a sync planned and not yet written: the whole table (Full), or
// kube-proxy's partial sync as operations by kind, in the order they are written.
type Change struct {
	// Full: the change writes the whole table, replacing any there (the node has no
	// table, or one that differs outside the Services: kube-proxy's full sync).
	Full bool
	// Chains are the chains of the Services that changed, each added and flushed (or,
	// minimal, added when new and flushed when changed), then given its rules.
	Chains []ChainChange
	// AffinitySets are added (the affinity sets of the Services that changed).
	AffinitySets []*knftables.Set
	// DeletedElements and AddedElements reconcile the Services' sets and maps as
	// kube-proxy's element storage does: a changed value is a delete and an add.
	DeletedElements, AddedElements []*knftables.Element
	// StaleChains are flushed, all of them, then deleted; StaleSets deleted.
	StaleChains, StaleSets []string

	table   *rules.Table // the table wanted (nil when planned from a State; by Since, a part)
	noTable bool         // the node has no table of the family
	// moved are the element keys of the parts a change planned by Since takes away
	// and puts in (see MoveKeys).
	moved [2]partKeys
}

// ChainChange is one chain a partial sync writes: added, flushed, or both, then its
// rules.
type ChainChange struct {
	Name       string
	Add, Flush bool
	rules      func(syntax.RuleSink)
}

// Empty reports a change that writes nothing.
func (c *Change) Empty() bool {
	return !c.Full && len(c.Chains) == 0 && len(c.AffinitySets) == 0 && len(c.DeletedElements) == 0 &&
		len(c.AddedElements) == 0 && len(c.StaleChains) == 0 && len(c.StaleSets) == 0
}

// Write writes the change for a service map against opts.Previous as one script.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	t := rules.NewTable(sm)
	w := syntax.NewWriter(out, t.Family())
	w.Header(sm.Header("nftables") + ", a partial sync")
	Partial(t, opts).Write(w)
	return w.Flush()
}

// Write writes the change as one transaction.
func (c *Change) Write(w *syntax.Writer) {
	if c.Full {
		c.table.WriteScript(w)
		return
	}
	for _, ch := range c.Chains {
		chain := &knftables.Chain{Name: ch.Name}
		if ch.Add {
			w.Op(syntax.Add, chain)
		}
		if ch.Flush {
			w.Op(syntax.Flush, chain)
		}
	}
	for _, s := range c.AffinitySets {
		w.Op(syntax.Add, s)
	}
	for _, ch := range c.Chains {
		ch.rules(w.Rule)
	}
	for _, e := range c.DeletedElements {
		w.Op(syntax.Delete, e)
	}
	for _, e := range c.AddedElements {
		w.Op(syntax.Add, e)
	}
	for _, verb := range []string{syntax.Flush, syntax.Delete} {
		for _, name := range c.StaleChains {
			w.Op(verb, &knftables.Chain{Name: name})
		}
	}
	for _, name := range c.StaleSets {
		w.Op(syntax.Delete, &knftables.Set{Name: name})
	}
}

// Partial plans kube-proxy's partial sync from opts.Previous to the table t: the
// chains of Services whose chains or affinity sets changed, each added and flushed
// (Services by namespace/name, chains by name); their affinity sets; the rules of those
// chains; element deletes, then element adds; every stale chain flushed, then each
// deleted; stale affinity sets deleted. Nothing is referred to before it exists, and a
// chain is deleted only when nothing refers to it any more. The wanted rules are made
// twice, to compare and for the Services that changed, and never kept all at once.
//
// With opts.Minimal, only what differs is written, in the same order: a chain that is
// new is added, a chain whose rules differ is flushed, each followed by its rules; a
// chain of a changed Service whose rules are the same, and an affinity set whose
// definition is the same, are left out. (kube-proxy rewrites every chain of a changed
// Service: its chains' names carry an endpoint's address and port, so one moved
// endpoint rewrites every endpoint chain of the Service although only one differs.)
//
// If anything outside the Services differs (base chains, fixed rules, container
// definitions, the node-port addresses), kube-proxy would run a full sync; so does
// this: the change is Full, the whole table.
//
// Unlike kube-proxy, which deletes stale chains a second later in a transaction of
// their own (kernels before 6.2 may still count a chain as referenced right after the
// map element that named it is deleted), the stale chains are deleted in the same
// transaction.
func Partial(t *rules.Table, opts Options) *Change {
	var have *syntax.State
	if opts.Previous != nil {
		have = opts.Previous.Tables[t.Family()]
	}
	c := &Change{table: t, noTable: have == nil}
	if have == nil || !partial(c, have, fromTable(t), opts.Minimal, nil) {
		*c = Change{Full: true, table: t, noTable: have == nil}
	}
	return c
}

// partial plans the partial sync from have to want into c; false when the fixed part
// differs (a full sync). have and want may be parts of two tables (the Services that
// changed, see Since): rest then says which element keys the Services outside the
// parts write, alike in both (nil: none, the tables are whole).
func partial(c *Change, have *syntax.State, want *target, minimal bool, rest restKeys) bool {
	if !sameFixed(have, want.fixed) {
		return false
	}
	diff := changedParts(have, want)
	for _, owner := range diff.owners {
		for _, ch := range want.chains {
			if syntax.OwnerOf(ch.name) != owner || minimal && !diff.chains[ch.name] {
				continue
			}
			cc := ChainChange{Name: ch.name, Add: true, Flush: true, rules: ch.rules}
			if minimal {
				cc.Add, cc.Flush = have.Chains[ch.name] == nil, have.Chains[ch.name] != nil
			}
			c.Chains = append(c.Chains, cc)
		}
		for _, s := range want.sets {
			if syntax.OwnerOf(s.Name) == owner && (!minimal || diff.sets[s.Name]) {
				c.AffinitySets = append(c.AffinitySets, s)
			}
		}
	}
	c.DeletedElements, c.AddedElements = elementChanges(have, want, rest)
	c.StaleChains, c.StaleSets = stale(have, want)
	return true
}

// stale are the Services' chains and affinity sets of have that want has not. Every
// stale chain is flushed before any is deleted: a stale service chain's numgen vmap
// still refers to its stale endpoint chains (the kernel refuses to delete a chain
// something refers to).
func stale(have *syntax.State, want *target) (chains, sets []string) {
	wanted := make(map[string]bool, len(want.chains)+len(want.sets))
	for _, c := range want.chains {
		wanted[c.name] = true
	}
	for _, s := range want.sets {
		wanted[s.Name] = true
	}
	unwanted := func(names []string, ours func(string) bool) (out []string) {
		for _, name := range names {
			if ours(name) && !wanted[name] {
				out = append(out, name)
			}
		}
		return out
	}
	return unwanted(slices.Sorted(maps.Keys(have.Chains)), syntax.IsServiceChain), unwanted(slices.Sorted(maps.Keys(have.Sets)), syntax.IsAffinitySet)
}

// Equivalent reports whether two tables hold the same ruleset as nft runs it: a
// partial sync from one to the other would write nothing. (The entries the kernel
// adds to dynamic sets at run time are not part of a ruleset.)
func Equivalent(a, b *syntax.State) bool {
	c := &Change{}
	return partial(c, a, fromState(b), true, nil) && c.Empty()
}
