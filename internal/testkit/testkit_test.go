package testkit

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
)

const web = `apiVersion: v1
kind: Node
metadata: {name: node1}
status: {addresses: [{type: InternalIP, address: 192.168.0.2}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 172.30.0.10
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.1.0.5], nodeName: node1}
`

// Manifests given as text compile as the command compiles them, in the mode asked.
func TestCompile(t *testing.T) {
	for _, mode := range []compiler.Mode{compiler.IPTables, compiler.NFTables} {
		res := Compile(t, "web.yaml", web, pipeline.Settings{Mode: mode})
		if res.Mode != mode || len(res.Map.Services) != 1 || res.Map.Services[0].Name != "web" {
			t.Errorf("%s: compiled to mode %s, services %+v", mode, res.Mode, res.Map.Services)
		}
		if res.Resolved.Cluster == nil || res.Map.Node.IP.String() != "192.168.0.2" {
			t.Errorf("%s: resolved cluster %v, node %+v", mode, res.Resolved.Cluster, res.Map.Node)
		}
	}
}

// fatalTB records the first Fatalf and stops the helper there, as testing.T does,
// and records Errorf.
type fatalTB struct {
	testing.TB
	msg    string
	errors []string
}

type stopped struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (f *fatalTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{}
	func() {
		defer func() {
			if r := recover(); r != nil && r != (stopped{}) {
				panic(r)
			}
		}()
		fn(tb)
	}()
	return tb.msg
}

// Bad input fails the test with the loader's or compiler's error, naming the file.
func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(tb testing.TB)
		want string
	}{
		{"a bad document", func(tb testing.TB) {
			Compile(tb, "bad.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: Bad/Name}\n", pipeline.Settings{})
		}, "loading bad.yaml: bad.yaml: document 1"},
		{"two nodes, none named", func(tb testing.TB) {
			Compile(tb, "web.yaml", web+"---\napiVersion: v1\nkind: Node\nmetadata: {name: node2}\n", pipeline.Settings{})
		}, "compiling: "},
		{"a missing folder", func(tb testing.TB) { CompileFiles(tb, pipeline.Settings{}, "testdata/none") }, "compiling [testdata/none]: "},
	} {
		if got := fails(t, tc.fn); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: failed with %q, want it to start %q", tc.name, got, tc.want)
		}
	}
}

// A golden file is written under update, then compared: equal bytes pass, others
// fail with a diff, a missing file fails the test.
func TestCompareGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.txt")
	tb := &fatalTB{}
	CompareGolden(tb, path, []byte("a\nb\n"), true)
	CompareGolden(tb, path, []byte("a\nb\n"), false)
	if len(tb.errors) != 0 {
		t.Errorf("the file just written differs: %q", tb.errors)
	}
	CompareGolden(tb, path, []byte("a\nc\n"), false)
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "-b\n+c\n") {
		t.Errorf("a changed line: %q, want one error with the diff", tb.errors)
	}
	if got := fails(t, func(tb testing.TB) { CompareGolden(tb, path+".none", nil, false) }); !strings.Contains(got, "go test -update writes it") {
		t.Errorf("a missing golden file: %q", got)
	}
}
