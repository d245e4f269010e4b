package verify

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/trace"
)

// A node (192.168.0.2, pods in 10.1.0.0/24) of a cluster whose pods are in 10.0.0.0/8,
// with a Service for each policy verify must tell apart.
const cluster = `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
hostnameOverride: node1
clusterCIDR: 10.0.0.0/8
---
apiVersion: v1
kind: Node
metadata: {name: node1}
spec: {podCIDR: 10.1.0.0/24}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: v1
kind: Node
metadata: {name: node2}
spec: {podCIDR: 10.2.0.0/24}
status: {addresses: [{type: InternalIP, address: 192.168.0.3}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.10
  externalTrafficPolicy: Local
  healthCheckNodePort: 30999
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
- {addresses: [10.1.0.6], nodeName: node1, conditions: {ready: false}}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: 172.30.0.11
  internalTrafficPolicy: Local
  ports: [{name: sql, port: 5432}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: shop, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: sql, port: 5432, protocol: TCP}]
endpoints:
- {addresses: [10.2.0.7], nodeName: node2}
---
apiVersion: v1
kind: Service
metadata: {name: empty, namespace: shop}
spec:
  type: ClusterIP
  clusterIP: 172.30.0.12
  externalIPs: [1.2.3.4]
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: shop}
spec:
  clusterIP: 172.30.0.13
  sessionAffinity: ClientIP
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: sticky-1, namespace: shop, labels: {kubernetes.io/service-name: sticky}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.2.0.8], nodeName: node2}
`

// compile resolves and compiles the manifests for iptables mode.
func compile(t *testing.T, manifests string) (*model.Cluster, *ir.ServiceMap) {
	t.Helper()
	res := testkit.Compile(t, "cluster.yaml", manifests, pipeline.Settings{Mode: compiler.IPTables})
	return res.Resolved.Cluster, res.Map
}

