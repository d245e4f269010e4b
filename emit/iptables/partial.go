package iptables

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"slices"

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
// opts.MaxChains, a big restore is staged (stage.go).
func (e *emitter) writePartial(out io.Writer, opts Options) error {
	prevNat := opts.Previous.Table("nat")
	prevFilter := opts.Previous.Table("filter")

	var filterDecls, filterRules, filterJumps lineBuf
	for _, c := range e.filterChains() {
		filterDecls.chainLine(c, "-")
	}
	e.filterRules(&filterRules)

	var natDecls, natRules, natJumps lineBuf
	for _, c := range natFixedChains {
		natDecls.chainLine(c, "-")
	}
	e.natFixedRules(&natRules)
	if opts.EnsureJumps {
		e.jumpEdits(prevFilter, "filter", e.filterChains(), &filterJumps)
		e.jumpEdits(prevNat, "nat", natFixedChains, &natJumps)
	}

	// The chains of changed services, one group per service.
	var svcDecls, svcRules, scratchDecls, scratchRules lineBuf
	type bound struct{ decls, rules, chains int }
	var groups []bound
	active := map[string]bool{}
	unchanged := e.unchangedSince(opts)
	var names []string
	for i, ports := range e.plans {
		scratchDecls.reset()
		scratchRules.reset()
		for _, pp := range ports {
			names = pp.chainNames(names[:0])
			for _, c := range names {
				active[c] = true
			}
			e.frontNat(pp, &natRules)
		}
		if unchanged(i) {
			continue
		}
		for _, pp := range ports {
			e.chainDecls(pp, &scratchDecls)
			e.chainRules(pp, &scratchRules)
		}
		if opts.FullSync || !sameChains(prevNat, &scratchDecls, &scratchRules) {
			svcDecls.append(&scratchDecls)
			svcRules.append(&scratchRules)
			groups = append(groups, bound{len(svcDecls.buf), len(svcRules.buf), scratchDecls.lines})
		}
	}
	var stale []string
	if prevNat != nil {
		for _, c := range prevNat.Chains {
			if IsServiceChain(c.Name) && !active[c.Name] {
				stale = append(stale, c.Name)
			}
		}
	}
	var tail lineBuf
	e.nodePortsJump(&tail)

	keepFilter, keepNat := keepAll, keepAll
	if opts.Minimal {
		keepFilter = changedChains(prevFilter, &filterRules, e.filterChains())
		all := append(append([]byte(nil), natRules.buf...), tail.buf...)
		keepNat = changedChains(prevNat, &lineBuf{buf: all}, natFixedChains)
	}

	bw := bufio.NewWriterSize(out, flushSize)
	b := &lineBuf{out: bw}
	if opts.MaxChains > 0 && natDecls.lines+svcDecls.lines+2*len(stale) > opts.MaxChains {
		// Staged: service chains first, then the switch-over, then deletions.
		st := &stager{max: opts.MaxChains, b: b}
		var missing lineBuf
		for _, c := range natFixedChains {
			if prevNat.Chain(c) == nil {
				missing.chainLine(c, "-")
			}
		}
		st.add("nat", &group{decls: missing.buf, chains: missing.lines})
		d, r := 0, 0
		for _, g := range groups {
			st.add("nat", &group{decls: svcDecls.buf[d:g.decls], rules: svcRules.buf[r:g.rules], chains: g.chains})
			d, r = g.decls, g.rules
		}
		st.flush()
		writeTable(b, "filter", keepFilter, opts.Minimal, &filterDecls, &filterJumps, &filterRules)
		writeTable(b, "nat", keepNat, opts.Minimal, &natDecls, &natJumps, &natRules, &tail)
		for _, c := range deleteOrder(prevNat, stale) {
			var decl, del lineBuf
			decl.chainLine(c, "-")
			del.line("-X", c)
			st.add("nat", &group{decls: decl.buf, rules: del.buf, chains: 2})
		}
		st.flush()
	} else {
		var staleDecls, staleRules lineBuf
		for _, c := range stale {
			staleDecls.chainLine(c, "-")
			staleRules.line("-X", c)
		}
		writeTable(b, "filter", keepFilter, opts.Minimal, &filterDecls, &filterJumps, &filterRules)
		writeTable(b, "nat", keepNat, opts.Minimal, &natDecls, &svcDecls, &staleDecls, &natJumps, &natRules, &svcRules, &staleRules, &tail)
	}
	b.flush()
	if b.err != nil {
		return b.err
	}
	return bw.Flush()
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

// unchangedSince returns which services (by index) opts.PreviousMap shows unchanged:
// their chains are in Previous as this emitter writes them, so they need neither
// writing nor comparing. Without a PreviousMap (or when settings every rule depends on
// changed, or on a full sync) no service counts as unchanged.
func (e *emitter) unchangedSince(opts Options) func(int) bool {
	none := func(int) bool { return false }
	prev := opts.PreviousMap
	if prev == nil || opts.FullSync {
		return none
	}
	a, b := *prev, *e.sm
	a.Services, b.Services = nil, nil
	if !reflect.DeepEqual(a, b) {
		return none
	}
	byKey := make(map[string]*ir.Service, len(prev.Services))
	for _, s := range prev.Services {
		byKey[s.Key()] = s
	}
	return func(i int) bool {
		s := e.sm.Services[i]
		old := byKey[s.Key()]
		return old == s || (old != nil && reflect.DeepEqual(old, s))
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
	b.line("COMMIT")
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
