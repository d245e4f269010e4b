package load

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/model"
)

func loadString(t *testing.T, name, data string, d Dialect) *Loader {
	t.Helper()
	l := &Loader{Dialect: d}
	l.Bytes(name, []byte(data))
	return l
}

const svcHead = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
`

// Every bad input names file, document, object and field.
func TestBadInputErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"syntax", "a: b\n---\nkind: [\n", `svc.yaml: document 2: YAML syntax error: line 3: did not find expected node content`},
		{"binary", "kind: Service\x00\x01\x02", `svc.yaml: not a YAML or JSON manifest: binary data (a NUL byte at offset 13)`},
		{"not an object", "just a string\n", `svc.yaml: document 1: expected a Kubernetes object (a mapping with apiVersion and kind), got the string "just a string"`},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", `svc.yaml: document 1: kind: missing: every object needs apiVersion and kind`},
		{"spec type", svcHead + "spec: hello\n", `svc.yaml: document 1 (Service shop/web): spec: expected a mapping, got the string "hello"`},
		{"port range", svcHead + "spec:\n  ports:\n  - port: 70000\n", `svc.yaml: document 1 (Service shop/web): spec.ports[0].port: 70000 is out of range (1-65535)`},
		{"port text", svcHead + "spec:\n  ports:\n  - port: eighty\n", `svc.yaml: document 1 (Service shop/web): spec.ports[0].port: expected a whole number, got the string "eighty"`},
		{"port quoted", svcHead + "spec:\n  ports:\n  - port: \"80\"\n", `spec.ports[0].port: expected a whole number, got the string "80"`},
		{"port decimal", svcHead + "spec:\n  ports:\n  - port: 80.0\n", `spec.ports[0].port: 80.0 is not a whole number`},
		{"protocol", svcHead + "spec:\n  ports:\n  - port: 80\n    protocol: ICMP\n", `spec.ports[0].protocol: unknown protocol "ICMP" (want TCP, UDP or SCTP)`},
		{"lower protocol", svcHead + "spec:\n  ports:\n  - port: 80\n    protocol: tcp\n", `spec.ports[0].protocol: unknown protocol "tcp"`},
		{"cluster IP", svcHead + "spec:\n  clusterIP: 10.0.0.300\n  ports:\n  - port: 80\n", `spec.clusterIPs[0]: "10.0.0.300" is not an IP address`},
		{"external CIDR", svcHead + "spec:\n  externalIPs: [1.2.3.0/24]\n  ports:\n  - port: 80\n", `spec.externalIPs[0]: "1.2.3.0/24" is a CIDR; external IPs are single addresses`},
		{"source range", svcHead + "spec:\n  loadBalancerSourceRanges: [1.2.3.4]\n  ports:\n  - port: 80\n", `spec.loadBalancerSourceRanges[0]: "1.2.3.4" is not a CIDR`},
		{"affinity", svcHead + "spec:\n  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: -5}}\n  ports:\n  - port: 80\n", `spec.sessionAffinityConfig.clientIP.timeoutSeconds: -5 is out of range (1-86400)`},
		{"quote in name", "apiVersion: v1\nkind: Service\nmetadata:\n  name: 'we\"b'\nspec:\n  ports:\n  - port: 80\n", `metadata.name: "we\"b" has characters that cannot go into rules`},
		{"space in namespace", svcHead[:len(svcHead)-len("  namespace: shop\n")] + "  namespace: \"a b\"\nspec:\n  ports:\n  - port: 80\n", `metadata.namespace: "a b" has characters that cannot go into rules`},
		{"newline in port name", svcHead + "spec:\n  ports:\n  - port: 80\n    name: \"a\\nb\"\n", `spec.ports[0].name: "a\nb" has characters that cannot go into rules`},
		{"shell in target", svcHead + "spec:\n  ports:\n  - port: 80\n    targetPort: \"$(reboot)\"\n", `spec.ports[0].targetPort: "$(reboot)" has characters that cannot go into rules`},
		{"masquerade bit", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables: {masqueradeBit: 40}\n", `svc.yaml: document 1 (KubeProxyConfiguration): iptables.masqueradeBit: 40 is out of range (0-31)`},
		{"bridge", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\ndetectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: \"br0;rm\"}\n", `detectLocal.bridgeInterface: "br0;rm" has characters that cannot go into rules`},
		{"list item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {ports: [{port: 0}]}\n", `svc.yaml: document 1 (Service default/a): items[0].spec.ports[0].port: 0 is out of range (1-65535)`},
		{"matchLabels", svcHead + "spec:\n  selector:\n    matchLabels: {app: x}\n  ports:\n  - port: 80\n", `spec.selector.matchLabels: a Service selector is a plain label map; matchLabels is the minik8s dialect (use --dialect minik8s)`},
		{"missing port", svcHead + "spec:\n  ports:\n  - targetPort: 80\n", `spec.ports[0].port: missing`},
		{"slice family", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints:\n- addresses: [\"fd00::1\"]\n", `endpoints[0].addresses[0]: fd00::1 is not an IPv4 address (the slice's addressType)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := loadString(t, "svc.yaml", tc.data, Kubernetes)
			err := l.Err()
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %s\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	l := loadString(t, "svc.yaml", svcHead+"spec:\n  ports:\n  - port: 0\n  - port: 1\n    protocol: X\n---\n"+svcHead+"spec: []\n", Kubernetes)
	if n := l.Errors.Len(); n != 3 {
		t.Errorf("%d errors, want 3:\n%v", n, l.Errors.Err())
	}
}

