package iptables

import (
	"bufio"
	"bytes"
	"io"
	"slices"
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
	scratchChains := map[string][]string{}
	for _, ports := range e.plans {
		scratchDecls.reset()
		scratchRules.reset()
		for _, pp := range ports {
			for _, c := range pp.chainNames(nil) {
				active[c] = true
			}
			e.frontNat(pp, &natRules)
			e.chainDecls(pp, &scratchDecls)
			e.chainRules(pp, &scratchRules)
		}
		if opts.FullSync || !sameChains(prevNat, &scratchDecls, &scratchRules, scratchChains) {
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
	return groupByChainInto(map[string][]string{}, buf)
}

// groupByChainInto is groupByChain into a map that is emptied first (reused from one
// Service to the next).
func groupByChainInto(out map[string][]string, buf []byte) map[string][]string {
	clear(out)
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
// with exactly the rules it would write.
func sameChains(prev *Table, decls, rules *lineBuf, scratch map[string][]string) bool {
	if prev == nil {
		return false
	}
	byChain := groupByChainInto(scratch, rules.buf)
	same := true
	forEachLine(decls.buf, func(line []byte) {
		if same {
			name := lineChain(line)
			same = sameRules(prev.Chain(name), byChain[name])
		}
	})
	return same
}

// sameRules compares a previous chain with new rule texts: byte for byte when the
// previous ruleset is svcgen's own text, by canonical key otherwise (iptables-save
// spells rules differently).
func sameRules(prev *Chain, texts []string) bool {
	if prev == nil {
		return false
	}
	if len(prev.Rules) != len(texts) {
		return false
	}
	for i, r := range prev.Rules {
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
