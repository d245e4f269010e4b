package compiler_test

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/model"
)

func deployment(name, replicas, spec string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: ns}\nspec:\n  replicas: " + replicas +
		"\n  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n    spec:\n" + spec
}

const webPorts = "      containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]\n"

func resolveWith(t *testing.T, c *model.Cluster, opts compiler.ResolveOptions) *compiler.Resolved {
	t.Helper()
	r, err := compiler.Resolve(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func podsByName(r *compiler.Resolved) map[string]*model.Pod {
	out := map[string]*model.Pod{}
	for _, p := range r.Cluster.Pods {
		out[p.Name] = p
	}
	return out
}

func TestWorkloadPods(t *testing.T) {
	c := cluster(t,
		deployment("web", "4", webPorts),
		deployment("pay", "2", "      nodeSelector: {topology.kubernetes.io/zone: zone-b}\n"+webPorts),
		`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: ns}
spec:
  serviceName: db
  replicas: 2
  ordinals: {start: 3}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c}]}`,
		`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ns}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {hostNetwork: true, containers: [{name: c}]}`,
		`apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-abc, namespace: ns, ownerReferences: [{kind: Deployment, name: web, controller: true, apiVersion: apps/v1, uid: x}]}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c}]}`,
	)
	r := resolveWith(t, c, compiler.ResolveOptions{Nodes: 3})
	if got := len(r.Cluster.Nodes); got != 3 {
		t.Fatalf("%d Nodes made, want 3", got)
	}
	if r.Made["Deployment"] != 6 || r.Made["StatefulSet"] != 2 || r.Made["DaemonSet"] != 3 || r.Made["ReplicaSet"] != 0 {
		t.Errorf("made = %v; want 6 of Deployments, 2 of the StatefulSet, 3 of the DaemonSet, none of the ReplicaSet (its Deployment's)", r.Made)
	}
	pods := podsByName(r)
	for _, name := range []string{"db-3", "db-4"} {
		if p := pods[name]; p == nil || p.Labels[model.LabelStatefulSetPodName] != name || p.Hostname != name {
			t.Errorf("StatefulSet Pod %s = %+v", name, p)
		}
	}
	web := regexp.MustCompile(`^web-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	perNode := map[string]int{}
	for _, p := range r.Cluster.Pods {
		if !p.Ready || len(p.PodIPs) != 1 {
			t.Errorf("Pod %s: ready %v, addresses %v", p.Name, p.Ready, p.PodIPs)
		}
		switch p.Labels["app"] {
		case "web":
			if !web.MatchString(p.Name) || p.Labels[model.LabelPodTemplateHash] == "" {
				t.Errorf("Deployment Pod name %q (labels %v)", p.Name, p.Labels)
			}
			perNode[p.NodeName]++
			n := map[string]netip.Prefix{"node-1": netip.MustParsePrefix("10.244.0.0/24"), "node-2": netip.MustParsePrefix("10.244.1.0/24"), "node-3": netip.MustParsePrefix("10.244.2.0/24")}[p.NodeName]
			if !n.Contains(p.PodIPs[0]) || p.PodIPs[0] == n.Addr().Next() {
				t.Errorf("Pod %s on %s has %s, not an address of the Node's pod CIDR %s", p.Name, p.NodeName, p.PodIPs[0], n)
			}
		case "pay":
			if p.NodeName != "node-2" {
				t.Errorf("Pod %s on %s; its nodeSelector wants zone-b, node-2", p.Name, p.NodeName)
			}
		case "agent":
			if want := map[string]string{"node-1": "172.18.0.2", "node-2": "172.18.0.3", "node-3": "172.18.0.4"}[p.NodeName]; p.PodIPs[0].String() != want {
				t.Errorf("hostNetwork Pod %s on %s has %s, want the Node's %s", p.Name, p.NodeName, p.PodIPs[0], want)
			}
		}
	}
	if perNode["node-1"] != 2 || perNode["node-2"] != 1 || perNode["node-3"] != 1 {
		t.Errorf("4 replicas spread as %v; want 2, 1, 1 in name order", perNode)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0].Error(), "spec.serviceName: no headless Service ns/db") {
		t.Errorf("warnings = %v; want the StatefulSet's serviceName", r.Warnings)
	}
}

// The Pods of a workload in the input (a kubectl get pods dump) are its Pods.
func TestInputPodsWin(t *testing.T) {
	c := cluster(t, deployment("web", "3", webPorts), `apiVersion: v1
kind: Pod
metadata: {name: web-5d8f7-abcde, namespace: ns, labels: {app: web}, ownerReferences: [{kind: ReplicaSet, name: web-5d8f7, controller: true, apiVersion: apps/v1, uid: x}]}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.0.0.9, conditions: [{type: Ready, status: "True"}]}`)
	r := resolveWith(t, c, compiler.ResolveOptions{})
	if len(r.Cluster.Pods) != 1 || r.Made["Deployment"] != 0 {
		t.Errorf("pods = %d, made = %v; want the input's one Pod only", len(r.Cluster.Pods), r.Made)
	}
}

func TestWorkloadErrors(t *testing.T) {
	resolveErrWith := func(c *model.Cluster, opts compiler.ResolveOptions, want string) {
		t.Helper()
		_, err := compiler.Resolve(c, opts)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v; want it to contain %q", err, want)
		}
	}
	resolveErrWith(cluster(t, deployment("web", "3", webPorts)), compiler.ResolveOptions{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/30")}},
		`in.yaml: document 1 (Deployment ns/web): spec.replicas: pod CIDR 10.9.0.0/30 of the node has no free address left for Pod ns/web-`)
	resolveErrWith(cluster(t, deployment("web", "3", webPorts)), compiler.ResolveOptions{Nodes: 2, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}},
		`in.yaml: document 1 (Deployment ns/web): spec.replicas: Node node-2 has no pod CIDR for Pod ns/web-`)
}

// --lock keeps the addresses of the Pods made, even when another Pod comes first.
func TestLockKeepsPodIPs(t *testing.T) {
	first := resolveWith(t, cluster(t, deployment("web", "2", webPorts)), compiler.ResolveOptions{})
	lock, err := compiler.ParseLock("svcgen.lock", first.Lock.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if len(lock.Pods) != 2 {
		t.Fatalf("lock pods = %v", lock.Pods)
	}
	// Other Pods whose hashes could take the same addresses: with the lock, web's
	// Pods keep theirs.
	var docs []string
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		docs = append(docs, deployment(n, "40", webPorts))
	}
	docs = append(docs, deployment("web", "2", webPorts))
	again := resolveWith(t, cluster(t, docs...), compiler.ResolveOptions{Lock: lock})
	was, now := podsByName(first), podsByName(again)
	for name, p := range was {
		if now[name] == nil || now[name].PodIPs[0] != p.PodIPs[0] {
			t.Errorf("Pod %s had %v, now %v", name, p.PodIPs, now[name])
		}
	}
}

func TestExplainReasons(t *testing.T) {
	c := cluster(t,
		nodeYAML("node1", "z1"), nodeYAML("node2", "z2"),
		svc("web", "  internalTrafficPolicy: Local\n  selector: {app: web}\n  ports: [{name: http, port: 80, targetPort: http}]"),
		pod("web-ready", "app: web", "node2", "True", "http"),
		pod("web-unready", "app: web", "node1", "False", "http"),
		pod("web-noport", "app: web", "node1", "True", "grpc"),
		pod("other", "app: cart", "node1", "True", "http"),
	)
	r := resolveWith(t, c, compiler.ResolveOptions{})
	sm, err := compiler.Compile(r.Cluster, compiler.Options{Node: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	_, ports, err := compiler.Explain(r.Cluster, sm, "ns/web", "http")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"other":       "not selected: label app=cart (the selector wants app=web)",
		"web-noport":  `no TCP container port named "http"`,
		"web-ready":   "other node under a Local policy: on node2, and internalTrafficPolicy Local sends node1's traffic only to its own endpoints",
		"web-unready": "not Ready",
	}
	if len(ports) != 1 || len(ports[0].Verdicts) != len(want) {
		t.Fatalf("ports = %+v", ports)
	}
	for _, v := range ports[0].Verdicts {
		if v.Why != want[v.Pod.Name] || v.Endpoint != "" {
			t.Errorf("%s: endpoint %q, why %q; want %q", v.Pod.Name, v.Endpoint, v.Why, want[v.Pod.Name])
		}
	}
}

func nodeYAML(name, zone string) string {
	return "apiVersion: v1\nkind: Node\nmetadata: {name: " + name + ", labels: {topology.kubernetes.io/zone: " + zone + "}}\n"
}

func pod(name, labels, node, ready, port string) string {
	ip := map[string]string{"web-ready": "10.0.0.1", "web-unready": "10.0.0.2", "web-noport": "10.0.0.3", "other": "10.0.0.4"}[name]
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: ns, labels: {" + labels + "}}\n" +
		"spec: {nodeName: " + node + ", containers: [{name: c, ports: [{name: " + port + ", containerPort: 8080}]}]}\n" +
		"status: {podIP: " + ip + ", conditions: [{type: Ready, status: \"" + ready + "\"}]}"
}