// Expect against hand-worked answers, one per policy decision.
func TestExpect(t *testing.T) {
	c, sm := compile(t, cluster)
	l := NewLocator(sm, c)
	for _, tc := range []struct {
		name, src, dst string
		want           string
	}{
		{"cluster IP from another host: every ready endpoint, masqueraded",
			"198.51.100.1", "172.30.0.10:80", "DNAT 1/2 10.1.0.5:8080 masquerade; DNAT 1/2 10.2.0.5:8080 masquerade"},
		{"cluster IP from a pod: not masqueraded",
			"10.1.0.9", "172.30.0.10:80", "DNAT 1/2 10.1.0.5:8080; DNAT 1/2 10.2.0.5:8080"},
		{"hairpin: an endpoint reaching itself is masqueraded",
			"10.1.0.5", "172.30.0.10:80", "DNAT 1/2 10.1.0.5:8080 masquerade; DNAT 1/2 10.2.0.5:8080"},
		{"load-balancer IP from an allowed source, externalTrafficPolicy Local: this node's endpoints, source kept",
			"203.0.113.5", "5.6.7.8:80", "DNAT 1 10.1.0.5:8080"},
		{"load-balancer IP from a source outside loadBalancerSourceRanges",
			"198.51.100.1", "5.6.7.8:80", "DROP 1"},
		{"node port from another host: this node's endpoints",
			"198.51.100.1", "192.168.0.2:30080", "DNAT 1 10.1.0.5:8080"},
		{"node port from a pod: short-circuited to every endpoint",
			"10.2.0.9", "192.168.0.2:30080", "DNAT 1/2 10.1.0.5:8080; DNAT 1/2 10.2.0.5:8080"},
		{"node port from the node: every endpoint, masqueraded",
			"192.168.0.2", "192.168.0.2:30080", "DNAT 1/2 10.1.0.5:8080 masquerade; DNAT 1/2 10.2.0.5:8080 masquerade"},
		{"node port on another node's address: not this node's business",
			"198.51.100.1", "192.168.0.3:30080", "no-match 1"},
		{"health check node port",
			"198.51.100.1", "192.168.0.2:30999", "ACCEPT 1"},
		{"internalTrafficPolicy Local without a local endpoint",
			"10.1.0.9", "172.30.0.11:5432", "DROP 1"},
		{"external IP of a Service without endpoints",
			"198.51.100.1", "1.2.3.4:80", "REJECT 1"},
		{"session affinity",
			"10.1.0.9", "172.30.0.13:80", "DNAT 1 10.2.0.8:8080 affinity"},
	} {
		p, _ := l.Packet(netip.MustParseAddr(tc.src), netip.MustParseAddrPort(tc.dst), "tcp")
		if got := Summary(Expect(sm, l.Host(), p)); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}

// A documented difference changes the expectation only where it applies.
func TestDifferences(t *testing.T) {
	c, sm := compile(t, cluster)
	l := NewLocator(sm, c)
	for _, tc := range []struct {
		mode     compiler.Mode
		src, dst string
		want     string
		applied  string // the one difference that applies, "" for none
	}{
		{compiler.IPTables, "192.168.0.2", "1.2.3.4:80", "no-match 1", "no reject for the node's own traffic to external IPs without endpoints"},
		{compiler.IPTables, "198.51.100.1", "1.2.3.4:80", "REJECT 1", ""},
		{compiler.IPTables, "192.168.0.2", "172.30.0.12:80", "REJECT 1", ""},
		{compiler.NFTables, "192.168.0.2", "1.2.3.4:80", "REJECT 1", ""},
		{compiler.NFTables, "10.1.0.9", "172.30.0.10:81", "REJECT 1", "other ports of cluster IPs are rejected, unallocated cluster IPs dropped"},
		{compiler.NFTables, "198.51.100.1", "192.168.0.2:30999", "no-match 1", "no rule for health-check node ports"},
		// db has internalTrafficPolicy Local, no local endpoint, no Cluster set: DROP,
		// and in ipvs mode a virtual server without real servers.
		{compiler.IPTables, "10.1.0.9", "172.30.0.11:5432", "DROP 1", ""},
		{compiler.IPVS, "10.1.0.9", "172.30.0.11:5432", "REJECT 1", "Local traffic policy falls back to every endpoint"},
		// web's node port from a pod: every endpoint (short-circuit), or in ipvs mode
		// only this node's.
		{compiler.IPVS, "10.2.0.9", "192.168.0.2:30080", "DNAT 1 10.1.0.5:8080", "externalTrafficPolicy Local holds for pods and the node too"},
	} {
		p, _ := l.Packet(netip.MustParseAddr(tc.src), netip.MustParseAddrPort(tc.dst), "tcp")
		res, applied := ExpectMode(tc.mode, sm, l.Host(), p)
		if got := Summary(res); got != tc.want || strings.Join(applied, "; ") != tc.applied {
			t.Errorf("%s: %s -> %s: %s (applied %q), want %s (applied %q)", tc.mode, tc.src, tc.dst, got, applied, tc.want, tc.applied)
		}
	}
	for _, d := range Differences {
		if d.Name == "" || len(d.Reason) < 40 || d.set == nil {
			t.Errorf("difference %+v: every difference needs a name, a reason and an adjustment", d.Name)
		}
	}
}

// The probes cover every frontend from every kind of source.
func TestProbes(t *testing.T) {
	c, sm := compile(t, cluster)
	var got []string
	for _, p := range Probes(NewLocator(sm, c)) {
		if p.Frontend.Service.Name == "web" {
			got = append(got, p.Frontend.String()+" <- "+p.Packet.Src.String()+" "+string(p.Source.Locality))
		}
	}
	joined := strings.Join(got, "\n")
	for _, w := range []string{
		"cluster IP 172.30.0.10:80/tcp <- 198.51.100.77 outside",
		"cluster IP 172.30.0.10:80/tcp <- 10.2.0.7 remote-pod",
		"cluster IP 172.30.0.10:80/tcp <- 192.168.0.2 node",
		"cluster IP 172.30.0.10:80/tcp <- 10.1.0.5 local-pod",
		"load-balancer IP 5.6.7.8:80/tcp <- 203.0.113.1 outside",
		"load-balancer IP 5.6.7.8:80/tcp <- 198.51.100.77 outside",
		"node port 192.168.0.2:30080/tcp <- 10.1.0.5 local-pod",
		"node port 127.0.0.1:30080/tcp <- 127.0.0.1 node",
		"health check node port 192.168.0.2:30999/tcp <- 198.51.100.77 outside",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("no probe %q in\n%s", w, joined)
		}
	}
}