func TestSloppyAddressesNormalised(t *testing.T) {
	l := loadString(t, "svc.yaml", svcHead+"spec:\n  clusterIP: 172.30.0.041\n  externalIPs: [192.168.099.011]\n  loadBalancerSourceRanges: [\" 203.0.113.7/25\"]\n  ports:\n  - port: 80\n", Kubernetes)
	if err := l.Errors.Err(); err != nil {
		t.Fatal(err)
	}
	s := l.Cluster.Services[0]
	if s.ClusterIPs[0] != netip.MustParseAddr("172.30.0.41") || s.ExternalIPs[0] != netip.MustParseAddr("192.168.99.11") {
		t.Errorf("addresses = %v %v", s.ClusterIPs, s.ExternalIPs)
	}
	if s.LoadBalancerSourceRanges[0].String() != "203.0.113.0/25" {
		t.Errorf("source range = %v, want the network 203.0.113.0/25", s.LoadBalancerSourceRanges[0])
	}
}

func TestNameWarnings(t *testing.T) {
	l := loadString(t, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: HelloService}\nspec:\n  ports:\n  - port: 80\n", Kubernetes)
	if err := l.Errors.Err(); err != nil {
		t.Fatal(err)
	}
	w := l.Warnings.List()
	if len(w) != 1 || !strings.Contains(w[0].Error(), `svc.yaml: document 1 (Service default/HelloService): metadata.name: "HelloService" is not a valid Kubernetes name`) {
		t.Errorf("warnings = %v", w)
	}
}

// Names longer than Kubernetes allows are errors where they reach rules: a Service's
// name and namespace (63) and port names (15). Comments made of them would pass what
// the kernel keeps, so a reload would never settle.
func TestLongNames(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, c := range []struct{ doc, want string }{
		{"metadata: {name: " + long + "}\nspec: {ports: [{port: 80}]}",
			`metadata.name: "` + long + `" is longer than 63 characters, which Kubernetes does not allow`},
		{"metadata: {name: web, namespace: " + long + "}\nspec: {ports: [{port: 80}]}",
			`metadata.namespace: "` + long + `" is longer than 63`},
		{"metadata: {name: web}\nspec: {ports: [{port: 80, name: a-sixteen-chars1}]}",
			`spec.ports[0].name: "a-sixteen-chars1" is longer than 15`},
	} {
		l := loadString(t, "svc.yaml", "apiVersion: v1\nkind: Service\n"+c.doc+"\n", Kubernetes)
		if err := l.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n%v\nwant %q", c.doc, err, c.want)
		}
	}
	l := loadString(t, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: "+long[:63]+"}\nspec: {ports: [{port: 80, name: a-fifteen-char1}]}\n", Kubernetes)
	if err := l.Err(); err != nil {
		t.Errorf("names at the limit: %v", err)
	}
}

