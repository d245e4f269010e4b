package compiler

import (
	"slices"

	"github.com/svcgen/svcgen/ir"
)

// Topology modes of upstream's topologyModeFromHints.
const (
	topologyNone     = ""
	topologySameZone = "PreferSameZone"
	topologySameNode = "PreferSameNode"
)

// categorize fills Cluster, Local, Reachable and HasEndpoints as upstream's
// CategorizeEndpoints does. Usable means ready; when no endpoint is ready, serving and
// terminating endpoints stand in (independently for the Cluster and Local sets).
func (b *builder) categorize(p *ir.Port) {
	eps := p.Endpoints
	if len(eps) == 0 {
		return
	}
	mode := topologyNone
	if p.UsesCluster() {
		mode = b.topologyMode(eps)
		p.Cluster = filter(eps, func(e ir.Endpoint) bool { return e.Ready && b.availableForTopology(e, mode) })
		if len(p.Cluster) == 0 {
			p.Cluster = filter(eps, servingTerminating)
		}
		p.HasEndpoints = len(p.Cluster) > 0
	}
	if !p.UsesLocal() {
		p.Reachable = p.Cluster
		return
	}
	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			p.HasEndpoints = true
			localReady = localReady || e.Local
		case servingTerminating(e):
			p.HasEndpoints = true
			localTerminating = localTerminating || e.Local
		}
	}
	usedTerminating := false
	switch {
	case localReady:
		p.Local = filter(eps, func(e ir.Endpoint) bool { return e.Local && e.Ready })
	case localTerminating:
		usedTerminating = true
		p.Local = filter(eps, func(e ir.Endpoint) bool { return e.Local && servingTerminating(e) })
	}
	switch {
	case !p.UsesCluster():
		p.Reachable = p.Local
	case mode == topologyNone && !usedTerminating:
		// Every ready endpoint is in Cluster, so Cluster covers Local.
		p.Reachable = p.Cluster
	default:
		p.Reachable = union(p.Cluster, p.Local)
	}
}

func servingTerminating(e ir.Endpoint) bool { return e.Serving && e.Terminating }

func filter(eps []ir.Endpoint, keep func(ir.Endpoint) bool) []int {
	out := []int{}
	for i, e := range eps {
		if keep(e) {
			out = append(out, i)
		}
	}
	return out
}

// union merges two sorted index lists.
func union(a, b []int) []int {
	out := append(append([]int{}, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// topologyMode follows upstream's topologyModeFromHints: hints count only when every
// ready endpoint has them and one is meant for this node (or its zone).
func (b *builder) topologyMode(eps []ir.Endpoint) string {
	node, zone := b.sm.Node.Name, b.sm.Node.Zone
	var anyReady, forNode, forZone bool
	allNode, allZone := true, true
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		anyReady = true
		if len(e.NodeHints()) == 0 {
			allNode = false
		} else if slices.Contains(e.NodeHints(), node) {
			forNode = true
		}
		if len(e.ZoneHints()) == 0 {
			allZone = false
		} else if slices.Contains(e.ZoneHints(), zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return topologyNone
	case b.sm.Target.Layout.PreferSameNode && allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

func (b *builder) availableForTopology(e ir.Endpoint, mode string) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(e.NodeHints(), b.sm.Node.Name)
	case topologySameZone:
		return slices.Contains(e.ZoneHints(), b.sm.Node.Zone)
	}
	return true
}
