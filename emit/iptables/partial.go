package iptables

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/ir"
)

// writePartial writes what kube-proxy's partial sync writes against the ruleset now on
// the node (opts.Previous): the filter table and the nat fixed chains in full, every
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
// opts.MaxChains, a big restore is staged (stage.go). With opts.PreviousMap, only the
// Services that differ from it are looked at (changes), and with opts.Changed only
// the ones it names.
func (e *emitter) writePartial(out io.Writer, opts Options) error {
	var p *partial
	if d := e.delta(opts); d != nil {
		p = e.changes(opts, d)
	} else {
		p = e.everything(opts)
	}
	if opts.EnsureJumps {
		e.jumpEdits(opts.Previous.Table("filter"), "filter", e.filterChains(), &p.filterJumps)
		e.jumpEdits(opts.Previous.Table("nat"), "nat", natFixedChains, &p.natJumps)
	}
	return p.write(out, opts)
}

// partial is a partial restore before it is written: the fixed chains' lines, the
// chains of changed services in groups (one per service), the stale chains.
type partial struct {
	filterDecls, filterRules, filterJumps lineBuf
	natDecls, natRules, natJumps, tail    lineBuf
	svcDecls, svcRules                    lineBuf
	groups                                []bound
	stale                                 []string
	keepFilter, keepNat                   func(string) bool
	prevNat                               *Table

	active       map[string]bool // the chains of the services added
	decls, rules lineBuf         // one service's, before it is compared
	names        []string
}

// bound ends one service's group in svcDecls and svcRules.
type bound struct{ decls, rules, chains int }

func newPartial(opts Options) *partial {
	return &partial{prevNat: opts.Previous.Table("nat"), keepFilter: keepAll, keepNat: keepAll, active: map[string]bool{}}
}

// addService adds the chains of a service's ports unless the previous table has them
// as they are (or force), and counts them as active either way.
func (p *partial) addService(e *emitter, ports []*portPlan, force bool) {
	p.decls.reset()
	p.rules.reset()
	for _, pp := range ports {
		p.names = pp.chainNames(p.names[:0])
		for _, c := range p.names {
			p.active[c] = true
		}
		e.chainDecls(pp, &p.decls)
		e.chainRules(pp, &p.rules)
	}
	if force || !sameChains(p.prevNat, &p.decls, &p.rules) {
		p.svcDecls.append(&p.decls)
		p.svcRules.append(&p.rules)
		p.groups = append(p.groups, bound{len(p.svcDecls.buf), len(p.svcRules.buf), p.decls.lines})
	}
}

// everything looks at every service: kube-proxy's partial sync.
func (e *emitter) everything(opts Options) *partial {
	e.planAll(true)
	p := newPartial(opts)
	for _, ports := range e.plans {
		p.addService(e, ports, opts.FullSync)
	}
	if p.prevNat != nil {
		for _, c := range p.prevNat.Chains {
			if IsServiceChain(c.Name) && !p.active[c.Name] {
				p.stale = append(p.stale, c.Name)
			}
		}
	}
	e.fixedChains(p, opts)
	return p
}

// changes looks at the services that differ from the previous map only: their chains,
// and the chains their old versions had that the new ones do not. The fixed chains are
// written as everything writes them, unless opts.Minimal would leave them all out
// anyway because no changed service changed a rule in them.
func (e *emitter) changes(opts Options, d *mapDelta) *partial {
	p := newPartial(opts)
	for _, s := range d.changed {
		p.addService(e, e.planService(s, true), false)
	}
	for _, old := range d.old {
		for _, pp := range e.planService(old, true) {
			for _, c := range pp.chainNames(nil) {
				if !p.active[c] && p.prevNat.Chain(c) != nil {
					p.stale = append(p.stale, c)
					p.active[c] = true // once
				}
			}
		}
	}
	if !opts.Minimal || !d.frontSame {
		e.planAll(false)
		e.fixedChains(p, opts)
	}
	return p
}

