package load

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/textutil"
)

// A kind near one svcgen reads is a typo: a warning that names the kind meant. Any
// other kind of the Kubernetes API, or a custom resource's, is passed over in
// silence.
func TestKindTypos(t *testing.T) {
	object := func(apiVersion, kind string) string {
		return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: x}\n", apiVersion, kind)
	}
	for _, tc := range []struct{ apiVersion, kind, want string }{
		{"v1", "Servcie", `unknown kind Servcie, passed over (did you mean Service?)`},
		{"v1", "service", `unknown kind service, passed over (did you mean Service?)`},
		{"discovery.k8s.io/v1", "EndpointSlices", `unknown kind EndpointSlices, passed over (did you mean EndpointSlice?)`},
		{"v1", "Endpoint", `unknown kind Endpoint, passed over (did you mean Endpoints?)`},
		{"v1", "pods", `unknown kind pods, passed over (did you mean Pod?)`},
		{"networking.k8s.io/v1", "ServiceCidr", `unknown kind ServiceCidr, passed over (did you mean ServiceCIDR?)`},
		{"v1", "Lsit", `unknown kind Lsit, passed over (did you mean List?)`},
		{"v1", "Serv ice", `unknown kind "Serv ice", passed over (did you mean Service?)`},
		{"v1", "ConfigMap", ""}, {"networking.k8s.io/v1", "Ingress", ""}, {"rbac.authorization.k8s.io/v1", "Role", ""},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", ""}, {"v1", "Namespace", ""}, {"v1", "Secret", ""},
		{"networking.istio.io/v1", "VirtualService", ""}, {"example.com/v1", "Frobnicator", ""},
	} {
		want := ""
		if tc.want != "" {
			want = fmt.Sprintf("x.yaml: document 1 (%s x): kind: %s", textutil.Quote(tc.kind), tc.want)
		}
		for _, strict := range []bool{false, true} {
			l := &Loader{Strict: strict}
			l.Text("x.yaml", object(tc.apiVersion, tc.kind))
			typos, other := problemLines(l.Warnings.List()), ""
			if err := l.Err(); err != nil {
				other = err.Error()
			}
			if strict {
				typos, other = other, typos
			}
			if typos != want || other != "" {
				t.Errorf("%s %s, strict %v: %q (and %q), want %q", tc.apiVersion, tc.kind, strict, typos, other, want)
			}
		}
	}
}

func problemLines[T any](ps []T) string {
	var lines []string
	for _, p := range ps {
		lines = append(lines, fmt.Sprint(p))
	}
	return strings.Join(lines, "\n")
}

