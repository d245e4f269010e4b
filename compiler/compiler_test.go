package compiler_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// cluster loads the documents as one file, in.yaml.
func cluster(t *testing.T, docs ...string) *model.Cluster {
	t.Helper()
	return testkit.Load(t, "in.yaml", strings.Join(docs, "\n---\n"))
}

func svc(name, spec string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: ns}\nspec:\n" + spec
}

func resolveErr(t *testing.T, c *model.Cluster, want string) {
	t.Helper()
	_, err := compiler.Resolve(c, compiler.ResolveOptions{})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v; want it to contain %q", err, want)
	}
}

func TestConflicts(t *testing.T) {
	resolveErr(t, cluster(t, svc("a", "  ports: [{port: 80}]"), svc("a", "  ports: [{port: 81}]")),
		"in.yaml: document 2 (Service ns/a): metadata.name: Service ns/a is defined twice (first in in.yaml: document 1 (Service ns/a))")
	resolveErr(t, cluster(t, svc("a", "  clusterIP: 10.96.0.10\n  ports: [{port: 80}]"), svc("b", "  clusterIP: 10.96.0.10\n  ports: [{port: 81}]")),
		"(Service ns/b): spec.clusterIPs[0]: 10.96.0.10 is already the ClusterIP of Service ns/a")
	resolveErr(t, cluster(t, svc("a", "  type: NodePort\n  ports: [{port: 80, nodePort: 30080}]"), svc("b", "  type: NodePort\n  ports: [{port: 81, nodePort: 30080}]")),
		"(Service ns/b): spec.ports[0].nodePort: node port 30080 is already used by Service ns/a")
	resolveErr(t, cluster(t, svc("a", "  type: NodePort\n  ports: [{port: 80, nodePort: 29998}]")),
		"spec.ports[0].nodePort: 29998 is outside the node port range 30000-32767")
	resolveErr(t, cluster(t, svc("a", "  ports: [{port: 80}, {port: 81}]")),
		"spec.ports[1].name: missing: every port needs a name when a Service has more than one")
}