// fixedChains adds the fixed chains: their chain lines, the filter rules, and in nat
// KUBE-POSTROUTING, KUBE-MARK-MASQ and every service's KUBE-SERVICES and KUBE-NODEPORTS
// rules (e.plans). With opts.Minimal only the chains whose rules differ from the
// previous ruleset's are kept.
func (e *emitter) fixedChains(p *partial, opts Options) {
	for _, c := range e.filterChains() {
		p.filterDecls.chainLine(c, "-")
	}
	e.filterRules(&p.filterRules)
	for _, c := range natFixedChains {
		p.natDecls.chainLine(c, "-")
	}
	e.natFixedRules(&p.natRules)
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.frontNat(pp, &p.natRules)
		}
	}
	e.nodePortsJump(&p.tail)
	if opts.Minimal {
		p.keepFilter = changedChains(opts.Previous.Table("filter"), &p.filterRules, e.filterChains())
		all := append(append([]byte(nil), p.natRules.buf...), p.tail.buf...)
		p.keepNat = changedChains(p.prevNat, &lineBuf{buf: all}, natFixedChains)
	}
}

// write writes the restore: one block per table, or staged when it declares more
// chains than opts.MaxChains.
func (p *partial) write(out io.Writer, opts Options) error {
	bw := bufio.NewWriterSize(out, flushSize)
	b := &lineBuf{out: bw, markCommits: opts.MarkCommits}
	if opts.MaxChains > 0 && p.natDecls.lines+p.svcDecls.lines+2*len(p.stale) > opts.MaxChains {
		// Staged: service chains first, then the switch-over, then deletions.
		st := &stager{max: opts.MaxChains, b: b}
		var missing lineBuf
		for _, c := range natFixedChains {
			if p.prevNat.Chain(c) == nil {
				missing.chainLine(c, "-")
			}
		}
		st.add("nat", &group{decls: missing.buf, chains: missing.lines})
		d, r := 0, 0
		for _, g := range p.groups {
			st.add("nat", &group{decls: p.svcDecls.buf[d:g.decls], rules: p.svcRules.buf[r:g.rules], chains: g.chains})
			d, r = g.decls, g.rules
		}
		st.flush()
		writeTable(b, "filter", p.keepFilter, true, &p.filterDecls, &p.filterJumps, &p.filterRules)
		writeTable(b, "nat", p.keepNat, true, &p.natDecls, &p.natJumps, &p.natRules, &p.tail)
		for _, c := range deleteOrder(p.prevNat, p.stale) {
			var decl, del lineBuf
			decl.chainLine(c, "-")
			del.line("-X", c)
			st.add("nat", &group{decls: decl.buf, rules: del.buf, chains: 2})
		}
		st.flush()
	} else {
		var staleDecls, staleRules lineBuf
		for _, c := range p.stale {
			staleDecls.chainLine(c, "-")
			staleRules.line("-X", c)
		}
		writeTable(b, "filter", p.keepFilter, opts.Minimal, &p.filterDecls, &p.filterJumps, &p.filterRules)
		writeTable(b, "nat", p.keepNat, opts.Minimal, &p.natDecls, &p.svcDecls, &staleDecls, &p.natJumps, &p.natRules, &p.svcRules, &staleRules, &p.tail)
	}
	b.flush()
	if b.err != nil {
		return b.err
	}
	return bw.Flush()
}