// A field the API does not have, in an object or a part of it that svcgen reads, is
// a typo, reported with the name it likely meant, at any depth; a field the API has
// and svcgen does not read is not, nor anything inside it.
func TestFieldTypos(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"service", `apiVersion: v1
kind: Service
metadata:
  name: web
  lables: {app: web}
  annotations: {a: b}
  managedFields: [{manager: kubectl, whatever: 1}]
  creationTimestamp: null
spec:
  selecter: {app: web}
  ipFamilyPolicy: SingleStack
  loadBalancerClass: x
  ports:
  - port: 80
    targetPrt: 8080
  - {port: 81, protocl: UDP}
  sessionAffinityConfig: {clientIP: {timeoutSecond: 10}}
  frobnicate: true
status:
  conditions: [{type: x, anything: y}]
  loadBalancer: {ingress: [{ip: 1.2.3.4, ipmode: VIP, ports: [{port: 80, whatever: 1}]}]}
`, `x.yaml: document 1 (Service default/web): metadata.lables: unknown field, passed over (did you mean labels?)
x.yaml: document 1 (Service default/web): spec.selecter: unknown field, passed over (did you mean selector?)
x.yaml: document 1 (Service default/web): spec.ports[0].targetPrt: unknown field, passed over (did you mean targetPort?)
x.yaml: document 1 (Service default/web): spec.ports[1].protocl: unknown field, passed over (did you mean protocol?)
x.yaml: document 1 (Service default/web): spec.sessionAffinityConfig.clientIP.timeoutSecond: unknown field, passed over (did you mean timeoutSeconds?)
x.yaml: document 1 (Service default/web): spec.frobnicate: unknown field, passed over
x.yaml: document 1 (Service default/web): status.loadBalancer.ingress[0].ipmode: unknown field, passed over (did you mean ipMode?)`},
		{"slice in a List, JSON", `{"apiVersion": "v1", "kind": "List", "itmes": [], "items": [{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
 "metadata": {"name": "s", "labels": {"kubernetes.io/service-name": "web", "anything": "x"}}, "addressType": "IPv4",
 "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"redy": true}, "hints": {"forZones": [{"nme": "a"}]}, "targetRef": {"kind": "Pod", "x": 1}, "nodeNmae": "n"}],
 "port": [{"port": 80}]}]}`, `x.yaml: document 1 (EndpointSlice default/s): items[0].endpoints[0].conditions.redy: unknown field, passed over (did you mean ready?)
x.yaml: document 1 (EndpointSlice default/s): items[0].endpoints[0].hints.forZones[0].nme: unknown field, passed over (did you mean name?)
x.yaml: document 1 (EndpointSlice default/s): items[0].endpoints[0].nodeNmae: unknown field, passed over (did you mean nodeName?)
x.yaml: document 1 (EndpointSlice default/s): items[0].port: unknown field, passed over (did you mean ports?)
x.yaml: document 1 (List): itmes: unknown field, passed over (did you mean items?)`},
		{"pod, endpoints, node", `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeName: n
  tolerations: [{key: a}]
  initContainers: [{name: i, imge: x}]
  containers: [{name: c, image: x, ports: [{containerPrt: 80}], resources: {limits: {cpu: 1}}}]
status:
  podIPs: [{ip: 10.0.0.1, ipp: x}]
  conditions: [{type: Ready, status: "True", lastProbeTime: null}]
  containerStatuses: [{name: c, whatever: 1}]
  phaze: Running
---
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets: [{addresses: [{ip: 10.0.0.1, hostname: h, targetRef: {kind: Pod}}], notReadyAddresses: [{ip: 10.0.0.2, nodeNme: n}], ports: [{port: 80, appProtocol: http}]}]
---
apiVersion: v1
kind: Node
metadata: {name: n, uid: "1"}
spec: {podCIDR: 10.0.0.0/24, taints: [], unschedulable: true}
status: {addresses: [{type: InternalIP, address: 10.0.0.9, typ: x}], nodeInfo: {kubeletVersion: v1.34.0}, capacity: {cpu: "2"}}
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mdoe: ipvs
clientConnection: {kubeconfig: /x}
conntrack: {maxPerCore: 0}
ipvs: {scheduler: rr, strictArp: true}
---
apiVersion: svcgen/v1alpha1
kind: NodeEnvironment
metadata: {name: n}
ipFamilly: IPv6
interfaces: [{name: eth0, adresses: []}]
`, `x.yaml: document 1 (Pod default/p): spec.containers[0].ports[0].containerPrt: unknown field, passed over (did you mean containerPort?)
x.yaml: document 1 (Pod default/p): status.podIPs[0].ipp: unknown field, passed over (did you mean ip?)
x.yaml: document 1 (Pod default/p): status.phaze: unknown field, passed over (did you mean phase?)
x.yaml: document 2 (Endpoints default/web): subsets[0].notReadyAddresses[0].nodeNme: unknown field, passed over (did you mean nodeName?)
x.yaml: document 3 (Node n): status.addresses[0].typ: unknown field, passed over (did you mean type?)
x.yaml: document 4 (KubeProxyConfiguration): mdoe: unknown field, passed over (did you mean mode?)
x.yaml: document 4 (KubeProxyConfiguration): ipvs.strictArp: unknown field, passed over (did you mean strictARP?)
x.yaml: document 5 (NodeEnvironment n): ipFamilly: unknown field, passed over (did you mean ipFamily?)
x.yaml: document 5 (NodeEnvironment n): interfaces[0].adresses: unknown field, passed over (did you mean addresses?)`},
	} {
		l := &Loader{}
		l.Text("x.yaml", tc.src)
		if err := l.Err(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := problemLines(l.Warnings.List()); got != tc.want {
			t.Errorf("%s: warnings\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		strict := &Loader{Strict: true}
		strict.Text("x.yaml", tc.src)
		if got, want := fmt.Sprint(strict.Err()), sortedLines(tc.want); got != want || strict.Warnings.Len() > 0 {
			t.Errorf("%s, strict: errors\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}

// sortedLines is text with its lines in the order model.Problems.Sort gives
// problems of one file and document: by their text.
func sortedLines(text string) string {
	lines := strings.Split(text, "\n")
	sort.SliceStable(lines, func(i, j int) bool {
		di, dj := strings.SplitN(lines[i], " (", 2)[0], strings.SplitN(lines[j], " (", 2)[0]
		if di != dj {
			return di < dj
		}
		return lines[i] < lines[j]
	})
	return strings.Join(lines, "\n")
}

// nearest finds the name a slip of the keyboard meant, and no name where there was
// no slip.
func TestNearest(t *testing.T) {
	names := []string{"name", "namespace", "labels", "ports", "port", "protocol", "selector", "targetPort"}
	for s, want := range map[string]string{
		"nmae": "name", "Name": "name", "namspace": "namespace", "lables": "labels", "prots": "ports", "prt": "port",
		"selecter": "selector", "targetprot": "targetPort", "TargetPrt": "targetPort", "protocl": "protocol",
		"nam": "name", "x": "", "labelz": "labels", "names": "name", "vector": "", "protocolz": "protocol", "tagetPrto": "",
	} {
		if got := nearest(s, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", s, got, want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"ab", "ba", 1}, {"abc", "ca", 3}, {"kitten", "sitting", 3}, {"ünï", "üni", 1}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
