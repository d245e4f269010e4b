// Package plan is the iptables sync: from the rules on a node (have) and a service map
// (want), the change that makes one into the other, as kube-proxy's partial sync makes
// it (Partial), or any ruleset into any other (WriteTransition), or a node clean of
// kube-proxy's rules (Cleaned). A change is planned as chain groups compared with the
// rules on the node through iptables/syntax's one rule comparison, and written as
// iptables-restore text last (Change.Write), cut into blocks as apply asks.
package plan

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
)

// Options choose a partial sync.
type Options struct {
	// Previous is the ruleset on the node now (svcgen output or iptables-save): the
	// change is kube-proxy's partial sync against it: fixed chains in full, the chains of
	// services that changed, and stale chains flushed and deleted with -X. Required.
	Previous *syntax.Ruleset
	// Minimal also leaves out fixed chains whose rules did not change.
	Minimal bool
	// FullSync rewrites every service's chains, as kube-proxy's full sync does, while
	// still deleting the chains no Service uses any more.
	FullSync bool
	// EnsureJumps also inserts kube-proxy's jumps from the built-in chains into its
	// chains where Previous lacks them, and deletes extra copies, in the same blocks as
	// the chains: what kube-proxy does with EnsureRule before restoring.
	EnsureJumps bool
	// PreviousMap is the service map Previous was written from, when the caller knows it
	// (apply keeps the state it loaded in memory). A Service equal in both is taken to
	// have its chains in Previous as written and is neither written nor compared: a
	// one-endpoint change costs one service's rules, not all of them.
	PreviousMap *ir.ServiceMap
	// Changed (with PreviousMap), when not nil, names the Services ("namespace/name")
	// that may differ from PreviousMap, as compiler.Session reports them: every other
	// Service is taken to be the same and is not even compared, so the cost of a
	// restore no longer grows with the size of the map. Nil compares every Service
	// (by pointer first: an incremental compile shares the ones it did not touch).
	Changed []string
}

// Blocks say how a change is cut into iptables-restore blocks (each one COMMIT, one
// kernel transaction): apply's protocol, not the sync's.
type Blocks struct {
	// MaxChains, when more than zero, stages a change with more chain and -X lines than
	// this into blocks of at most this many (see stage.go).
	MaxChains int
	// MarkCommits ends each block by declaring and deleting the chain SVCGEN-COMMIT.
	// iptables-nft commits a block as one nf_tables transaction, and the kernel commits
	// it (moving the ruleset generation by one) only when it holds a change: a block
	// that only declares chains as they already are, or flushes empty ones, holds none.
	// The deletion of a chain the block declared always is one, so each block moves the
	// generation by exactly one (see syntax.Commits, and apply/generation.go, which
	// relies on it).
	MarkCommits bool
}

// Write writes the partial sync of sm against opts.Previous in one block per table.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	c, err := Partial(sm, opts)
	if err != nil {
		return err
	}
	return c.Write(out, Blocks{})
}

// Change is a partial sync, planned and not yet written: the fixed chains' lines, the
// chains of changed services in groups (one per service, so that staging never splits
// one), the stale chains, and which fixed chains to keep.
type Change struct {
	filterDecls, filterRules, filterJumps syntax.Buffer
	natDecls, natRules, natJumps, tail    syntax.Buffer
	svcDecls, svcRules                    syntax.Buffer
	groups                                []bound
	stale                                 []string
	keepFilter, keepNat                   func(string) bool
	minimal                               bool
	prevNat                               *syntax.Table
	header                                string

	active       map[string]bool // the chains of the services added
	decls, rules syntax.Buffer   // one service's, before it is compared
	names        []string
}

// bound ends one service's group in svcDecls and svcRules.
type bound struct{ decls, rules, chains int }

