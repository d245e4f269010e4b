package load

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/load/internal/tree/treetest"
)

var update = flag.Bool("update", false, "rewrite testdata/problems.golden")

// filler is the first item of the Lists the problem cases are put in, so that the
// case is item 1 (not 0) and a List's own paths show.
const filler = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "filler"}}`

// Every error and warning the walker reports, for every field path it can build,
// stays as it is: testdata/problems.txtar holds the bad manifests, problems.golden
// what is reported for each as written, as item 1 of a kind: List and as item 1 of a
// List that is item 0 of a List. The same manifests in JSON (the JSON reader, and for
// the outer List its items handed over one by one) must report the same, byte for byte.
func TestProblemPaths(t *testing.T) {
	ar, err := txtar.ParseFile(filepath.Join("testdata", "problems.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, f := range ar.Files {
		d := Kubernetes
		if strings.HasPrefix(f.Name, "minik8s-") {
			d = MiniK8s
		}
		trees, err := treetest.Reference(f.Data)
		if err != nil || len(trees) != 1 {
			t.Fatalf("%s: %d documents, %v", f.Name, len(trees), err)
		}
		doc := toJSON(&trees[0])
		for _, v := range []struct{ name, yaml, json string }{
			{"", string(f.Data), doc},
			{"in a List", "apiVersion: v1\nkind: List\nitems:\n- " + filler + "\n" + indentItem(string(f.Data)),
				`{"apiVersion": "v1", "kind": "List", "items": [` + filler + ", " + doc + "]}"},
			{"in a List in a List", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - " + filler + "\n" +
				indent(indentItem(string(f.Data)), "  "),
				`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": [` + filler + ", " + doc + "]}]}"},
		} {
			got.WriteString("# " + strings.TrimSpace(f.Name+" "+v.name) + "\n")
			want := problemText(loadString(t, f.Name, v.yaml, d))
			got.WriteString(want)
			if jsonOnly(f.Name, v.json, d) == nil {
				t.Errorf("%s %s: the JSON reader gave up on\n%s", f.Name, v.name, v.json)
			}
			if js := problemText(loadString(t, f.Name, v.json, d)); js != want {
				t.Errorf("%s %s: from JSON\n%s\nfrom YAML\n%s", f.Name, v.name, js, want)
			}
		}
	}
	golden := filepath.Join("testdata", "problems.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("problems differ from %s (go test ./load -run ProblemPaths -update rewrites it):\n%s",
			golden, diff.Diff("want", want, "got", []byte(got.String())))
	}
}

// problemText lists a Loader's errors and warnings, one a line.
func problemText(l *Loader) string {
	var b strings.Builder
	for _, err := range l.InputErrors {
		b.WriteString("error: " + err.Error() + "\n")
	}
	for _, p := range l.Errors.List() {
		b.WriteString("error: " + p.Error() + "\n")
	}
	for _, p := range l.Warnings.List() {
		b.WriteString("warning: " + p.Error() + "\n")
	}
	return b.String()
}

// indentItem makes a document an item of a block list: "- " before its first line,
// two spaces before the others.
func indentItem(doc string) string {
	return "- " + strings.TrimSuffix(strings.ReplaceAll(doc, "\n", "\n  "), "  ")
}

func indent(text, by string) string {
	return by + strings.TrimSuffix(strings.ReplaceAll(text, "\n", "\n"+by), by)
}

// toJSON writes a tree as JSON, keys in their order, scalars as their tags say.
func toJSON(n *tree.Node) string {
	var b strings.Builder
	var write func(n *tree.Node)
	write = func(n *tree.Node) {
		switch n.Kind {
		case tree.Mapping, tree.Sequence:
			open, end := "[", "]"
			if n.Kind == tree.Mapping {
				open, end = "{", "}"
			}
			b.WriteString(open)
			for i := range n.Content {
				if i > 0 {
					b.WriteString(map[bool]string{true: ": ", false: ", "}[n.Kind == tree.Mapping && i%2 == 1])
				}
				write(&n.Content[i])
			}
			b.WriteString(end)
		case tree.Scalar:
			switch n.Tag {
			case tree.Int, tree.Float:
				b.WriteString(n.Value)
			case tree.Bool:
				v, _ := strconv.ParseBool(n.Value)
				b.WriteString(strconv.FormatBool(v))
			case tree.Null:
				b.WriteString("null")
			default:
				q, _ := json.Marshal(n.Value)
				b.Write(q)
			}
		default:
			b.WriteString("null")
		}
	}
	write(n)
	return b.String()
}
