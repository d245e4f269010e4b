package golden

import (
	"fmt"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
)

// Upstream tests whose assertions are not whole dumps live here, each checking what
// its upstream test checks, with the fake node of golden/README.md.

const fakeNode = `apiVersion: v1
kind: Node
metadata: {name: test-node}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: svcgen/v1alpha1
kind: NodeEnvironment
metadata: {name: test-node}
iptables: {randomFully: false, nfacct: true}
interfaces:
- {name: lo, addresses: [127.0.0.1/8]}
- {name: eth0, addresses: [192.168.0.2/24, 192.168.1.2/24, 192.168.99.11/24]}
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
hostnameOverride: test-node
clusterCIDR: 10.0.0.0/8
`

func compileText(t *testing.T, manifests string, partial *iptplan.Options) string {
	t.Helper()
	res := testkit.Compile(t, "test.yaml", fakeNode+"---\n"+manifests, pipeline.Settings{NoAllocate: true})
	return string(emit(t, res, partial))
}

// upstream: TestLoadBalancerIngressRouteTypeProxy — an ingress IP with ipMode Proxy gets
// no KUBE-SERVICES rule; VIP and unset do.
func TestUpstreamLoadBalancerIngressRouteTypeProxy(t *testing.T) {
	for _, tc := range []struct {
		name, svcIP, lbIP, ipMode string
		want                      bool
	}{
		{"ipMode Proxy", "10.20.30.41", "1.2.3.4", "ipMode: Proxy", false},
		{"ipMode VIP", "10.20.30.42", "1.2.3.5", "ipMode: VIP", true},
		{"ipMode nil", "10.20.30.43", "1.2.3.6", "", true},
	} {
		out := compileText(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: svc1, namespace: ns1}
spec:
  type: LoadBalancer
  clusterIP: %s
  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]
status: {loadBalancer: {ingress: [{ip: %s, %s}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc1-1, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}
addressType: IPv4
endpoints: [{addresses: [10.180.0.1]}]
ports: [{name: p80, port: 80, protocol: TCP}]
`, tc.svcIP, tc.lbIP, tc.ipMode), nil)
		rules, _ := natChain(out, "KUBE-SERVICES")
		if got := strings.Contains(rules, "-d "+tc.lbIP+" "); got != tc.want {
			t.Errorf("%s: rule for %s present = %v, want %v", tc.name, tc.lbIP, got, tc.want)
		}
	}
}

// natChain returns the rule lines of a nat chain.
func natChain(out, chain string) (string, int) {
	var lines []string
	inNat := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "*nat":
			inNat = true
		case strings.HasPrefix(l, "*"):
			inNat = false
		case inNat && strings.HasPrefix(l, "-A "+chain+" "):
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n"), len(lines)
}

// countEndpoints counts KUBE-SEP DNAT rules and those with a comment, and returns the
// one that DNATs to match (upstream's countEndpointsAndComments).
func countEndpoints(out, match string) (matched string, endpoints, comments int) {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A KUBE-SEP-") && strings.Contains(l, "-j DNAT") {
			endpoints++
			if strings.Contains(l, "--comment") {
				comments++
			}
			if strings.Contains(l, match) {
				matched = l
			}
		}
	}
	return matched, endpoints, comments
}

func bigSlice(ns, name, port, portName, prefix string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s-1, namespace: %s, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nports: [{name: %s, port: %s, protocol: TCP}]\nendpoints:\n", name, ns, name, portName, port)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "- {addresses: [%s.%d.%d]}\n", prefix, i%256, i/256)
	}
	return b.String()
}

// upstream: TestSyncProxyRulesLargeClusterMode — past 1000 endpoints, KUBE-SEP and
// dispatch rules lose their comments. Upstream's partial syncs keep the comments of
// services that did not change until a full sync, and delete stale chains only once per
// syncPeriod; svcgen has no clock and no history, so it writes the state upstream
// reaches after its full resync and delayed cleanup (see golden/UPSTREAM-NOTES.md).
func TestUpstreamLargeClusterMode(t *testing.T) {
	svcs := `apiVersion: v1
kind: Service
metadata: {name: svc1, namespace: ns1}
spec: {type: ClusterIP, clusterIP: 172.30.0.41, ports: [{name: p80, port: 80, protocol: TCP}]}
---
apiVersion: v1
kind: Service
metadata: {name: svc2, namespace: ns2}
spec: {type: ClusterIP, clusterIP: 172.30.0.42, ports: [{name: p8080, port: 8080, protocol: TCP}]}
---
apiVersion: v1
kind: Service
metadata: {name: svc3, namespace: ns3}
spec: {type: ClusterIP, clusterIP: 172.30.0.43, ports: [{name: p8081, port: 8081, protocol: TCP}]}
---
` + bigSlice("ns1", "svc1", "80", "p80", "10.0", 499) + "---\n" + bigSlice("ns2", "svc2", "8080", "p8080", "10.1", 499)

	// 998 endpoints: comments stay.
	out := compileText(t, svcs, nil)
	first, n, comments := countEndpoints(out, "10.0.0.0")
	if first != "-A KUBE-SEP-DKGQUZGBKLTPAR56 -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80" || n != 998 || comments != n {
		t.Errorf("below the threshold: %q, %d endpoints, %d comments", first, n, comments)
	}

	// svc3's three endpoints cross the threshold: no comment anywhere.
	svc3 := "---\n" + `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc3-1, namespace: ns3, labels: {kubernetes.io/service-name: svc3}}
addressType: IPv4
ports: [{name: p8081, port: 8081, protocol: TCP}]
endpoints: [{addresses: [203.0.113.4]}, {addresses: [203.0.113.8]}, {addresses: [203.0.113.12]}]
`
	large := compileText(t, svcs+svc3, nil)
	if first, n, comments = countEndpoints(large, "203.0.113.4"); first != "-A KUBE-SEP-RUVVH7YV3PHQBDOS -m tcp -p tcp -j DNAT --to-destination 203.0.113.4:8081" || n != 1001 || comments != 0 {
		t.Errorf("above the threshold: %q, %d endpoints, %d comments", first, n, comments)
	}
	if first, _, _ = countEndpoints(large, "10.0.0.0"); first != "-A KUBE-SEP-DKGQUZGBKLTPAR56 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80" {
		t.Errorf("after the full resync: %q", first)
	}

	// Adding svc4 writes only svc4's endpoint chain.
	svc4 := "---\n" + `apiVersion: v1
kind: Service
metadata: {name: svc4, namespace: ns4}
spec: {type: ClusterIP, clusterIP: 172.30.0.44, ports: [{name: p8082, port: 8082, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc4-1, namespace: ns4, labels: {kubernetes.io/service-name: svc4}}
addressType: IPv4
ports: [{name: p8082, port: 8082, protocol: TCP}]
endpoints: [{addresses: [10.4.0.1]}]
`
	prev, err := iptsyntax.ParseBytes("prev", []byte(large))
	if err != nil {
		t.Fatal(err)
	}
	with4 := compileText(t, svcs+svc3+svc4, nil)
	partial := compileText(t, svcs+svc3+svc4, &iptplan.Options{Previous: prev})
	if first, n, _ = countEndpoints(partial, "10.4.0.1"); first != "-A KUBE-SEP-SU5STNODRYEWJAUF -m tcp -p tcp -j DNAT --to-destination 10.4.0.1:8082" || n != 1 {
		t.Errorf("adding svc4: %q, %d endpoints written", first, n)
	}

	// Deleting svc4 writes no endpoint and deletes its chains.
	prev, err = iptsyntax.ParseBytes("prev", []byte(with4))
	if err != nil {
		t.Fatal(err)
	}
	deleted := compileText(t, svcs+svc3, &iptplan.Options{Previous: prev})
	if _, n, _ = countEndpoints(deleted, "10.4.0.1"); n != 0 {
		t.Errorf("deleting svc4 wrote %d endpoints", n)
	}
	for _, want := range []string{"-X KUBE-SVC-EBDQOQU5SJFXRIL3", "-X KUBE-SEP-SU5STNODRYEWJAUF"} {
		if !strings.Contains(deleted, want) {
			t.Errorf("deleting svc4: no %q", want)
		}
	}
}