// Partial plans what kube-proxy's partial sync writes against the ruleset now on the
// node (opts.Previous): the filter table and the nat fixed chains in full, every
// service's KUBE-SERVICES and KUBE-NODEPORTS rules, the own chains of services whose
// chains changed (all of them, as kube-proxy rewrites a changed Service whole), and a
// chain line plus -X for every service chain that no Service uses any more.
//
// kube-proxy decides "changed" from the Service and EndpointSlice events it saw; svcgen
// compares chain contents, so a Service edit that changes no rule writes nothing.
//
// With opts.Minimal, fixed chains whose rules did not change are left out too (the
// filter chains, KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ).
// With opts.EnsureJumps, the jumps from built-in chains are added where missing. With
// opts.PreviousMap, only the Services that differ from it are looked at (changes), and
// with opts.Changed only the ones it names.
func Partial(sm *ir.ServiceMap, opts Options) (*Change, error) {
	if opts.Previous == nil {
		return nil, errors.New("a partial sync needs the previous ruleset")
	}
	e := rules.NewEmitter(sm)
	var c *Change
	if d := delta(e, opts); d != nil {
		c = changes(e, opts, d)
	} else {
		c = everything(e, opts)
	}
	c.header = sm.Header("iptables") + ", a partial sync"
	if opts.EnsureJumps {
		jumpEdits(opts.Previous.Table("filter"), "filter", e.FilterChains(), &c.filterJumps)
		jumpEdits(opts.Previous.Table("nat"), "nat", rules.NatFixedChains, &c.natJumps)
	}
	return c, nil
}

func newChange(opts Options) *Change {
	return &Change{prevNat: opts.Previous.Table("nat"), keepFilter: keepAll, keepNat: keepAll, minimal: opts.Minimal, active: map[string]bool{}}
}

// addService adds the chains of a service's ports unless the previous table has them
// as they are (or force), and counts them as active either way.
func (c *Change) addService(e *rules.Emitter, ports []*rules.Port, force bool) {
	c.decls.Reset()
	c.rules.Reset()
	for _, pp := range ports {
		c.names = pp.ChainNames(c.names[:0])
		for _, name := range c.names {
			c.active[name] = true
		}
		e.ChainDecls(pp, &c.decls)
		e.ChainRules(pp, &c.rules)
	}
	if force || !c.prevNat.Holds(&c.decls, &c.rules) {
		c.svcDecls.Append(&c.decls)
		c.svcRules.Append(&c.rules)
		c.groups = append(c.groups, bound{c.svcDecls.Len(), c.svcRules.Len(), c.decls.Lines()})
	}
}

// everything looks at every service: kube-proxy's partial sync.
func everything(e *rules.Emitter, opts Options) *Change {
	e.PlanAll(true)
	c := newChange(opts)
	for _, ports := range e.Plans() {
		c.addService(e, ports, opts.FullSync)
	}
	if c.prevNat != nil {
		for _, ch := range c.prevNat.Chains {
			if syntax.IsServiceChain(ch.Name) && !c.active[ch.Name] {
				c.stale = append(c.stale, ch.Name)
			}
		}
	}
	fixedChains(e, c, opts)
	return c
}

// changes looks at the services that differ from the previous map only: their chains,
// and the chains their old versions had that the new ones do not. The fixed chains are
// written as everything writes them, unless opts.Minimal would leave them all out
// anyway because no changed service changed a rule in them.
func changes(e *rules.Emitter, opts Options, d *mapDelta) *Change {
	c := newChange(opts)
	for _, s := range d.changed {
		c.addService(e, e.PlanService(s, true), false)
	}
	for _, old := range d.old {
		for _, pp := range e.PlanService(old, true) {
			for _, name := range pp.ChainNames(nil) {
				if !c.active[name] && c.prevNat.Chain(name) != nil {
					c.stale = append(c.stale, name)
					c.active[name] = true // once
				}
			}
		}
	}
	if !opts.Minimal || !d.frontSame {
		e.PlanAll(false)
		fixedChains(e, c, opts)
	}
	return c
}