// A mapDelta is how the service map differs from opts.PreviousMap, the map the previous
// ruleset was written from. Services equal in both have their chains in Previous as
// this emitter writes them, so they need neither writing nor comparing.
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
func (e *emitter) delta(opts Options) *mapDelta {
	prev := opts.PreviousMap
	if prev == nil || opts.FullSync {
		return nil
	}
	a, b := *prev, *e.sm
	a.Services, b.Services = nil, nil
	if !reflect.DeepEqual(a, b) {
		return nil
	}
	d := &mapDelta{frontSame: true}
	if opts.Changed == nil {
		pairs(prev.Services, e.sm.Services, func(old, s *ir.Service) { d.compare(e, old, s) })
		return d
	}
	keys := slices.Clone(opts.Changed)
	slices.SortFunc(keys, compareKeys) // the map's order
	for _, key := range slices.Compact(keys) {
		d.compare(e, prev.Service(key), e.sm.Service(key))
	}
	return d
}

// compare adds a Service that may differ: old or s is nil when it is new or removed.
func (d *mapDelta) compare(e *emitter, old, s *ir.Service) {
	if old == s || old != nil && s != nil && reflect.DeepEqual(old, s) {
		return
	}
	if s != nil {
		d.changed = append(d.changed, s)
	}
	if old != nil {
		d.old = append(d.old, old)
	}
	if d.frontSame && !bytes.Equal(e.front(old), e.front(s)) {
		d.frontSame = false
	}
}

// front is every rule a service writes into the fixed chains (none for nil).
func (e *emitter) front(s *ir.Service) []byte {
	if s == nil {
		return nil
	}
	var b lineBuf
	for _, pp := range e.planService(s, false) {
		e.frontNat(pp, &b)
		e.frontFilter(pp, &b)
	}
	return b.buf
}

// pairs calls fn with the two versions of every Service of two maps, walking both in
// the map's order; a Service only one map has comes with nil for the other.
func pairs(prev, next []*ir.Service, fn func(old, s *ir.Service)) {
	for len(prev) > 0 || len(next) > 0 {
		var c int
		switch {
		case len(next) == 0:
			c = -1
		case len(prev) == 0:
			c = 1
		default:
			c = cmp.Or(strings.Compare(prev[0].Namespace, next[0].Namespace), strings.Compare(prev[0].Name, next[0].Name))
		}
		switch {
		case c < 0:
			fn(prev[0], nil)
			prev = prev[1:]
		case c > 0:
			fn(nil, next[0])
			next = next[1:]
		default:
			fn(prev[0], next[0])
			prev, next = prev[1:], next[1:]
		}
	}
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
func (e *emitter) jumpEdits(prev *Table, table string, ours []string, b *lineBuf) {
	for _, j := range jumpRules {
		if j.table != table || !slices.Contains(ours, j.to) {
			continue
		}
		args := j.args()
		n := 0
		if c := prev.Chain(j.from); c != nil {
			key := RuleKey(args)
			for _, r := range c.Rules {
				if ruleTarget(r.Args) == j.to && RuleKey(r.Args) == key {
					n++
				}
			}
		}
		switch {
		case n == 0:
			b.op("-I", j.from)
			b.w("1")
			writeArgs(b, args)
			b.end()
		case n > 1:
			for ; n > 1; n-- {
				b.op("-D", j.from)
				writeArgs(b, args)
				b.end()
			}
		}
	}
}

// keepAll keeps every line.
func keepAll(string) bool { return true }

// changedChains returns a filter that keeps the lines of the fixed chains whose rules
// differ from the previous ruleset's, and every line of other chains.
func changedChains(prev *Table, rules *lineBuf, fixed []string) func(string) bool {
	byChain := groupByChain(rules.buf)
	changed := map[string]bool{}
	for _, c := range fixed {
		changed[c] = !sameRules(prev.Chain(c), byChain[c])
	}
	return func(chain string) bool {
		ch, isFixed := changed[chain]
		return !isFixed || ch
	}
}

// writeTable writes one table, keeping the chain lines and rules that keep allows.
// With skipEmpty, a table left with nothing to write is left out whole.
func writeTable(b *lineBuf, name string, keep func(string) bool, skipEmpty bool, parts ...*lineBuf) {
	var body lineBuf
	for _, part := range parts {
		forEachLine(part.buf, func(line []byte) {
			if keep(lineChain(line)) {
				body.buf = append(body.buf, line...)
				body.buf = append(body.buf, '\n')
			}
		})
	}
	if len(body.buf) == 0 && skipEmpty {
		return
	}
	b.line("*" + name)
	b.append(&body)
	b.commit()
}

func forEachLine(buf []byte, fn func([]byte)) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			fn(buf)
			return
		}
		fn(buf[:i])
		buf = buf[i+1:]
	}
}