func TestJSONAndList(t *testing.T) {
	js := `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"n"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":80,"targetPort":"http"}]}},{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}]}`
	l := loadString(t, "all.json", js, Kubernetes)
	if err := l.Errors.Err(); err != nil {
		t.Fatal(err)
	}
	if len(l.Cluster.Services) != 1 || l.Cluster.Services[0].Ports[0].TargetPort.Str != "http" {
		t.Fatalf("services = %+v", l.Cluster.Services)
	}
	if got := l.Cluster.Services[0].Origin.Item; got != "items[0]" {
		t.Errorf("origin item = %q", got)
	}
}

func TestEndpointSliceNilName(t *testing.T) {
	l := loadString(t, "es.yaml", `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s, namespace: n, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports:
- {port: 80}
- {name: "", port: 81}
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: false, terminating: true}
`, Kubernetes)
	if err := l.Errors.Err(); err != nil {
		t.Fatal(err)
	}
	es := l.Cluster.Slices[0]
	if es.Ports[0].Name != "" || es.Ports[1].Name != "" {
		t.Errorf("port names: %v %v", es.Ports[0].Name, es.Ports[1].Name)
	}
	ep := es.Endpoints[0]
	if ep.Ready == nil || *ep.Ready || ep.Serving != nil || ep.Terminating == nil || !*ep.Terminating {
		t.Errorf("conditions not kept as written: %+v", ep)
	}
}

// The course projects' manifests load in the minik8s dialect.
func TestMiniK8sSeeds(t *testing.T) {
	dir := filepath.Join("..", "testdata", "minik8s")
	l := &Loader{Dialect: MiniK8s}
	l.Path(dir, nil)
	if err := l.Err(); err != nil {
		t.Fatalf("seed manifests fail in the minik8s dialect:\n%v", err)
	}
	if len(l.Cluster.Services) != 6 || len(l.Cluster.Pods) != 4 {
		t.Errorf("%d services, %d pods; want 6 and 4", len(l.Cluster.Services), len(l.Cluster.Pods))
	}
	byName := map[string]*model.Service{}
	for _, s := range l.Cluster.Services {
		byName[s.Name] = s
	}
	if s := byName["service-nodeport"]; s == nil || s.Ports[0].Port != 29998 || s.Selector["app"] != "deploy-1" {
		t.Errorf("service-nodeport = %+v", s)
	}
	if s := byName["service-example"]; s == nil || s.Ports[0].Protocol != model.TCP {
		t.Errorf("lower-case protocol not read: %+v", s)
	}
	// The same files are refused as Kubernetes manifests, with the reason.
	k := &Loader{}
	k.Path(dir, nil)
	if err := k.Err(); err == nil || !strings.Contains(err.Error(), "matchLabels is the minik8s dialect") {
		t.Errorf("Kubernetes dialect accepted the seeds: %v", err)
	}
}

