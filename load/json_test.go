package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/load/internal/tree/treetest"
)

// jsonSnippets are JSON values the JSON reader must take, and text starting like
// JSON that it must leave to the YAML readers.
var jsonSnippets = []struct {
	src  string
	json bool
}{
	{`{}`, true}, {`[]`, true}, {` { } `, true}, {"\n\t{\r\n}\n", true}, {`[1, -2, 2.5, -0, 1e3, 1E-2, 0.0]`, true},
	{`{"a": true, "b": false, "c": null, "d": "", "e": [], "f": {}}`, true},
	{`{"a": "q\"\\\b\f\n\r\t\u00e9\u2028 x"}`, true}, {`{"a": "\/"}`, true}, {`{"\ud83d\ude00": "\uD83D\uDE00"}`, true}, {`{"é": "ü"}`, true}, {`{"a": 1, "a": 2}`, false},
	{`{"a": [1, [2, {"b": 3}], {"c": [4]}]}`, true}, {`[[[[[[[[[[1]]]]]]]]]]`, true},
	{`{"port": 12345678901234567890}`, true}, {`{"a": "10.0.0.1", "b": "1.5", "c": "true"}`, true},
	{`{"apiVersion": "v1", "kind": "List", "items": [{"a": 1}, 2, "x", null]}`, true},
	{`{"items": 3, "kind": "List"}`, true}, {`{"x": {"items": [1]}, "items": [[1], {}]}`, true},
	{`{a: 1}`, false}, {`{"a": 1,}`, false}, {`[1, 2,]`, false}, {`{"a": 1} # c`, false}, {`{"a": 1}` + "\n---\n{}", false},
	{`{"a": 1} {"b": 2}`, false}, {`{"a": 'x'}`, false}, {`{"a": 01}`, false}, {`{"a": .5}`, false}, {`{"a": +1}`, false},
	{`{"a": "x` + "\t" + `"}`, false}, {`{"a": "\x"}`, false}, {`{"a" 1}`, false}, {`{"a": }`, false}, {`[`, false},
	{`{"a": "b"` + "\xff" + `}`, false}, {`{"a": "` + "\xff" + `"}`, false}, {`{"a": NaN}`, false}, {`{"a": True}`, false},
	{strings.Repeat("[", tree.MaxDepth+1) + strings.Repeat("]", tree.MaxDepth+1), false},
}

func TestJSONReaderMatchesYAML(t *testing.T) {
	for _, s := range jsonSnippets {
		if !looksJSON(s.src) {
			t.Errorf("%q does not look like JSON", s.src)
		}
		if got := checkJSON(t, fmt.Sprintf("%q", s.src), []byte(s.src)); got != s.json {
			t.Errorf("%q: the JSON reader took it: %v, want %v", s.src, got, s.json)
		}
	}
	for _, s := range []string{"", " ", "a: {}", "- [1]", "--- {}", "# {\n{}"} {
		if looksJSON(s) {
			t.Errorf("%q looks like JSON", s)
		}
	}
}

// Every JSON manifest of the repository and the generated List are read by the JSON
// reader, into yaml.v3's trees.
func TestJSONReaderTakesManifests(t *testing.T) {
	inputs := map[string][]byte{}
	archives, _ := filepath.Glob("../cmd/svcgen/testdata/*.txtar")
	for _, a := range archives {
		ar, err := txtar.ParseFile(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".json") {
				inputs[a+":"+f.Name] = f.Data
			}
		}
	}
	if len(inputs) == 0 {
		t.Fatal("no JSON manifests found")
	}
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 120, Endpoints: 4, Format: gen.JSON}); err != nil {
		t.Fatal(err)
	}
	inputs["generated"] = buf.Bytes()
	for name, data := range inputs {
		if !checkJSON(t, name, data) {
			t.Errorf("%s: the JSON reader gave up", name)
		}
	}
}

// Text that starts like JSON but is YAML, or is neither, loads as it did before the
// JSON reader: through the YAML readers, which word the syntax errors.
func TestJSONFallsBackToYAML(t *testing.T) {
	svc := `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}`
	for _, tc := range []struct{ name, src, err string }{
		{"flow YAML", `{apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}]}}`, ""},
		{"comment", svc + " # a comment\n", ""},
		{"two documents", svc + "\n---\n" + strings.Replace(svc, `"a"`, `"b"`, 1) + "\n", ""},
		{"syntax", "{\n  \"kind\": \"Service\",\n  \"spec\": [\n}\n", "x.json: document 1: YAML syntax error: line 3: did not find expected node content"},
		{"bad port in flow YAML", strings.Replace(svc, "80", "80000", 1) + " # c", "x.json: document 1 (Service default/a): spec.ports[0].port: 80000 is out of range (1-65535)"},
	} {
		l := &Loader{}
		l.Text("x.json", tc.src)
		if got := fmt.Sprint(l.Errors.Err()); tc.err != "" && got != tc.err || tc.err == "" && l.Errors.Len() > 0 {
			t.Errorf("%s: errors %s, want %q", tc.name, got, tc.err)
		}
		if want := 1 + strings.Count(tc.name, "two"); tc.err == "" && len(l.Cluster.Services) != want {
			t.Errorf("%s: %d services, want %d", tc.name, len(l.Cluster.Services), want)
		}
	}
}