// lineChain is the chain a line is about: ":NAME ...", "-A NAME ...", "-X NAME".
func lineChain(line []byte) string {
	switch {
	case len(line) > 1 && line[0] == ':':
		line = line[1:]
	case len(line) > 3 && line[0] == '-':
		line = line[3:]
	default:
		return ""
	}
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		line = line[:i]
	}
	return string(line)
}

// groupByChain splits rule lines ("-A NAME args") by chain, keeping the words after
// the chain name.
func groupByChain(buf []byte) map[string][]string {
	out := map[string][]string{}
	forEachLine(buf, func(line []byte) {
		if !bytes.HasPrefix(line, []byte("-A ")) {
			return
		}
		rest := line[3:]
		i := bytes.IndexByte(rest, ' ')
		name, args := string(rest), ""
		if i >= 0 {
			name, args = string(rest[:i]), string(rest[i+1:])
		}
		out[name] = append(out[name], args)
	})
	return out
}

// sameChains reports whether the previous table holds the chains a service declares
// with exactly the rules it would write. A service has a handful of chains, so they
// are looked up in a slice; each new rule is compared with the previous chain's rule
// at the same place, by its line when the previous ruleset is svcgen's own text.
func sameChains(prev *Table, decls, rules *lineBuf) bool {
	if prev == nil {
		return false
	}
	type cursor struct {
		name string
		c    *Chain
		next int
	}
	var chains []cursor
	same := true
	forEachLine(decls.buf, func(line []byte) {
		name := lineChain(line)
		c := prev.Chain(name)
		if c == nil {
			same = false
		}
		chains = append(chains, cursor{name: name, c: c})
	})
	if !same {
		return false
	}
	forEachLine(rules.buf, func(line []byte) {
		if !same {
			return
		}
		name := lineChain(line)
		for i := range chains {
			cur := &chains[i]
			if cur.name != name {
				continue
			}
			if cur.next >= len(cur.c.Rules) || !sameRule(&cur.c.Rules[cur.next], line) {
				same = false
			}
			cur.next++
			return
		}
		same = false // a rule in a chain the service does not declare
	})
	for _, cur := range chains {
		same = same && cur.next == len(cur.c.Rules)
	}
	return same
}

// sameRule compares a previous rule with a new "-A CHAIN args" line.
func sameRule(prev *Rule, line []byte) bool {
	if prev.Raw != "" && prev.Raw == string(line) {
		return true
	}
	words, err := splitWords(string(line))
	if err != nil || len(words) < 2 {
		return false
	}
	return equalWords(prev.Args, words[2:]) || RuleKey(prev.Args) == RuleKey(words[2:])
}

// sameRules compares a previous chain with new rule texts (the words after the chain
// name): byte for byte when the previous ruleset is svcgen's own text, by canonical key
// otherwise (iptables-save spells rules differently).
func sameRules(prev *Chain, texts []string) bool {
	if prev == nil {
		return false
	}
	if len(prev.Rules) != len(texts) {
		return false
	}
	for i, r := range prev.Rules {
		if r.Raw != "" && len(r.Raw) == len(r.Chain)+4+len(texts[i]) && r.Raw[len(r.Chain)+4:] == texts[i] {
			continue
		}
		words, err := splitWords(texts[i])
		if err != nil {
			return false
		}
		if equalWords(r.Args, words) {
			continue
		}
		if RuleKey(r.Args) != RuleKey(words) {
			return false
		}
	}
	return true
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
