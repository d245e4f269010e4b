package nft

import (
	"strings"

	"sigs.k8s.io/knftables"
)

// elementMaps are the containers every sync reconciles element by element (kube-proxy's
// nftElementStorage).
var elementMaps = []string{clusterIPsSet, serviceIPsMap, firewallIPsMap, noEndpointServicesMap, noEndpointNodePorts, serviceNodePortsMap}

// wanted is the table a partial sync goes to, as partialOps reads it: everything that
// is not a Service's (fixed), then the Services' chains and affinity sets by name, and
// the elements of each set and map. A planned table gives one without making more
// than one chain's rules at a time (table.wanted), a State from its objects
// (State.wanted).
type wanted struct {
	fixed    *State
	chains   []wantedChain
	sets     []*knftables.Set
	elements func(container string, out func(*knftables.Element))
}

// wantedChain is one of the Services' chains, and how to make its rules.
type wantedChain struct {
	name  string
	rules func(ruleSink)
}

func (st *State) wanted() *wanted {
	w := &wanted{fixed: st, elements: func(name string, out func(*knftables.Element)) {
		if c := container(st, name); c != nil {
			for _, e := range c.Elements {
				out(e)
			}
		}
	}}
	for _, name := range sortedKeys(st.Chains) {
		if c := st.Chains[name]; IsServiceChain(name) {
			w.chains = append(w.chains, wantedChain{name, func(out ruleSink) {
				for _, r := range c.Rules {
					out(r.Chain, []byte(r.Rule), ptrString(r.Comment))
				}
			}})
		}
	}
	for _, name := range sortedKeys(st.Sets) {
		if IsAffinitySet(name) {
			w.sets = append(w.sets, st.Sets[name].Set)
		}
	}
	return w
}

// partialOps is kube-proxy's partial sync from prev to want, in this order: the chains
// of Services whose chains or affinity sets changed, each added and flushed (Services
// by namespace/name, chains by name); their affinity sets; the rules of those chains;
// element deletes, then element adds (a changed value is a delete and an add, as
// kube-proxy's nftElementStorage does); every stale chain flushed, then each deleted;
// stale affinity sets deleted. Nothing is referred to before it exists, and a chain is
// deleted only when nothing refers to it any more. The wanted rules are made twice,
// to compare and for the Services that changed, and never kept all at once.
//
// With minimal, only what differs is written, in the same order: a chain that is new
// is added, a chain whose rules differ is flushed, each followed by its rules; a chain
// of a changed Service whose rules are the same, and an affinity set whose definition
// is the same, are left out. (kube-proxy rewrites every chain of a changed Service: its
// chains' names carry an endpoint's address and port, so one moved endpoint rewrites
// every endpoint chain of the Service although only one differs.)
//
// If anything outside the Services differs (base chains, fixed rules, container
// definitions, the node-port addresses), kube-proxy would run a full sync; so does
// this: full says to write the whole table.
//
// Unlike kube-proxy, which deletes stale chains a second later in a transaction of
// their own (kernels before 6.2 may still count a chain as referenced right after the
// map element that named it is deleted), the stale chains are deleted in the same
// transaction.
func partialOps(prev *State, want *wanted, minimal bool) (ops []Op, full bool) {
	if !sameFixed(prev, want.fixed) {
		return nil, true
	}
	diff := changedParts(prev, want)
	var chains, sets, rules, stale []Op
	keep := func(chain string, text []byte, comment string) {
		r := &knftables.Rule{Chain: chain, Rule: string(text)}
		if comment != "" {
			r.Comment = &comment
		}
		rules = append(rules, Op{"add", r})
	}
	for _, owner := range diff.owners {
		for _, c := range want.chains {
			if ownerOf(c.name) != owner || minimal && !diff.chains[c.name] {
				continue
			}
			switch {
			case !minimal:
				chains = append(chains, Op{"add", &knftables.Chain{Name: c.name}}, Op{"flush", &knftables.Chain{Name: c.name}})
			case prev.Chains[c.name] == nil:
				chains = append(chains, Op{"add", &knftables.Chain{Name: c.name}})
			default:
				chains = append(chains, Op{"flush", &knftables.Chain{Name: c.name}})
			}
			c.rules(keep)
		}
		for _, s := range want.sets {
			if ownerOf(s.Name) == owner && (!minimal || diff.sets[s.Name]) {
				sets = append(sets, Op{"add", s})
			}
		}
	}
	delElems, addElems := elementOps(prev, want)
	// Every stale chain is flushed before any is deleted: a stale service chain's
	// numgen vmap still refers to its stale endpoint chains (the kernel refuses to
	// delete a chain something refers to).
	wantChains := make(map[string]bool, len(want.chains))
	for _, c := range want.chains {
		wantChains[c.name] = true
	}
	var staleChains []string
	for _, name := range sortedKeys(prev.Chains) {
		if IsServiceChain(name) && !wantChains[name] {
			staleChains = append(staleChains, name)
			stale = append(stale, Op{"flush", &knftables.Chain{Name: name}})
		}
	}
	for _, name := range staleChains {
		stale = append(stale, Op{"delete", &knftables.Chain{Name: name}})
	}
	wantSets := make(map[string]bool, len(want.sets))
	for _, s := range want.sets {
		wantSets[s.Name] = true
	}
	for _, name := range sortedKeys(prev.Sets) {
		if IsAffinitySet(name) && !wantSets[name] {
			stale = append(stale, Op{"delete", &knftables.Set{Name: name}})
		}
	}
	for _, part := range [][]Op{chains, sets, rules, delElems, addElems, stale} {
		ops = append(ops, part...)
	}
	return ops, false
}

