package e2e

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
)

// A Deployment and a Service with a named target port, as a chart writes them: no
// Pods, no EndpointSlices. Every address is in 198.18.0.0/15.
const workloadManifests = `apiVersion: v1
kind: Node
metadata: {name: node1}
spec: {podCIDR: 198.18.5.0/24}
status: {addresses: [{type: InternalIP, address: 198.18.1.1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, ports: [{name: http, containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`

// TestWorkloadsIPTables loads the rules compiled from a Deployment into a node
// namespace with the real iptables-restore: connections to the ClusterIP reach each of
// the Pods made from the Deployment, at the addresses svcgen gave them, and nothing
// else.
func TestWorkloadsIPTables(t *testing.T) {
	netlab.Require(t)
	path := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(path, []byte(workloadManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	res := testkit.CompileFiles(t, pipeline.Settings{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}}, path)
	if n := res.Resolved.Made["Deployment"]; n != 3 {
		t.Fatalf("%d Pods made from the Deployment, want 3", n)
	}
	var want []string
	for _, p := range res.Resolved.Cluster.Pods {
		if p.MadeBy != "Deployment shop/web" || len(p.PodIPs) != 1 || !netip.MustParsePrefix("198.18.5.0/24").Contains(p.PodIPs[0]) {
			t.Fatalf("Pod %s/%s: made by %q, addresses %v", p.Namespace, p.Name, p.MadeBy, p.PodIPs)
		}
		want = append(want, netip.AddrPortFrom(p.PodIPs[0], 8080).String())
	}
	var rules bytes.Buffer
	if err := iptrules.Write(&rules, res.Map, iptrules.Options{}); err != nil {
		t.Fatal(err)
	}
	l := netlab.New(t)
	c := buildCluster(l, res.Map)
	l.Counters(c.node, iptrules.Counters...) // as on a node where kube-proxy ran
	if err := l.Feed(c.node, rules.Bytes(), "iptables-restore"); err != nil {
		t.Fatal(err)
	}
	web := findPort(t, res.Map, "shop", "web")
	h := netlab.Histogram(t, c.client, netip.AddrPortFrom(web.ClusterIP, web.Port), 60)
	if got := keys(h); strings.Join(got, " ") != strings.Join(slices.Sorted(slices.Values(want)), " ") {
		t.Errorf("the ClusterIP reached %v (%v); want each Pod of the Deployment %v", got, h, want)
	}
}
