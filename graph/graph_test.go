package graph

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/verify"
	"gonum.org/v1/gonum/graph/formats/dot"
	"gonum.org/v1/gonum/graph/formats/dot/ast"
)

// A load-balancer Service with externalTrafficPolicy Local and source ranges: one
// endpoint on this node, one on another.
const manifests = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
hostnameOverride: node1
clusterCIDR: 10.0.0.0/8
---
apiVersion: v1
kind: Node
metadata: {name: node1}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.10
  externalTrafficPolicy: Local
  loadBalancerSourceRanges: [203.0.113.0/25]
  ports: [{name: http, port: 80, nodePort: 30080}]
status: {loadBalancer: {ingress: [{ip: 5.6.7.8}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.1.0.5], nodeName: node1}
- {addresses: [10.2.0.5], nodeName: node2}
`

func build(t *testing.T) []byte {
	t.Helper()
	res := testkit.Compile(t, "web.yaml", manifests, pipeline.Settings{Mode: compiler.IPTables})
	loc := verify.NewLocator(res.Map, res.Resolved.Cluster)
	m, err := modes.Lookup("iptables")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.Tracer(res.Map, loc.Host())
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build("shop/web", loc, tr, "iptables")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := g.WriteDOT(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// parsed is the structure of a DOT graph: node labels and labelled edges.
type parsed struct {
	nodes map[string]string          // id -> label
	edges map[[2]string]string       // from, to -> label
	out   map[string][]string        // id -> successors
	attrs map[string]map[string]bool // id -> attribute keys
}

func parse(t *testing.T, data []byte) parsed {
	t.Helper()
	f, err := dot.ParseBytes(data)
	if err != nil {
		t.Fatalf("not DOT: %v\n%s", err, data)
	}
	if len(f.Graphs) != 1 || !f.Graphs[0].Directed {
		t.Fatalf("want one directed graph, got %v", f.Graphs)
	}
	p := parsed{nodes: map[string]string{}, edges: map[[2]string]string{}, out: map[string][]string{}, attrs: map[string]map[string]bool{}}
	for _, st := range f.Graphs[0].Stmts {
		switch s := st.(type) {
		case *ast.NodeStmt:
			id := unquote(s.Node.ID)
			p.attrs[id] = map[string]bool{}
			for _, a := range s.Attrs {
				p.attrs[id][a.Key] = true
				if a.Key == "label" {
					p.nodes[id] = unquote(a.Val)
				}
			}
		case *ast.EdgeStmt:
			from, to := unquote(s.From.(*ast.Node).ID), unquote(s.To.Vertex.(*ast.Node).ID)
			label := ""
			for _, a := range s.Attrs {
				if a.Key == "label" {
					label = unquote(a.Val)
				}
			}
			p.edges[[2]string{from, to}] = label
			p.out[from] = append(p.out[from], to)
		}
	}
	return p
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func (p parsed) find(t *testing.T, prefix string) string {
	t.Helper()
	for id := range p.nodes {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	t.Fatalf("no node %q in %v", prefix, p.nodes)
	return ""
}

func TestGraphStructure(t *testing.T) {
	data := build(t)
	if again := build(t); !bytes.Equal(again, data) {
		t.Errorf("two builds differ:\n%s\n%s", data, again)
	}
	p := parse(t, data)

	// Every edge joins declared nodes; every frontend leads to an endpoint or a verdict.
	for e := range p.edges {
		if _, ok := p.nodes[e[0]]; !ok {
			t.Errorf("edge from undeclared node %q", e[0])
		}
		if _, ok := p.nodes[e[1]]; !ok {
			t.Errorf("edge to undeclared node %q", e[1])
		}
	}
	var frontends []string
	for id := range p.nodes {
		if strings.HasPrefix(id, "frontend ") {
			frontends = append(frontends, id)
			if strings.HasPrefix(id, "frontend health check") {
				if !p.reaches(id, "verdict ACCEPT") {
					t.Errorf("%s is not accepted", id)
				}
			} else if !p.reaches(id, "endpoint ") {
				t.Errorf("%s reaches no endpoint", id)
			}
		}
	}
	for _, want := range []string{
		"frontend cluster IP 172.30.0.10:80/tcp",
		"frontend load-balancer IP 5.6.7.8:80/tcp",
		"frontend node port 192.168.0.2:30080/tcp",
		"frontend node port 127.0.0.1:30080/tcp",
	} {
		if _, ok := p.nodes[want]; !ok {
			t.Errorf("no node %q; frontends: %v", want, frontends)
		}
	}

	// The cluster IP spreads over both endpoints, 1/2 each.
	svc := p.find(t, "chain nat KUBE-SVC-")
	if p.edges[[2]string{"frontend cluster IP 172.30.0.10:80/tcp", svc}] != "" {
		t.Errorf("cluster IP -> %s has a label", svc)
	}
	halves := 0
	for _, to := range p.out[svc] {
		if strings.HasPrefix(to, "chain nat KUBE-SEP-") && p.edges[[2]string{svc, to}] == "1/2" {
			halves++
		}
	}
	if halves != 2 {
		t.Errorf("%s: %d edges labelled 1/2 to endpoint chains, want 2 (%v)", svc, halves, p.out[svc])
	}
	if !strings.HasSuffix(p.nodes[svc], "shop/web:http") {
		t.Errorf("%s is labelled %q, want its Service", svc, p.nodes[svc])
	}

	// externalTrafficPolicy Local: the external chain sends other hosts to this node's
	// endpoint only, and pods and the node to every endpoint.
	ext := p.find(t, "chain nat KUBE-EXT-")
	svl := p.find(t, "chain nat KUBE-SVL-")
	if got := p.edges[[2]string{ext, svl}]; got != "from other hosts, allowed sources" {
		t.Errorf("%s -> %s: label %q, want from other hosts, allowed sources", ext, svl, got)
	}
	if got := p.edges[[2]string{ext, svc}]; got != "from pods on this node, the node, the endpoint itself, localhost" {
		t.Errorf("%s -> %s: label %q, want the node and pods", ext, svc, got)
	}
	// Source ranges: the firewall chain drops what it does not allow.
	fw := p.find(t, "chain nat KUBE-FW-")
	drop := p.find(t, "verdict DROP")
	if got := p.edges[[2]string{fw, drop}]; got != "from other hosts, pods on this node, the node, the endpoint itself, the load-balancer IP" {
		t.Errorf("%s -> %s: label %q", fw, drop, got)
	}

	// Graphviz itself reads it.
	if _, err := exec.LookPath("dot"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("graphviz is not installed (test.sh installs it): %v", err)
		}
		t.Skipf("graphviz (dot) is not installed; skipping the rendering check")
	}
	cmd := exec.Command("dot", "-Tsvg")
	cmd.Stdin = bytes.NewReader(data)
	svg, err := cmd.Output()
	if err != nil {
		t.Fatalf("dot -Tsvg: %v", err)
	}
	var doc struct {
		XMLName xml.Name
		Groups  []struct {
			Groups []struct {
				Class string `xml:"class,attr"`
			} `xml:"g"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil || doc.XMLName.Local != "svg" {
		t.Fatalf("dot -Tsvg did not write SVG (%v)", err)
	}
	counts := map[string]int{}
	for _, g := range doc.Groups {
		for _, inner := range g.Groups {
			counts[inner.Class]++
		}
	}
	if counts["node"] != len(p.nodes) || counts["edge"] != len(p.edges) {
		t.Errorf("the SVG has %d nodes and %d edges, the DOT %d and %d", counts["node"], counts["edge"], len(p.nodes), len(p.edges))
	}
}

// reaches reports whether a node with the prefix is reachable from id.
func (p parsed) reaches(id, prefix string) bool {
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(n string) bool {
		if strings.HasPrefix(n, prefix) {
			return true
		}
		if seen[n] {
			return false
		}
		seen[n] = true
		for _, m := range p.out[n] {
			if walk(m) {
				return true
			}
		}
		return false
	}
	return walk(id)
}