// fixedChains adds the fixed chains: their chain lines, the filter rules, and in nat
// KUBE-POSTROUTING, KUBE-MARK-MASQ and every service's KUBE-SERVICES and KUBE-NODEPORTS
// rules (e.Plans). With opts.Minimal only the chains whose rules differ from the
// previous ruleset's are kept.
func fixedChains(e *rules.Emitter, c *Change, opts Options) {
	for _, name := range e.FilterChains() {
		c.filterDecls.ChainLine(name, "-")
	}
	e.FilterRules(&c.filterRules)
	for _, name := range rules.NatFixedChains {
		c.natDecls.ChainLine(name, "-")
	}
	e.NatFixedRules(&c.natRules)
	for _, ports := range e.Plans() {
		for _, pp := range ports {
			e.FrontNat(pp, &c.natRules)
		}
	}
	e.NodePortsJump(&c.tail)
	if opts.Minimal {
		c.keepFilter = keepChanged(opts.Previous.Table("filter").Changed(&c.filterRules, e.FilterChains()))
		var all syntax.Buffer
		all.Append(&c.natRules)
		all.Append(&c.tail)
		c.keepNat = keepChanged(c.prevNat.Changed(&all, rules.NatFixedChains))
	}
}

// Write writes the change as iptables-restore --noflush input: one block per table, or
// staged when it declares more chains than b.MaxChains.
func (c *Change) Write(out io.Writer, blocks Blocks) error {
	bw := bufio.NewWriterSize(out, syntax.FlushSize)
	b := syntax.NewStream(bw, blocks.MarkCommits)
	b.Header(c.header)
	if blocks.MaxChains > 0 && c.natDecls.Lines()+c.svcDecls.Lines()+2*len(c.stale) > blocks.MaxChains {
		c.writeStaged(b, blocks.MaxChains)
	} else {
		var staleDecls, staleRules syntax.Buffer
		for _, name := range c.stale {
			staleDecls.ChainLine(name, "-")
			staleRules.Line("-X", name)
		}
		writeTable(b, "filter", c.keepFilter, c.minimal, &c.filterDecls, &c.filterJumps, &c.filterRules)
		writeTable(b, "nat", c.keepNat, c.minimal, &c.natDecls, &c.svcDecls, &staleDecls, &c.natJumps, &c.natRules, &c.svcRules, &staleRules, &c.tail)
	}
	if err := b.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// writeStaged writes service chains first, then the switch-over, then deletions.
func (c *Change) writeStaged(b *syntax.Buffer, maxChains int) {
	st := &stager{max: maxChains, b: b}
	var missing syntax.Buffer
	for _, name := range rules.NatFixedChains {
		if c.prevNat.Chain(name) == nil {
			missing.ChainLine(name, "-")
		}
	}
	st.add("nat", &group{decls: missing.Bytes(), chains: missing.Lines()})
	d, r := 0, 0
	svcDecls, svcRules := c.svcDecls.Bytes(), c.svcRules.Bytes()
	for _, g := range c.groups {
		st.add("nat", &group{decls: svcDecls[d:g.decls], rules: svcRules[r:g.rules], chains: g.chains})
		d, r = g.decls, g.rules
	}
	st.flush()
	writeTable(b, "filter", c.keepFilter, true, &c.filterDecls, &c.filterJumps, &c.filterRules)
	writeTable(b, "nat", c.keepNat, true, &c.natDecls, &c.natJumps, &c.natRules, &c.tail)
	for _, name := range deleteOrder(c.prevNat, c.stale) {
		var decl, del syntax.Buffer
		decl.ChainLine(name, "-")
		del.Line("-X", name)
		st.add("nat", &group{decls: decl.Bytes(), rules: del.Bytes(), chains: 2})
	}
	st.flush()
}

// A mapDelta is how the service map differs from opts.PreviousMap, the map the previous
// ruleset was written from. Services equal in both have their chains in Previous as
// this Emitter writes them, so they need neither writing nor comparing.
type mapDelta struct {
	changed []*ir.Service // new or different, in the map's order
	old     []*ir.Service // the previous versions of changed services, and removed ones
	// frontSame: no changed, new or removed service writes other rules into the fixed
	// chains (KUBE-SERVICES, KUBE-NODEPORTS, the filter chains) than before.
	frontSame bool
}

// delta compares the map with opts.PreviousMap: the Services opts.Changed names, or
// every Service. It is nil when there is no previous map, on a full sync, or when a
// setting every rule depends on changed.
func delta(e *rules.Emitter, opts Options) *mapDelta {
	prev := opts.PreviousMap
	if prev == nil || opts.FullSync {
		return nil
	}
	a, b := *prev, *e.Map()
	a.Services, b.Services = nil, nil
	if !reflect.DeepEqual(a, b) {
		return nil
	}
	d := &mapDelta{frontSame: true}
	if opts.Changed == nil {
		ir.Pairs(prev.Services, e.Map().Services, func(old, s *ir.Service) { d.compare(e, old, s) })
		return d
	}
	keys := slices.Clone(opts.Changed)
	slices.SortFunc(keys, compareKeys) // the map's order
	for _, key := range slices.Compact(keys) {
		d.compare(e, prev.Service(key), e.Map().Service(key))
	}
	return d
}

// compare adds a Service that may differ: old or s is nil when it is new or removed.
func (d *mapDelta) compare(e *rules.Emitter, old, s *ir.Service) {
	if old == s || old != nil && s != nil && reflect.DeepEqual(old, s) {
		return
	}
	if s != nil {
		d.changed = append(d.changed, s)
	}
	if old != nil {
		d.old = append(d.old, old)
	}
	if d.frontSame && !bytes.Equal(front(e, old), front(e, s)) {
		d.frontSame = false
	}
}

// front is every rule a service writes into the fixed chains (none for nil).
func front(e *rules.Emitter, s *ir.Service) []byte {
	if s == nil {
		return nil
	}
	var b syntax.Buffer
	for _, pp := range e.PlanService(s, false) {
		e.FrontNat(pp, &b)
		e.FrontFilter(pp, &b)
	}
	return b.Bytes()
}

// compareKeys orders "namespace/name" keys as the map orders its Services, which is
// not their order as strings ("ns-x/a" sorts before "ns/a").
func compareKeys(a, b string) int {
	ans, aname, _ := strings.Cut(a, "/")
	bns, bname, _ := strings.Cut(b, "/")
	return cmp.Or(strings.Compare(ans, bns), strings.Compare(aname, bname))
}

// jumpEdits writes the edits that give the built-in chains of a table kube-proxy's jumps
// into ours (the payload's chains) once each: a missing jump is inserted at position 1,
// in the order kube-proxy ensures them (so a fresh node lists them as kube-proxy's
// does), and copies of one jump are deleted. Everything else in a built-in chain stays.
func jumpEdits(prev *syntax.Table, table string, ours []string, b *syntax.Buffer) {
	for _, j := range syntax.Jumps() {
		if j.Table != table || !slices.Contains(ours, j.To()) {
			continue
		}
		n := 0
		if c := prev.Chain(j.From); c != nil {
			for i := range c.Rules {
				if c.Rules[i].Same(j.Args) {
					n++
				}
			}
		}
		switch {
		case n == 0:
			b.Op("-I", j.From)
			b.Words("1")
			b.Args(j.Args)
			b.End()
		case n > 1:
			for ; n > 1; n-- {
				b.Op("-D", j.From)
				b.Args(j.Args)
				b.End()
			}
		}
	}
}

// keepAll keeps every line.
func keepAll(string) bool { return true }

// keepChanged keeps the lines of the fixed chains that changed (changed[name]), and every
// line of other chains.
func keepChanged(changed map[string]bool) func(string) bool {
	return func(chain string) bool {
		ch, isFixed := changed[chain]
		return !isFixed || ch
	}
}

// writeTable writes one table, keeping the chain lines and rules that keep allows.
// With skipEmpty, a table left with nothing to write is left out whole.
func writeTable(b *syntax.Buffer, name string, keep func(string) bool, skipEmpty bool, parts ...*syntax.Buffer) {
	var body syntax.Buffer
	for _, part := range parts {
		part.EachLine(func(line []byte) {
			if keep(syntax.LineChain(line)) {
				body.AppendLine(line)
			}
		})
	}
	if body.Len() == 0 && skipEmpty {
		return
	}
	b.Line("*" + name)
	b.Append(&body)
	b.Commit()
}