// A List read by the JSON reader, its items handed over one by one, loads as
// yaml.v3's whole tree does, errors and their item numbers included.
func TestJSONListLoadsAsYAML(t *testing.T) {
	var buf strings.Builder
	if err := gen.Write(&buf, gen.Options{Services: 150, Endpoints: 3, Format: gen.JSON}); err != nil {
		t.Fatal(err)
	}
	generated := strings.Replace(buf.String(), `"port": 80,`, `"port": 0,`, 3)
	for name, src := range map[string]string{
		"generated": generated,
		"not a List": `{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, ` +
			`"spec": {"ports": [{"port": 0}]}}], "kind": "Other"}`,
		"kind last": `{"apiVersion": "v1", "items": [7, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, ` +
			`"spec": {"ports": [{"port": 0}]}}], "kind": "ServiceList"}`,
	} {
		js, slow := jsonOnly(name, src, Kubernetes), reference(name, src, Kubernetes)
		if js == nil {
			t.Errorf("%s: the JSON reader gave up", name)
			continue
		}
		if !reflect.DeepEqual(js.Cluster, slow.Cluster) {
			t.Errorf("%s: the objects differ", name)
		}
		if fmt.Sprint(js.Errors.Err()) != fmt.Sprint(slow.Errors.Err()) || !reflect.DeepEqual(js.Warnings, slow.Warnings) {
			t.Errorf("%s: problems\n%v %v\nwant\n%v %v", name, js.Errors.Err(), js.Warnings.List(), slow.Errors.Err(), slow.Warnings.List())
		}
		if name != "not a List" && slow.Errors.Len() == 0 {
			t.Errorf("%s: no errors to compare", name)
		}
	}
}

// checkJSON fails when the JSON reader takes what is not JSON, or builds another tree
// than yaml.v3 where yaml.v3 reads JSON as JSON (see json.go). It reports whether the
// JSON reader took data.
func checkJSON(t *testing.T, name string, data []byte) bool {
	t.Helper()
	trees, ok := treetest.Collect(func(src string, doc func(int, *tree.Node)) bool {
		return readJSON(strings.NewReader(src), doc, nil)
	}, data)
	if !ok {
		return false
	}
	if !json.Valid(data) || len(trees) != 1 {
		t.Errorf("%s: the JSON reader took %q", name, data)
		return true
	}
	slow, err := treetest.Reference(data)
	if err != nil || bytes.Contains(bytes.ToLower(data), []byte(`\ud`)) {
		return true // yaml.v3 refuses JSON's \/ and long keys, and splits surrogate pairs
	}
	if !reflect.DeepEqual(trees, slow) {
		t.Errorf("%s: trees differ\ninput:\n%s\njson: %s\nyaml.v3: %s", name, data, treetest.Dump(trees), treetest.Dump(slow))
	}
	return true
}

func FuzzJSONReader(f *testing.F) {
	for _, s := range jsonSnippets {
		f.Add([]byte(s.src))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkJSON(t, "fuzz", data) })
}

// A file is read as a stream, as JSON or YAML; one that is YAML after all, or that
// the fast reader gives up on, is read again. Either way it loads as its text does.
func TestFiles(t *testing.T) {
	var buf, yml strings.Builder
	if err := gen.Write(&buf, gen.Options{Services: 40, Endpoints: 3, Format: gen.JSON}); err != nil {
		t.Fatal(err)
	}
	if err := gen.Write(&yml, gen.Options{Services: 40, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"list.json": strings.Replace(buf.String(), `"port": 80,`, `"port": 0,`, 1),
		"flow.json": "  " + `{apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}]}}` + "\n",
		"bad.json":  "{\n  \"kind\": \"Service\",\n  \"spec\": [\n}\n",
		"gen.yaml":  yml.String(),
		"anchor.yaml": strings.Replace(yml.String(), "port: 80\n", "port: &p 80\n", 1) + "---\napiVersion: v1\nkind: Service\n" +
			"metadata: {name: b}\nspec: {ports: [{port: *p}]}\n",
		"nul.yaml": yml.String() + "---\na: \x00\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		file, text := &Loader{}, &Loader{}
		file.Path(path, nil)
		text.Text(path, src)
		if !reflect.DeepEqual(file.Cluster, text.Cluster) || len(file.Cluster.Services) == 0 && file.Err() == nil ||
			name == "anchor.yaml" && len(file.Cluster.Services) != 41 {
			t.Errorf("%s: the objects differ, or there are none", name)
		}
		if got, want := fmt.Sprint(file.Err()), fmt.Sprint(text.Err()); got != want {
			t.Errorf("%s: errors\n%s\nwant\n%s", name, got, want)
		}
	}
}
