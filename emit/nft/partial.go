package nft

import (
	"strings"

	"sigs.k8s.io/knftables"
)

// elementMaps are the containers every sync reconciles element by element (kube-proxy's
// nftElementStorage).
var elementMaps = []string{clusterIPsSet, serviceIPsMap, firewallIPsMap, noEndpointServicesMap, noEndpointNodePorts, serviceNodePortsMap}

// partialOps is kube-proxy's partial sync from prev to want, in this order: the chains
// of Services whose chains or affinity sets changed, each added and flushed (Services
// by namespace/name, chains by name); their affinity sets; the rules of those chains;
// element deletes, then element adds (a changed value is a delete and an add, as
// kube-proxy's nftElementStorage does); every stale chain flushed, then each deleted;
// stale affinity sets deleted. Nothing is referred to before it exists, and a chain is
// deleted only when nothing refers to it any more.
//
// If anything outside the Services differs (base chains, fixed rules, container
// definitions, the node-port addresses), kube-proxy would run a full sync; so does this,
// writing the whole table.
//
// Unlike kube-proxy, which deletes stale chains a second later in a transaction of
// their own (kernels before 6.2 may still count a chain as referenced right after the
// map element that named it is deleted), the stale chains are deleted in the same
// transaction.
func partialOps(prev, want *State) []Op {
	if !sameFixed(prev, want) {
		return append(replaceTable(want.Table), adds(want.Objects())...)
	}
	chainsOf, setsOf := map[string][]string{}, map[string][]string{}
	for _, name := range sortedKeys(want.Chains) {
		if IsServiceChain(name) {
			chainsOf[ownerOf(name)] = append(chainsOf[ownerOf(name)], name)
		}
	}
	for _, name := range sortedKeys(want.Sets) {
		if IsAffinitySet(name) {
			setsOf[ownerOf(name)] = append(setsOf[ownerOf(name)], name)
		}
	}
	var chains, sets, rules, stale []Op
	for _, owner := range changedOwners(prev, want) {
		for _, name := range chainsOf[owner] {
			c := want.Chains[name]
			chains = append(chains, Op{"add", c.Obj}, Op{"flush", &knftables.Chain{Name: name}})
			for _, r := range c.Rules {
				rules = append(rules, Op{"add", r})
			}
		}
		for _, name := range setsOf[owner] {
			sets = append(sets, Op{"add", want.Sets[name].Set})
		}
	}
	delElems, addElems := elementOps(prev, want)
	// Every stale chain is flushed before any is deleted: a stale service chain's
	// numgen vmap still refers to its stale endpoint chains (the kernel refuses to
	// delete a chain something refers to).
	var staleChains []string
	for _, name := range sortedKeys(prev.Chains) {
		if IsServiceChain(name) && want.Chains[name] == nil {
			staleChains = append(staleChains, name)
			stale = append(stale, Op{"flush", &knftables.Chain{Name: name}})
		}
	}
	for _, name := range staleChains {
		stale = append(stale, Op{"delete", &knftables.Chain{Name: name}})
	}
	for _, name := range sortedKeys(prev.Sets) {
		if IsAffinitySet(name) && want.Sets[name] == nil {
			stale = append(stale, Op{"delete", &knftables.Set{Name: name}})
		}
	}
	var ops []Op
	for _, part := range [][]Op{chains, sets, rules, delElems, addElems, stale} {
		ops = append(ops, part...)
	}
	return ops
}

// ownerOf is the "namespace/service" a per-service chain or affinity set belongs to.
func ownerOf(name string) string {
	svc, _, _ := strings.Cut(PortOf(name), ":")
	return svc
}

// changedOwners lists the Services whose chains or affinity sets differ, sorted.
func changedOwners(prev, want *State) []string {
	changed := map[string]bool{}
	for name, c := range want.Chains {
		if !IsServiceChain(name) {
			continue
		}
		if p := prev.Chains[name]; p == nil || !sameRules(p.Rules, c.Rules) {
			changed[ownerOf(name)] = true
		}
	}
	for name, s := range want.Sets {
		if IsAffinitySet(name) {
			if p := prev.Sets[name]; p == nil || objectText(p.Set) != objectText(s.Set) {
				changed[ownerOf(name)] = true
			}
		}
	}
	return sortedKeys(changed)
}

