package load

import (
	"fmt"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/load/internal/tree"
)

// An alias inside the value it names would never end: it crashed svcgen (the stack
// grew to 1 GB). It is reported at the alias, and the rest is read.
func TestAliasCycles(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a: &x [*x]\n", `x.yaml: document 1: a[0]: alias *x is inside the value it names: it would never end`},
		{"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: &s\n  ports: [{port: 80}]\n  selector: {app: *s}\n",
			"x.yaml: document 1: spec.selector.app: alias *s is inside the value it names: it would never end"},
		{okService + "---\nb: &y {c: [{d: *y}], e: *y}\n", `x.yaml: document 2: b.c[0].d: alias *y is inside the value it names: it would never end`},
	} {
		checkErrors(t, tc.src, tc.want)
	}
}

// Aliases that stand for far more than the document holds, a few lines for 10^9
// values, stop at MaxAliasValues: here a List of Lists that the walker would have
// decoded a billion Services from.
func TestAliasBombs(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- &l0 {apiVersion: v1, kind: Service, metadata: {name: s}, spec: {ports: [{port: 80}]}}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "- &l%d {apiVersion: v1, kind: List, items: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	l := &Loader{}
	l.Text("x.yaml", b.String())
	if got, want := fmt.Sprint(l.Err()), "x.yaml: document 1: items[4].items[4]: aliases add more than 100000 values to the document (here *l3)"; got != want {
		t.Errorf("errors\n%s\nwant\n%s", got, want)
	}
	if n := len(l.Cluster.Services); n > 0 {
		t.Errorf("%d services from a document that cannot be read", n)
	}
	l = &Loader{}
	l.Text("x.yaml", billionLaughs(9))
	if got, want := fmt.Sprint(l.Err()), "x.yaml: document 1: data.l5[7]: aliases add more than 100000 values to the document (here *l4)"; got != want {
		t.Errorf("errors\n%s\nwant\n%s", got, want)
	}
	// Anchors that share a few values are no bomb.
	l = &Loader{}
	l.Text("x.yaml", billionLaughs(4))
	if err := l.Err(); err != nil {
		t.Error(err)
	}
}

// Values may nest 1000 levels deep, as no manifest does.
func TestNestingDepth(t *testing.T) {
	nest := func(levels int) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata:\n  a: " +
			strings.Repeat("[", levels-2) + strings.Repeat("]", levels-2) + "\n"
	}
	for levels, want := range map[int]string{
		tree.MaxNesting:     "<nil>",
		tree.MaxNesting + 1: "x.yaml: document 1: data: values nest deeper than 1000 levels",
		5000:                "x.yaml: document 1: data: values nest deeper than 1000 levels",
	} {
		l := &Loader{}
		l.Text("x.yaml", nest(levels))
		if got := fmt.Sprint(l.Err()); got != want {
			t.Errorf("%d levels: %s, want %s", levels, got, want)
		}
	}
}

// A mapping that repeats a key is an error, as kubectl has it, at the key, whichever
// reader meets it: the fast readers give up on it and yaml.v3's reports it.
func TestDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n    port: 81\n",
			`x.yaml: document 1: spec.ports[0].port: duplicate key (kubectl refuses a mapping that repeats a key)`},
		{`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a", "labels": {"a b": "1", "a b": "2"}}, "spec": {"ports": [{"port": 80}]}}]}`,
			`x.yaml: document 1: items[0].metadata.labels."a b": duplicate key (kubectl refuses a mapping that repeats a key)`},
		{okService + "---\n" + okService + "kind: Service\n1: a\n\"1\": b\n",
			"x.yaml: document 2: 1: duplicate key (kubectl refuses a mapping that repeats a key)\n" +
				"x.yaml: document 2: kind: duplicate key (kubectl refuses a mapping that repeats a key)"},
	} {
		checkErrors(t, tc.src, tc.want)
	}
}

// Merge keys merge, as kubectl reads them: the mapping's own keys first, then those
// of the mappings named that it does not have (the first wins).
func TestMergeKeys(t *testing.T) {
	src := `apiVersion: v1
kind: Service
metadata:
  name: web
  labels: &labels {app: web, tier: front}
spec:
  selector: {<<: *labels, tier: back}
  ports:
  - &http {name: http, port: 80, protocol: TCP}
  - {<<: [{name: alt, port: 8080}, *http], appProtocol: http}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, labels: {<<: 3}}
`
	for _, r := range []Reader{Fast, Reference} {
		l := &Loader{Reader: r}
		l.Text("x.yaml", src)
		if got, want := fmt.Sprint(l.Err()), "x.yaml: document 2: metadata.labels.<<: a merge key takes a mapping, or a list of them; got the number 3"; got != want {
			t.Errorf("reader %q: %s, want %s", r, got, want)
		}
		if l.Warnings.Len() > 0 || len(l.Cluster.Services) != 1 {
			t.Fatalf("reader %q: %v, %d services", r, l.Warnings.List(), len(l.Cluster.Services))
		}
		s := l.Cluster.Services[0]
		if got := fmt.Sprintf("%v %s %s %d %s %s", s.Selector, s.Ports[0].Name, s.Ports[1].Name, s.Ports[1].Port, s.Ports[1].Protocol, s.Ports[1].AppProtocol); got != "map[app:web tier:back] http alt 8080 TCP http" {
			t.Errorf("reader %q: %s", r, got)
		}
	}
}

// checkErrors fails unless src, read as x.yaml with the fast readers and with
// yaml.v3 alone, has exactly the errors want.
func checkErrors(t *testing.T, src, want string) {
	t.Helper()
	for _, r := range []Reader{Fast, Reference} {
		l := &Loader{Reader: r}
		l.Text("x.yaml", src)
		if got := fmt.Sprint(l.Err()); got != want {
			t.Errorf("reader %q, %q:\n%s\nwant\n%s", r, src, got, want)
		}
	}
}