// The model keeps no piece of the input: once loaded, the input (18 to 46 MB at
// 10,000 Services) is garbage.
func TestModelKeepsNoInput(t *testing.T) {
	var buf strings.Builder
	if err := gen.Write(&buf, gen.Options{Services: 30, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	var js strings.Builder
	if err := gen.Write(&js, gen.Options{Services: 30, Endpoints: 3, Format: gen.JSON}); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{buf.String(), js.String()} {
		l := &Loader{}
		l.Text("x", src)
		if err := l.Errors.Err(); err != nil {
			t.Fatal(err)
		}
		start := uintptr(unsafe.Pointer(unsafe.StringData(src)))
		inInput := func(s string) bool {
			p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
			return s != "" && p >= start && p < start+uintptr(len(src))
		}
		strs := 0
		check := func(what string, ss ...string) {
			for _, s := range ss {
				strs++
				if inInput(s) {
					t.Fatalf("%s %q is a piece of the input", what, s)
				}
			}
		}
		for _, s := range l.Cluster.Services {
			check("service", s.Name, s.Namespace, s.Origin.Kind, s.Origin.Name, s.Origin.Namespace)
			for k, v := range s.Selector {
				check("selector", k, v)
			}
			for k, v := range s.Labels {
				check("label", k, v)
			}
			for _, p := range s.Ports {
				check("port", p.Name, p.TargetPort.Str)
			}
		}
		for _, es := range l.Cluster.Slices {
			check("slice", es.Name, es.ServiceName, es.AddressType)
			for _, p := range es.Ports {
				check("slice port", p.Name)
			}
			for _, e := range es.Endpoints {
				check("endpoint", e.NodeName, e.Zone)
			}
		}
		for _, p := range l.Cluster.Pods {
			check("pod", p.Name, p.NodeName, p.Hostname)
		}
		if strs < 500 {
			t.Fatalf("only %d strings checked", strs)
		}
	}
}

// Read in pieces, a cluster loads exactly as yaml.v3 reads it whole: same objects,
// documents numbered the same, same problems in the same order; and the fast reader
// takes it.
func TestPiecesLoadAsWhole(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 200, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	// Bad documents here and there, and a comment and an empty document at the start.
	src := "# head\n---\n---\n" + strings.Replace(buf.String(), "port: 80\n", "port: 80000\n", 7) +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: \"HelloService\"}\nspec: {ports: [{port: 1}]}\n"
	for _, min := range []int{1000, 50000, len(src) / 3} {
		if n := len(readPieces(&Loader{}, "x.yaml", src, min).Cluster.Services); n != 201 {
			t.Fatalf("pieces of %d: %d services", min, n)
		}
		if !checkSameLoad(t, "x.yaml", src, Kubernetes, min) {
			t.Errorf("pieces of %d: the fast reader gave up", min)
		}
	}
	ref := reference("x.yaml", src, Kubernetes)
	if ref.Errors.Len() != 7 || ref.Warnings.Len() == 0 {
		t.Errorf("%d errors, %d warnings; want 7 and some", ref.Errors.Len(), ref.Warnings.Len())
	}
	// Where the fast reader gives up, near the end, yaml.v3 reads it all.
	anchor := src + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: &anchor v}\n"
	if checkSameLoad(t, "x.yaml", anchor, Kubernetes, 1000) {
		t.Errorf("the fast reader took an anchor")
	}
}

// A List's items, handed over one by one as the fast readers read them, load as
// yaml.v3's whole tree does; the items of an object that is no List are dropped.
func TestStreamedListsLoadAsWhole(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 100, Endpoints: 3, Format: gen.JSON}); err != nil {
		t.Fatal(err)
	}
	bad := `{"apiVersion": "v1", "kind": "List", "items": [7, {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "x"}, "spec": {"ports": [{"port": 0}]}}], "metadata": {}}`
	for name, src := range map[string]string{
		"generated JSON": buf.String(),
		"bad items":      bad,
		"YAML List":      "apiVersion: v1\nkind: ServiceList\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: \"HelloService\"}\n  spec: {ports: [{port: 1}]}\n- 3\n",
		"not a List":     "apiVersion: v1\nkind: Thing\nitems:\n- 3\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {ports: [{port: 0}]}\n",
		"kind after":     `{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 0}]}}], "kind": "Other"}`,
		"two documents":  "---\n" + bad + "\n---\n" + bad + "\n",
	} {
		if !checkSameLoad(t, name, src, Kubernetes, 100) {
			t.Errorf("%s: the fast readers gave up", name)
		}
	}
}