// sameRules compares two chains' rules, as nft would run them (see Canonical).
func sameRules(a, b []*knftables.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if ptrString(a[i].Comment) != ptrString(b[i].Comment) {
			return false
		}
		if a[i].Rule != b[i].Rule && Canonical(a[i].Rule) != Canonical(b[i].Rule) {
			return false
		}
	}
	return true
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// objectText is an object's "add" line, for comparing definitions.
func objectText(o knftables.Object) string {
	tx := knftables.NewFake(knftables.IPv4Family, tableName).NewTransaction()
	tx.Add(o)
	return tx.String()
}

// sameFixed compares everything that is not a Service's: base and fixed chains with
// their rules, the definitions of sets and maps, the node-port addresses.
func sameFixed(prev, want *State) bool {
	for _, st := range [][2]*State{{prev, want}, {want, prev}} {
		for name, c := range st[0].Chains {
			if IsServiceChain(name) {
				continue
			}
			o := st[1].Chains[name]
			if o == nil || objectText(o.Obj) != objectText(c.Obj) || !sameRules(o.Rules, c.Rules) {
				return false
			}
		}
		for name, s := range st[0].Sets {
			if IsAffinitySet(name) {
				continue
			}
			if o := st[1].Sets[name]; o == nil || objectText(o.Set) != objectText(s.Set) {
				return false
			}
		}
		for name, m := range st[0].Maps {
			if o := st[1].Maps[name]; o == nil || objectText(o.Map) != objectText(m.Map) {
				return false
			}
		}
	}
	if p, w := prev.Sets[nodePortIPsSet], want.Sets[nodePortIPsSet]; p != nil && w != nil {
		return elementKeys(p) == elementKeys(w)
	}
	return true
}

func elementKeys(c *Container) string {
	var keys []string
	for _, e := range c.Elements {
		keys = append(keys, strings.Join(e.Key, " . "))
	}
	return strings.Join(keys, "|")
}

// elementOps reconciles the service containers as kube-proxy's nftElementStorage does:
// a new key is added; a key whose value changed is deleted and added; a key no Service
// wants any more is deleted.
func elementOps(prev, want *State) (del, add []Op) {
	for _, name := range elementMaps {
		p, w := container(prev, name), container(want, name)
		old := map[string]string{}
		if p != nil {
			for _, e := range p.Elements {
				old[strings.Join(e.Key, " . ")] = strings.Join(e.Value, " . ")
			}
		}
		seen := map[string]bool{}
		for _, e := range w.Elements {
			k := strings.Join(e.Key, " . ")
			seen[k] = true
			v, exists := old[k]
			switch {
			case !exists:
				add = append(add, Op{"add", e})
			case v != strings.Join(e.Value, " . "):
				del = append(del, Op{"delete", keyOnly(e)})
				add = append(add, Op{"add", e})
			}
		}
		if p != nil {
			for _, e := range p.Elements {
				if !seen[strings.Join(e.Key, " . ")] {
					del = append(del, Op{"delete", keyOnly(e)})
				}
			}
		}
	}
	return del, add
}

func container(st *State, name string) *Container {
	if c := st.Sets[name]; c != nil {
		return c
	}
	return st.Maps[name]
}

// keyOnly is the element as "delete element" names it.
func keyOnly(e *knftables.Element) *knftables.Element {
	return &knftables.Element{Set: e.Set, Map: e.Map, Key: e.Key}
}

// Equivalent reports whether two tables hold the same ruleset as nft runs it: a
// partial sync from one to the other would write nothing. (The entries the kernel
// adds to dynamic sets at run time are not part of a ruleset.)
func Equivalent(a, b *State) bool {
	return len(partialOps(a, b)) == 0
}
