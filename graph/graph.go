// Package graph draws one Service's path through a node's rules as a Graphviz DOT
// graph: its frontends, the chains the Service owns, and the endpoints (or verdicts)
// the traffic ends at, each edge with the probability of taking it and, where the
// rules treat sources differently, the sources that take it.
//
// The graph is built from traces, not from the service map, so it shows what the rules
// do: verify's probes (every frontend, every kind of source) go through the mode's
// tracer, and each path is reduced to the chains that belong to the Service.
package graph

import (
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/encoding"
	"gonum.org/v1/gonum/graph/encoding/dot"
	"gonum.org/v1/gonum/graph/simple"
)

// Graph is a Service's paths.
type Graph struct {
	title string
	nodes map[string]*node
	order []string // node keys in first-seen order, for IDs
	edges map[[2]string]*edge
}

type nodeKind int

const (
	frontendNode nodeKind = iota
	chainNode
	endpointNode
	verdictNode
)

type node struct {
	id    int64
	key   string
	kind  nodeKind
	label string
	// sources are the kinds of source whose packets reached the node.
	sources map[verify.Class]bool
}

func (n *node) ID() int64     { return n.id }
func (n *node) DOTID() string { return n.key }
func (n *node) Attributes() []encoding.Attribute {
	shape := map[nodeKind]string{frontendNode: "box", chainNode: "ellipse", endpointNode: "box", verdictNode: "octagon"}[n.kind]
	attrs := []encoding.Attribute{{Key: "label", Value: n.label}, {Key: "shape", Value: shape}}
	if n.kind == endpointNode {
		attrs = append(attrs, encoding.Attribute{Key: "style", Value: "rounded"})
	}
	return attrs
}

type edge struct {
	from, to *node
	// p is the chance of taking the edge once at from (the same for every probe that
	// takes it; the first one's is kept).
	p       *big.Rat
	sources map[verify.Class]bool
}

func (e *edge) From() graph.Node { return e.from }
func (e *edge) To() graph.Node   { return e.to }
func (e *edge) ReversedEdge() graph.Edge {
	return &edge{from: e.to, to: e.from, p: e.p, sources: e.sources}
}
func (e *edge) Attributes() []encoding.Attribute {
	var parts []string
	if e.p != nil && e.p.Cmp(big.NewRat(1, 1)) != 0 {
		parts = append(parts, e.p.RatString())
	}
	if len(e.sources) < len(e.from.sources) {
		parts = append(parts, "from "+classes(e.sources))
	}
	if len(parts) == 0 {
		return nil
	}
	return []encoding.Attribute{{Key: "label", Value: strings.Join(parts, "\n")}}
}

func classes(set map[verify.Class]bool) string {
	var out []string
	for c := verify.OtherHost; c <= verify.BalancerIP; c++ {
		if set[c] {
			out = append(out, c.String())
		}
	}
	return strings.Join(out, ", ")
}

// Build traces every probe to the Service's frontends and collects the paths. service
// is "namespace/name".
func Build(service string, l *verify.Locator, tr trace.Tracer, mode string) (*Graph, error) {
	gr := &Graph{nodes: map[string]*node{}, edges: map[[2]string]*edge{}}
	found := false
	for _, p := range verify.Probes(l) {
		if p.Frontend.Service.Key() != service {
			continue
		}
		found = true
		r, err := tr.Trace(p.Packet)
		if err != nil {
			return nil, fmt.Errorf("tracing %s: %w", p.Packet, err)
		}
		gr.add(p, r)
	}
	if !found {
		return nil, fmt.Errorf("no Service %s on this node (or it has no frontend)", service)
	}
	gr.title = fmt.Sprintf("Service %s, %s mode", service, mode)
	if n := l.Node(); n != "" {
		gr.title += ", node " + n
	}
	return gr, nil
}