func TestAllocationIsStableAndDistinct(t *testing.T) {
	var docs []string
	for _, n := range []string{"a", "b", "c", "d"} {
		docs = append(docs, svc(n, "  type: NodePort\n  ports: [{port: 80}]"))
	}
	r1, err := compiler.Resolve(cluster(t, docs...), compiler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seenIP, seenPort := map[netip.Addr]bool{}, map[int32]bool{}
	for _, s := range r1.Cluster.Services {
		ip, port := s.ClusterIPs[0], s.Ports[0].NodePort
		if !compiler.DefaultServiceCIDR.Contains(ip) || ip == netip.MustParseAddr("10.96.0.0") || ip == netip.MustParseAddr("10.96.0.1") || ip == netip.MustParseAddr("10.111.255.255") {
			t.Errorf("%s got %s", s.Key(), ip)
		}
		if port < 30000 || port > 32767 || seenPort[port] || seenIP[ip] {
			t.Errorf("%s got %s/%d, reused or out of range", s.Key(), ip, port)
		}
		seenIP[ip], seenPort[port] = true, true
	}
	// Adding a Service moves none of the others.
	r2, err := compiler.Resolve(cluster(t, append(docs, svc("aa", "  type: NodePort\n  ports: [{port: 80}]"))...), compiler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r1.Cluster.Services {
		for _, s2 := range r2.Cluster.Services {
			if s2.Key() == s.Key() && (s2.ClusterIPs[0] != s.ClusterIPs[0] || s2.Ports[0].NodePort != s.Ports[0].NodePort) {
				t.Errorf("%s moved from %v to %v", s.Key(), s.ClusterIPs, s2.ClusterIPs)
			}
		}
	}
}

func TestLockKeepsAllocations(t *testing.T) {
	lock, err := compiler.ParseLock("svcgen.lock", []byte("apiVersion: svcgen/v1alpha1\nkind: Lock\nservices:\n  ns/a:\n    clusterIPs: [10.96.7.7]\n    nodePorts: {/TCP: 31234}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := compiler.Resolve(cluster(t, svc("a", "  type: NodePort\n  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Cluster.Services[0]
	if s.ClusterIPs[0] != netip.MustParseAddr("10.96.7.7") || s.Ports[0].NodePort != 31234 {
		t.Errorf("lock ignored: %v %d", s.ClusterIPs, s.Ports[0].NodePort)
	}
	again, err := compiler.ParseLock("new", r.Lock.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Services["ns/a"]; got.ClusterIPs[0] != s.ClusterIPs[0] || got.NodePorts["/TCP"] != 31234 {
		t.Errorf("lock round trip: %+v", got)
	}
	// A locked address another Service now claims is not handed out twice.
	r, err = compiler.Resolve(cluster(t, svc("a", "  ports: [{port: 80}]"), svc("b", "  clusterIP: 10.96.7.7\n  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster.Services[0].ClusterIPs[0] == netip.MustParseAddr("10.96.7.7") {
		t.Error("ns/a kept a locked address that ns/b holds")
	}
}

const pods = `apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: ns, labels: {app: web}}
spec:
  nodeName: node1
  containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]
status: {podIP: 10.1.0.1, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: ns, labels: {app: web}}
spec:
  nodeName: node2
  containers: [{name: c, ports: [{name: http, containerPort: 9090}]}]
status: {podIP: 10.1.0.2, conditions: [{type: Ready, status: "False"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p3, namespace: ns, labels: {app: web}, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec:
  nodeName: node1
  containers: [{name: c, ports: [{name: other, containerPort: 7070}]}]
status: {podIP: 10.1.0.3, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: p4, namespace: other, labels: {app: web}}
spec:
  containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]
status: {podIP: 10.1.0.4, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Node
metadata: {name: node1, labels: {topology.kubernetes.io/zone: z1}}
status: {addresses: [{type: InternalIP, address: 192.168.0.1}]}`

func compileCluster(t *testing.T, c *model.Cluster) *ir.ServiceMap {
	t.Helper()
	r, err := compiler.Resolve(c, compiler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := compiler.Compile(r.Cluster, compiler.Options{Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

func TestEndpointsFromPods(t *testing.T) {
	sm := compileCluster(t, cluster(t, pods, svc("web", "  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: http}\n  - {name: raw, port: 81, targetPort: 7070}")))
	ports := sm.Services[0].Ports
	var http, raw *ir.Port
	for _, p := range ports {
		if p.Name.Port == "http" {
			http = p
		} else {
			raw = p
		}
	}
	// p3 has no port named http: it is no endpoint of that port. p4 is in another namespace.
	if got := endpointStrings(http.Endpoints); got != "10.1.0.1:8080 10.1.0.2:9090" {
		t.Errorf("http endpoints = %s", got)
	}
	if e := http.Endpoints[0]; !e.Ready || !e.Local || e.Zone != "z1" {
		t.Errorf("p1 = %+v", e)
	}
	if e := http.Endpoints[1]; e.Ready || e.Serving || e.Local {
		t.Errorf("p2 (not ready) = %+v", e)
	}
	if got := endpointStrings(raw.Endpoints); got != "10.1.0.1:7070 10.1.0.2:7070 10.1.0.3:7070" {
		t.Errorf("raw endpoints = %s", got)
	}
	if e := raw.Endpoints[2]; e.Ready || !e.Serving || !e.Terminating {
		t.Errorf("p3 (terminating) = %+v", e)
	}
	if got := endpointStrings(http.ClusterEndpoints()); got != "10.1.0.1:8080" {
		t.Errorf("only the ready pod serves: %s", got)
	}
}

func endpointStrings(eps []ir.Endpoint) string {
	var s []string
	for _, e := range eps {
		s = append(s, e.String())
	}
	return strings.Join(s, " ")
}

func TestTerminatingFallbackAndPolicies(t *testing.T) {
	slice := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: "", port: 80}]
endpoints:
- {addresses: [10.0.0.2], nodeName: node1, conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.10], nodeName: node2, conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.3], nodeName: node2, conditions: {ready: false, serving: false, terminating: true}}`
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\n"
	sm := compileCluster(t, cluster(t, slice, node, svc("web", "  clusterIP: 10.96.0.5\n  type: NodePort\n  externalTrafficPolicy: Local\n  ports: [{port: 80, nodePort: 30001}]")))
	p := sm.Services[0].Ports[0]
	// Sorted as strings: 10.0.0.10 before 10.0.0.2.
	if got := endpointStrings(p.Endpoints); got != "10.0.0.10:80 10.0.0.2:80 10.0.0.3:80" {
		t.Errorf("order = %s", got)
	}
	if got := endpointStrings(p.ClusterEndpoints()); got != "10.0.0.10:80 10.0.0.2:80" {
		t.Errorf("cluster fallback = %s", got)
	}
	if got := endpointStrings(p.LocalEndpoints()); got != "10.0.0.2:80" {
		t.Errorf("local fallback = %s", got)
	}
	if p.Internal() != ir.ToCluster || p.External() != ir.ToLocal || !p.HasEndpoints {
		t.Errorf("routes %v %v", p.Internal(), p.External())
	}
}

// Services another proxy handles (label service.kubernetes.io/service-proxy-name),
// headless and ExternalName Services get no rules; the API server still allocates for
// the first.
func TestUnproxiedServices(t *testing.T) {
	sm := compileCluster(t, cluster(t,
		"apiVersion: v1\nkind: Service\nmetadata: {name: other, namespace: ns, labels: {service.kubernetes.io/service-proxy-name: cilium}}\nspec: {ports: [{port: 80}]}",
		svc("headless", "  clusterIP: None\n  ports: [{port: 80}]"),
		svc("ext", "  type: ExternalName\n  externalName: example.com"),
		svc("plain", "  ports: [{port: 80}]")))
	if len(sm.Services) != 1 || sm.Services[0].Name != "plain" {
		t.Errorf("services = %v", sm.Services)
	}
}

// A hand-written slice port without a name serves the Service's unnamed port: the API
// server defaults the name to "" (SetDefaults_EndpointPort), and so does svcgen.
func TestSlicePortWithoutNameServesUnnamedPort(t *testing.T) {
	slice := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.1.0.1], conditions: {ready: true}}]`
	sm := compileCluster(t, cluster(t, svc("web", "  clusterIP: 10.96.0.10\n  ports: [{port: 80, targetPort: 8080}]"), slice))
	if got := endpointStrings(sm.Services[0].Ports[0].Endpoints); got != "10.1.0.1:8080" {
		t.Errorf("endpoints = %q; want 10.1.0.1:8080", got)
	}
}

// An address in two slices is one endpoint: the first, unless a later one is not
// terminating. The result is sorted as "IP:port" strings, however many endpoints
// (a port with few is searched one by one, one with many through a map).
func TestDuplicateEndpoints(t *testing.T) {
	for _, n := range []int{3, compiler.IndexFrom - 1, compiler.IndexFrom, 40} {
		var first, second strings.Builder
		for i := range n {
			fmt.Fprintf(&first, "- {addresses: [10.0.0.%d], conditions: {ready: false, terminating: true}}\n", i)
			if i%2 == 0 {
				fmt.Fprintf(&second, "- {addresses: [10.0.0.%d], conditions: {ready: true}}\n", i)
			} else {
				fmt.Fprintf(&second, "- {addresses: [10.0.0.%d], nodeName: other, conditions: {ready: false, terminating: true}}\n", i)
			}
		}
		slice := func(name, eps string) string {
			return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: " + name +
				", namespace: ns, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{name: \"\", port: 80}]\nendpoints:\n" + eps
		}
		sm := compileCluster(t, cluster(t, svc("web", "  clusterIP: 10.96.0.5\n  ports: [{port: 80}]"),
			slice("web-1", first.String()), slice("web-2", second.String())))
		eps := sm.Services[0].Ports[0].Endpoints
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("10.0.0.%d:80", i))
		}
		slices.Sort(want)
		if got := endpointStrings(eps); got != strings.Join(want, " ") {
			t.Errorf("%d: endpoints %s\nwant %s", n, got, strings.Join(want, " "))
		}
		for _, e := range eps {
			even := e.IP.As4()[3]%2 == 0
			if e.Ready != even || e.Terminating == even || e.NodeName != "" {
				t.Errorf("%d: %s kept the wrong duplicate: %+v", n, e, e)
			}
		}
	}
}

// Resolve leaves its input as it was; the Services it has nothing to fill in are
// the input's own (not copies), the others copies with the allocations.
func TestResolveLeavesInputAlone(t *testing.T) {
	lock, err := compiler.ParseLock("svcgen.lock", []byte("apiVersion: svcgen/v1alpha1\nkind: Lock\nservices:\n  ns/locked:\n    clusterIPs: [10.96.7.7]\n"))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{
		svc("done", "  clusterIP: 10.96.0.5\n  type: NodePort\n  ports: [{port: 80, nodePort: 30080}]"),
		svc("ip", "  ports: [{port: 80}]"),
		svc("nodeport", "  clusterIP: 10.96.0.6\n  type: NodePort\n  ports: [{port: 80, nodePort: 30081}, {name: b, port: 81}]"),
		svc("health", "  clusterIP: 10.96.0.7\n  type: LoadBalancer\n  externalTrafficPolicy: Local\n  ports: [{port: 80, nodePort: 30082}]"),
		svc("locked", "  ports: [{port: 80}]"),
	}
	in, want := cluster(t, docs...), cluster(t, docs...)
	r, err := compiler.Resolve(in, compiler.ResolveOptions{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, want) {
		t.Error("Resolve changed its input")
	}
	for i, s := range r.Cluster.Services {
		shared := slices.Contains(in.Services, s)
		if shared != (s.Name == "done") {
			t.Errorf("%s: shared with the input: %v", s.Name, shared)
		}
		if len(s.ClusterIPs) == 0 || (s.Name == "nodeport" || s.Name == "health") && s.Ports[len(s.Ports)-1].NodePort == 0 ||
			s.Name == "health" && s.HealthCheckNodePort == 0 || s.Name == "locked" && s.ClusterIPs[0] != netip.MustParseAddr("10.96.7.7") {
			t.Errorf("service %d not filled in: %+v", i, s)
		}
	}
}

// Every twin is reported against the first loaded, for each kind, sorted list or not.
func TestTwinsReported(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nstatus: {podIP: 10.1.0.1}"
	env := "apiVersion: svcgen/v1alpha1\nkind: NodeEnvironment\nmetadata: {name: n1}"
	c := cluster(t, svc("b", "  ports: [{port: 80}]"), pod, svc("a", "  ports: [{port: 80}]"), env, pod, svc("b", "  ports: [{port: 81}]"), env, svc("b", "  ports: [{port: 82}]"))
	_, err := compiler.Resolve(c, compiler.ResolveOptions{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"document 5 (Pod ns/p): metadata.name: Pod ns/p is defined twice (first in in.yaml: document 2 (Pod ns/p))",
		"document 6 (Service ns/b): metadata.name: Service ns/b is defined twice (first in in.yaml: document 1 (Service ns/b))",
		"document 7 (NodeEnvironment n1): metadata.name: NodeEnvironment n1 is defined twice (first in in.yaml: document 4 (NodeEnvironment n1))",
		"document 8 (Service ns/b): metadata.name: Service ns/b is defined twice (first in in.yaml: document 1 (Service ns/b))",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "defined twice"); n != 4 {
		t.Errorf("%d twins reported, want 4:\n%v", n, err)
	}
}

// Topology hints: when every ready endpoint has them and one is for this node's zone,
// only the endpoints hinted for the zone serve; an empty hints mapping is no hints.
func TestTopologyHints(t *testing.T) {
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: node1, labels: {topology.kubernetes.io/zone: z1}}\n"
	for _, tc := range []struct{ hintsA, hintsB, want string }{
		{"{forZones: [{name: z1}]}", "{forZones: [{name: z2}]}", "10.0.0.1:80"},
		{"{forZones: [{name: z2}, {name: z1}]}", "{forZones: [{name: z1}]}", "10.0.0.1:80 10.0.0.2:80"},
		{"{forZones: [{name: z1}]}", "{}", "10.0.0.1:80 10.0.0.2:80"},
		{"{forZones: [{name: z3}]}", "{forZones: [{name: z2}]}", "10.0.0.1:80 10.0.0.2:80"},
		{"{forNodes: [{name: node1}]}", "{forNodes: [{name: node2}]}", "10.0.0.1:80"},
	} {
		slice := "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}\n" +
			"addressType: IPv4\nports: [{name: \"\", port: 80}]\nendpoints:\n" +
			"- {addresses: [10.0.0.1], conditions: {ready: true}, hints: " + tc.hintsA + "}\n" +
			"- {addresses: [10.0.0.2], conditions: {ready: true}, hints: " + tc.hintsB + "}\n"
		c := cluster(t, node, slice, svc("web", "  clusterIP: 10.96.0.5\n  ports: [{port: 80}]"))
		r, err := compiler.Resolve(c, compiler.ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sm, err := compiler.Compile(r.Cluster, compiler.Options{Node: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := endpointStrings(sm.Services[0].Ports[0].ClusterEndpoints()); got != tc.want {
			t.Errorf("hints %s, %s: cluster endpoints %s, want %s", tc.hintsA, tc.hintsB, got, tc.want)
		}
	}
}

// A damaged lock is an error naming each entry, never a silent move: an address two
// entries hold, two addresses of one family, an address outside every service CIDR, an
// address of a family the Service does not ask for.
func TestLockDamaged(t *testing.T) {
	lock, err := compiler.ParseLock("svcgen.lock", []byte(`services:
  ns/a: {clusterIPs: [10.96.0.10]}
  ns/b: {clusterIPs: [10.96.0.10]}
  ns/c: {clusterIPs: [10.96.0.11, 10.96.0.12]}
  ns/d: {clusterIPs: [10.200.0.1]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = compiler.Resolve(cluster(t, svc("a", "  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock})
	for _, want := range []string{
		`svcgen.lock: services["ns/b"].clusterIPs[0]: 10.96.0.10 is also locked for Service ns/a (edit or delete the entry)`,
		`svcgen.lock: services["ns/c"].clusterIPs[1]: a second IPv4 address, 10.96.0.12`,
		`svcgen.lock: services["ns/d"].clusterIPs[0]: 10.200.0.1 is outside every service CIDR (10.96.0.0/12)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to hold %q", err, want)
		}
	}
	lock, err = compiler.ParseLock("svcgen.lock", []byte("services:\n  ns/a: {clusterIPs: ['fd00::10']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = compiler.Resolve(cluster(t, svc("a", "  ipFamilies: [IPv4]\n  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00::/108")}})
	if want := `svcgen.lock: services["ns/a"].clusterIPs[0]: fd00::10 is an IPv6 address, and Service ns/a asks for IPv4`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant %q", err, want)
	}
}

// Entries of Services not in the input stay in the lock, and their addresses and
// ports are handed to no other Service: runs over parts of a cluster keep each other's
// allocations.
func TestLockKeepsAbsentServices(t *testing.T) {
	sc := "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: small}\nspec: {cidrs: [10.96.0.0/29]}"
	var entries strings.Builder
	entries.WriteString("services:\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&entries, "  ns/gone%d: {clusterIPs: [10.96.0.%d], nodePorts: {/TCP: %d}}\n", i, i, 30000+i)
	}
	lock, err := compiler.ParseLock("svcgen.lock", []byte(entries.String()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := compiler.Resolve(cluster(t, sc, svc("new", "  type: NodePort\n  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock, NodePortRange: compiler.PortRange{Min: 30001, Max: 30006}})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Cluster.Services[0]
	if s.ClusterIPs[0] != netip.MustParseAddr("10.96.0.6") || s.Ports[0].NodePort != 30006 {
		t.Errorf("ns/new got %v and node port %d; the only free ones are 10.96.0.6 and 30006", s.ClusterIPs, s.Ports[0].NodePort)
	}
	if len(r.Lock.Services) != 6 || r.Lock.Services["ns/gone3"].ClusterIPs[0] != netip.MustParseAddr("10.96.0.3") {
		t.Errorf("the new lock lost entries: %v", r.Lock.Services)
	}
	// A Service of the manifests that takes a kept entry's address wins, with a warning.
	r, err = compiler.Resolve(cluster(t, sc, svc("new", "  clusterIP: 10.96.0.2\n  ports: [{port: 80}]")), compiler.ResolveOptions{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := r.Lock.Services["ns/gone2"]; kept || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0].Error(), "the entry of Service ns/gone2 (not in the input) is dropped") {
		t.Errorf("entries %v, warnings %v", r.Lock.Services, r.Warnings)
	}
}
