package iptables

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"sort"

	"github.com/svcgen/svcgen/ir"
)

// WriteChanges writes the input for `iptables-restore --noflush` that takes a node
// from prev's rules to next's, when only the Services named in changed
// ("namespace/name", as compiler.Session reports them) may differ: their own chains
// if their rules changed, -X for their chains that are gone, and the fixed chains
// their frontends live in (KUBE-SERVICES, KUBE-NODEPORTS, the filter table) only when
// those rules changed. It is what `--previous --minimal` writes, computed from the two
// service maps instead of a parsed ruleset, so a one-endpoint change costs a few
// Services' worth of work and a few kilobytes.
//
// With changed nil, or when the node-wide settings differ (masquerade bit, local
// detector, large-cluster mode...), every rule may have changed: it writes the whole
// --noflush payload of next, plus -X for every service chain of prev that next no
// longer has (kube-proxy's full sync).
func WriteChanges(out io.Writer, prev, next *ir.ServiceMap, changed []string) error {
	if changed == nil || !sameSettings(prev, next) {
		return writeResync(out, prev, next)
	}
	pe, ne := &emitter{sm: prev, mark: prev.MasqueradeMark()}, &emitter{sm: next, mark: next.MasqueradeMark()}
	var d delta
	for _, key := range changed {
		d.service(pe, ne, pe.servicePlans(key, true), ne.servicePlans(key, true))
	}
	var filterDecls, filterRules, natDecls, natRules, tail lineBuf
	if d.filterChanged || d.natChanged {
		ne.plans = ne.allPlans(false)
	}
	if d.filterChanged {
		for _, c := range ne.filterChains() {
			filterDecls.chainLine(c, "-")
		}
		ne.filterRules(&filterRules)
	}
	if d.natChanged {
		natDecls.chainLine(chainServices, "-")
		natDecls.chainLine(chainNodePorts, "-")
		for _, ports := range ne.plans {
			for _, pp := range ports {
				ne.frontNat(pp, &natRules)
			}
		}
		ne.nodePortsJump(&tail)
	}
	bw := bufio.NewWriterSize(out, flushSize)
	b := &lineBuf{out: bw}
	writeTable(b, "filter", keepAll, true, &filterDecls, &filterRules)
	writeTable(b, "nat", keepAll, true, &natDecls, &d.decls, &d.staleDecls, &natRules, &d.rules, &d.staleRules, &tail)
	b.flush()
	if b.err != nil {
		return b.err
	}
	return bw.Flush()
}

// delta gathers what changed between two versions of some Services.
type delta struct {
	filterChanged, natChanged bool
	decls, rules              lineBuf // own chains that changed
	staleDecls, staleRules    lineBuf // own chains that are gone
}

// service compares one Service's rules before and after.
func (d *delta) service(pe, ne *emitter, before, after []*portPlan) {
	var fb, fa, nb, na lineBuf
	for _, pp := range before {
		pe.frontFilter(pp, &fb)
		pe.frontNat(pp, &nb)
	}
	for _, pp := range after {
		ne.frontFilter(pp, &fa)
		ne.frontNat(pp, &na)
	}
	d.filterChanged = d.filterChanged || !bytes.Equal(fb.buf, fa.buf)
	d.natChanged = d.natChanged || !bytes.Equal(nb.buf, na.buf)

	var db, rb, da, ra lineBuf
	kept := map[string]bool{}
	for _, pp := range after {
		ne.chainDecls(pp, &da)
		ne.chainRules(pp, &ra)
		for _, c := range pp.chainNames(nil) {
			kept[c] = true
		}
	}
	for _, pp := range before {
		pe.chainDecls(pp, &db)
		pe.chainRules(pp, &rb)
		for _, c := range pp.chainNames(nil) {
			if !kept[c] {
				d.staleDecls.chainLine(c, "-")
				d.staleRules.line("-X", c)
			}
		}
	}
	if !bytes.Equal(da.buf, db.buf) || !bytes.Equal(ra.buf, rb.buf) {
		d.decls.append(&da)
		d.rules.append(&ra)
	}
}

// servicePlans plans the ports of the Service named key; nil when the map has none.
// withEndpoints also names the endpoint chains (the own chains need them, the
// frontend rules do not).
func (e *emitter) servicePlans(key string, withEndpoints bool) []*portPlan {
	ss := e.sm.Services
	i := sort.Search(len(ss), func(i int) bool { return ss[i].Key() >= key })
	if i == len(ss) || ss[i].Key() != key {
		return nil
	}
	out := make([]*portPlan, len(ss[i].Ports))
	for j, p := range ss[i].Ports {
		out[j] = e.planPort(p, withEndpoints)
	}
	return out
}

// allPlans plans every port of the map.
func (e *emitter) allPlans(withEndpoints bool) [][]*portPlan {
	plans := make([][]*portPlan, len(e.sm.Services))
	for i, s := range e.sm.Services {
		plans[i] = make([]*portPlan, len(s.Ports))
		for j, p := range s.Ports {
			plans[i][j] = e.planPort(p, withEndpoints)
		}
	}
	return plans
}

// sameSettings reports whether two maps agree on everything but their Services.
func sameSettings(a, b *ir.ServiceMap) bool {
	x, y := *a, *b
	x.Services, y.Services = nil, nil
	return reflect.DeepEqual(x, y)
}

// writeResync writes next's whole payload and deletes prev's service chains that next
// does not have.
func writeResync(out io.Writer, prev, next *ir.ServiceMap) error {
	e := newEmitter(next)
	active := map[string]bool{}
	for _, ports := range e.plans {
		for _, pp := range ports {
			for _, c := range pp.chainNames(nil) {
				active[c] = true
			}
		}
	}
	pe := &emitter{sm: prev, mark: prev.MasqueradeMark()}
	for _, ports := range pe.allPlans(true) {
		for _, pp := range ports {
			for _, c := range pp.chainNames(nil) {
				if !active[c] {
					e.stale = append(e.stale, c)
				}
			}
		}
	}
	return e.write(out, NoFlush)
}
