// Package testkit turns manifests given to a test into what svcgen compiles them to,
// through the same pipeline the command runs (internal/pipeline), so that every
// package's tests set up their input one way. Only _test.go files import it: it
// fails tests, and has no place in svcgen's own import graph.
package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/model"
)

// Load decodes manifests given as text, as the file name would be read, and fails
// the test on any input error.
func Load(tb testing.TB, name, manifests string) *model.Cluster {
	tb.Helper()
	return &loader(tb, name, manifests).Cluster
}

func loader(tb testing.TB, name, manifests string) *load.Loader {
	tb.Helper()
	l := &load.Loader{}
	l.Text(name, manifests)
	if err := l.Err(); err != nil {
		tb.Fatalf("loading %s: %v", name, err)
	}
	return l
}

// Compile loads manifests given as text and resolves and compiles them for the
// settings' node and mode, as pipeline.Run does for files; the load's warnings are
// the result's. It fails the test on any error.
func Compile(tb testing.TB, name, manifests string, s pipeline.Settings) *pipeline.Result {
	tb.Helper()
	l := loader(tb, name, manifests)
	return compile(tb, &l.Cluster, l.Warnings.List(), s)
}

// CompileCluster resolves and compiles a loaded cluster, failing the test on any error.
func CompileCluster(tb testing.TB, c *model.Cluster, s pipeline.Settings) *pipeline.Result {
	tb.Helper()
	return compile(tb, c, nil, s)
}

func compile(tb testing.TB, c *model.Cluster, warnings []*model.Problem, s pipeline.Settings) *pipeline.Result {
	tb.Helper()
	res, err := pipeline.Compile(c, warnings, false, s)
	if err != nil {
		tb.Fatalf("compiling: %v", err)
	}
	return res
}

// CompileFiles reads manifest files and folders as svcgen compile -f does, and
// compiles them, failing the test on any error.
func CompileFiles(tb testing.TB, s pipeline.Settings, paths ...string) *pipeline.Result {
	tb.Helper()
	res, err := pipeline.Run(pipeline.Inputs{Files: paths}, s)
	if err != nil {
		tb.Fatalf("compiling %v: %v", paths, err)
	}
	return res
}

// CompareGolden compares got with the golden file at path byte for byte and shows a
// unified diff where they differ; with update (the package's -update flag) it writes
// got to the file instead. A rewritten golden file is read like code before it is
// committed.
func CompareGolden(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update writes it; read it before committing)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs (go test -update rewrites it):\n%s", path, diff.Diff("want", want, "got", got))
	}
}

// GenYAML is a generated cluster (svcgen gen) as manifests.
func GenYAML(tb testing.TB, o gen.Options) string {
	tb.Helper()
	var b strings.Builder
	if err := gen.Write(&b, o); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

// GenMap compiles a generated cluster of services Services with endpoints endpoints
// each, for iptables mode.
func GenMap(tb testing.TB, services, endpoints int, seed uint64) *ir.ServiceMap {
	tb.Helper()
	return Compile(tb, "gen.yaml", GenYAML(tb, gen.Options{Services: services, Endpoints: endpoints, Seed: seed}), pipeline.Settings{}).Map
}

// Without returns the map without every n-th service, and with one endpoint moved in
// every m-th one: a realistic next state.
func Without(sm *ir.ServiceMap, n, m int) *ir.ServiceMap {
	out := *sm
	out.Services = nil
	for i, s := range sm.Services {
		if i%n == 0 {
			continue
		}
		if i%m == 0 {
			c := *s
			c.Ports = nil
			for _, p := range s.Ports {
				pc := *p
				pc.Endpoints = append([]ir.Endpoint(nil), p.Endpoints...)
				if len(pc.Endpoints) > 0 {
					pc.Endpoints[0].Port++
				}
				c.Ports = append(c.Ports, &pc)
			}
			s = &c
		}
		out.Services = append(out.Services, s)
	}
	return &out
}

// HostNetworkNodePort is a NodePort Service (node port 30860, cluster IP 198.19.0.10)
// with two endpoints on node1 (198.18.1.1): a hostNetwork Pod, whose address is the
// node's own, and an ordinary Pod at 198.18.5.5. Every address is in 198.18.0.0/15.
const HostNetworkNodePort = `apiVersion: v1
kind: Node
metadata: {name: node1}
spec: {podCIDR: 198.18.5.0/24}
status: {addresses: [{type: InternalIP, address: 198.18.1.1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: exporter, namespace: mon, labels: {app: exporter}}
spec: {nodeName: node1, hostNetwork: true, containers: [{name: c, ports: [{name: metrics, containerPort: 9100}]}]}
status: {podIP: 198.18.1.1, phase: Running, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: proxy, namespace: mon, labels: {app: exporter}}
spec: {nodeName: node1, containers: [{name: c, ports: [{name: metrics, containerPort: 9100}]}]}
status: {podIP: 198.18.5.5, phase: Running, conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Service
metadata: {name: exporter, namespace: mon}
spec:
  type: NodePort
  clusterIP: 198.19.0.10
  selector: {app: exporter}
  ports: [{port: 9100, targetPort: metrics, nodePort: 30860}]
`