// verify passes svcgen's own iptables rules, and catches rules that spread traffic
// wrongly or forget to masquerade, naming the Service.
func TestCheck(t *testing.T) {
	c, sm := compile(t, cluster)
	r, err := Run(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Write(&out)
	if !r.OK() || !strings.Contains(out.String(), "iptables: ") {
		t.Fatalf("svcgen's own rules disagree:\n%s", out.String())
	}
	for _, tc := range []struct {
		name, from, to, service string
	}{
		{"uneven spreading", "--probability 0.5000000000", "--probability 0.2500000000", "shop/web"},
		{"external chains emptied", "-A KUBE-EXT-", "-A KUBE-IGNORED-", "shop/web"},
		{"no hairpin masquerade", "-j KUBE-MARK-MASQ\n-A KUBE-SEP", "\n-A KUBE-SEP", "shop/web"},
		{"the reject rule lost", "-j REJECT", "-j ACCEPT", "shop/empty"},
	} {
		broken := func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
			var b bytes.Buffer
			if err := iptrules.Write(&b, sm, iptrules.Options{}); err != nil {
				return nil, err
			}
			text := strings.ReplaceAll(b.String(), tc.from, tc.to)
			if text == b.String() {
				t.Fatalf("%s: %q is not in the rules", tc.name, tc.from)
			}
			rs, err := iptsyntax.ParseBytes("broken", []byte(text))
			if err != nil {
				return nil, err
			}
			return trace.NewIPTables(rs, host)
		}
		tr, err := broken(sm, HostOf(sm))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mr := CheckTracer(compiler.IPTables, sm, c, tr)
		if len(mr.Disagreements) == 0 {
			t.Errorf("%s: verify found nothing", tc.name)
			continue
		}
		for _, d := range mr.Disagreements {
			if d.Probe.Frontend.Service.Key() != tc.service && d.Err == nil {
				t.Errorf("%s: a disagreement on %s:\n%s", tc.name, d.Probe.Frontend.Service.Key(), d)
			}
			if !strings.Contains(d.String(), "Service "+tc.service+" ") {
				t.Errorf("%s: the report does not name the Service:\n%s", tc.name, d)
			}
		}
	}
}

// A NodePort whose endpoint is a hostNetwork Pod of this node: traffic from another
// host is delivered to the node itself and never passes nat POSTROUTING, so it keeps
// its source although it was marked for masquerade, in every mode (e2e's
// TestHostNetworkEndpointKeepsSource shows the kernel doing so); the Pod behind a
// veth is masqueraded.
func TestHostNetworkEndpoint(t *testing.T) {
	c, sm := compile(t, testkit.HostNetworkNodePort)
	l := NewLocator(sm, c)
	for _, tc := range []struct{ src, dst, want string }{
		{"198.51.100.1", "198.18.1.1:30860", "DNAT 1/2 198.18.1.1:9100; DNAT 1/2 198.18.5.5:9100 masquerade"},
		{"198.18.5.9", "198.18.1.1:30860", "DNAT 1/2 198.18.1.1:9100; DNAT 1/2 198.18.5.5:9100 masquerade"},
		// From the node itself the packet goes out through POSTROUTING (to lo).
		{"198.18.1.1", "198.18.1.1:30860", "DNAT 1/2 198.18.1.1:9100 masquerade; DNAT 1/2 198.18.5.5:9100 masquerade"},
	} {
		p, _ := l.Packet(netip.MustParseAddr(tc.src), netip.MustParseAddrPort(tc.dst), "tcp")
		if got := Summary(Expect(sm, l.Host(), p)); got != tc.want {
			t.Errorf("%s -> %s:\n got  %s\n want %s", tc.src, tc.dst, got, tc.want)
		}
	}
	r, err := Run(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Write(&out)
	if !r.OK() || strings.Count(out.String(), "every probe agrees") != 3 {
		t.Errorf("the three modes' rules disagree with the service map:\n%s", out.String())
	}
}