// add reduces each outcome's path to the Service's chains and adds its edges.
func (gr *Graph) add(p verify.Probe, r *trace.Result) {
	front := gr.node("frontend "+p.Frontend.String(), frontendNode, string(p.Frontend.Kind)+"\n"+p.Frontend.Addr.String()+"/"+p.Packet.Proto)
	type hop struct{ from, to *node }
	mass := map[*node]*big.Rat{}
	hops := map[hop]*big.Rat{}
	for _, o := range r.Outcomes {
		seq := []*node{front}
		for _, s := range o.Path {
			if s.Service == "" {
				continue
			}
			n := gr.node("chain "+s.Table+" "+s.Chain, chainNode, s.Chain+"\n"+s.Service)
			if seq[len(seq)-1] != n {
				seq = append(seq, n)
			}
		}
		seq = append(seq, gr.terminal(o))
		for i, n := range seq {
			if mass[n] == nil {
				mass[n] = new(big.Rat)
			}
			mass[n].Add(mass[n], o.Probability)
			n.sources[p.Class] = true
			if i > 0 {
				h := hop{seq[i-1], n}
				if hops[h] == nil {
					hops[h] = new(big.Rat)
				}
				hops[h].Add(hops[h], o.Probability)
			}
		}
	}
	for h, m := range hops {
		e := gr.edge(h.from, h.to)
		if e.p == nil {
			e.p = new(big.Rat).Quo(m, mass[h.from])
		}
		e.sources[p.Class] = true
	}
}

// terminal is the endpoint an outcome reaches, or its verdict.
func (gr *Graph) terminal(o trace.Outcome) *node {
	if o.Verdict == trace.DNAT {
		return gr.node("endpoint "+o.Endpoint, endpointNode, o.Endpoint)
	}
	v := string(o.Verdict)
	if v == "" {
		return gr.node("verdict none", verdictNode, "no rule decided")
	}
	where := ""
	if len(o.Path) > 0 {
		last := o.Path[len(o.Path)-1]
		where = "\n(" + last.Table + " " + last.Chain + ")"
	}
	return gr.node("verdict "+v+where, verdictNode, v+where)
}

func (gr *Graph) node(key string, k nodeKind, label string) *node {
	if n := gr.nodes[key]; n != nil {
		return n
	}
	n := &node{key: key, kind: k, label: label, sources: map[verify.Class]bool{}}
	gr.nodes[key] = n
	gr.order = append(gr.order, key)
	return n
}

func (gr *Graph) edge(from, to *node) *edge {
	k := [2]string{from.key, to.key}
	if e := gr.edges[k]; e != nil {
		return e
	}
	e := &edge{from: from, to: to, sources: map[verify.Class]bool{}}
	gr.edges[k] = e
	return e
}

// dotGraph gives gonum's encoder the title and the layout.
type dotGraph struct {
	*simple.DirectedGraph
	title string
}

func (g dotGraph) DOTID() string { return "svcgen" }

func (g dotGraph) DOTAttributers() (graphAttrs, nodeAttrs, edgeAttrs encoding.Attributer) {
	return attrs{{Key: "rankdir", Value: "LR"}, {Key: "label", Value: g.title}, {Key: "labelloc", Value: "t"}},
		attrs{{Key: "fontname", Value: "Helvetica"}}, attrs{{Key: "fontname", Value: "Helvetica"}}
}

type attrs []encoding.Attribute

func (a attrs) Attributes() []encoding.Attribute { return a }

// WriteDOT writes the graph in Graphviz DOT. Nodes are numbered in the order the
// probes first reached them (frontends in verify's order), so the same rules give the
// same bytes.
func (gr *Graph) WriteDOT(w io.Writer) error {
	g := simple.NewDirectedGraph()
	for i, key := range gr.order {
		n := gr.nodes[key]
		n.id = int64(i)
		g.AddNode(n)
	}
	keys := make([][2]string, 0, len(gr.edges))
	for k := range gr.edges {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		g.SetEdge(gr.edges[k])
	}
	data, err := dot.Marshal(dotGraph{DirectedGraph: g, title: gr.title}, "", "", "  ")
	if err != nil {
		return err
	}
	if _, err := w.Write(append(data, '\n')); err != nil {
		return err
	}
	return nil
}

// Carriers are the chains (ipvs: the virtual servers and sets) of the Service that
// the traced traffic went through, as "table chain (service port)", in the order the
// traces first met them: what `svcgen explain` lists.
func (gr *Graph) Carriers() []string {
	var out []string
	for _, key := range gr.order {
		if n := gr.nodes[key]; n.kind == chainNode {
			table, chain, _ := strings.Cut(strings.TrimPrefix(key, "chain "), " ")
			_, service, _ := strings.Cut(n.label, "\n")
			out = append(out, strings.TrimSpace(table+" "+chain)+" ("+service+")")
		}
	}
	return out
}