// ownerOf is the "namespace/service" a per-service chain or affinity set belongs to.
func ownerOf(name string) string {
	svc, _, _ := strings.Cut(PortOf(name), ":")
	return svc
}

// changes are the Services' chains and affinity sets that differ between two tables.
type changes struct {
	owners []string        // the Services ("namespace/name") with any of them, sorted
	chains map[string]bool // wanted chains that are new or whose rules differ
	sets   map[string]bool // wanted affinity sets that are new or defined otherwise
}

// changedParts compares the Services' chains and affinity sets of want with prev's.
func changedParts(prev *State, want *wanted) changes {
	d := changes{chains: map[string]bool{}, sets: map[string]bool{}}
	owners := map[string]bool{}
	for _, c := range want.chains {
		p := prev.Chains[c.name]
		same, i := p != nil, 0
		c.rules(func(_ string, text []byte, comment string) {
			if same = same && i < len(p.Rules) && sameRule(p.Rules[i], text, comment); same {
				i++
			}
		})
		if !same || i != len(p.Rules) {
			d.chains[c.name] = true
			owners[ownerOf(c.name)] = true
		}
	}
	for _, s := range want.sets {
		if p := prev.Sets[s.Name]; p == nil || objectText(p.Set) != objectText(s) {
			d.sets[s.Name] = true
			owners[ownerOf(s.Name)] = true
		}
	}
	d.owners = sortedKeys(owners)
	return d
}

// sameRule compares a rule with a wanted rule's text and comment, as nft would run
// them (see Canonical).
func sameRule(r *knftables.Rule, text []byte, comment string) bool {
	return ptrString(r.Comment) == comment && (r.Rule == string(text) || Canonical(r.Rule) == Canonical(string(text)))
}

// sameRules compares two chains' rules, as nft would run them (see Canonical).
func sameRules(a, b []*knftables.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameRule(a[i], []byte(b[i].Rule), ptrString(b[i].Comment)) {
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
func elementOps(prev *State, want *wanted) (del, add []Op) {
	for _, name := range elementMaps {
		p := container(prev, name)
		old := map[string]string{}
		if p != nil {
			for _, e := range p.Elements {
				old[strings.Join(e.Key, " . ")] = strings.Join(e.Value, " . ")
			}
		}
		seen := map[string]bool{}
		want.elements(name, func(e *knftables.Element) {
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
		})
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
	ops, full := partialOps(a, b.wanted(), true)
	return !full && len(ops) == 0
}
