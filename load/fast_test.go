package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/svcgen/svcgen/gen"
	"go.yaml.in/yaml/v3"
)

// slowTrees reads every document with yaml.v3, the reference.
func slowTrees(data []byte) ([]node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, fromYAML(&n))
	}
}

func fastTrees(data []byte) ([]node, bool) { return readTrees(readFast, data) }

func readTrees(read reader, data []byte) ([]node, bool) {
	var out []node
	ok := read(string(data), func(doc int, n *node) {
		if doc != len(out)+1 {
			panic(fmt.Sprintf("document %d after %d", doc, len(out)))
		}
		out = append(out, *n)
	}, nil)
	return out, ok
}

// checkSame fails when the fast reader accepts data but builds other trees than
// yaml.v3 (or yaml.v3 rejects data). It reports whether the fast reader accepted it.
func checkSame(t *testing.T, name string, data []byte) bool {
	t.Helper()
	return checkSameAs(t, name, data, readFast)
}

func checkSameAs(t *testing.T, name string, data []byte, read reader) bool {
	t.Helper()
	fast, ok := readTrees(read, data)
	if !ok {
		return false
	}
	slow, err := slowTrees(data)
	if err != nil {
		t.Errorf("%s: the fast reader accepts what yaml.v3 rejects (%v):\n%s", name, err, data)
		return true
	}
	// yaml.v3 gives an empty document node where the fast reader gives a null scalar;
	// both are null to the walker.
	for i := range slow {
		if slow[i].kind == noNode && i < len(fast) && isNull(&fast[i]) {
			slow[i] = fast[i]
		}
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s: trees differ\ninput:\n%s\nfast: %s\nslow: %s", name, data, dumpTrees(fast), dumpTrees(slow))
	}
	return true
}

func dumpTrees(ns []node) string {
	var b strings.Builder
	for _, n := range ns {
		dumpNode(&b, &n)
		b.WriteString(" | ")
	}
	return b.String()
}

func dumpNode(b *strings.Builder, n *node) {
	switch n.kind {
	case scalarNode:
		fmt.Fprintf(b, "%d:%q", n.tag, n.value)
	case mappingNode, sequenceNode:
		b.WriteString("{["[n.kind-mappingNode : n.kind-mappingNode+1])
		for i := range n.content {
			dumpNode(b, &n.content[i])
			b.WriteByte(' ')
		}
		b.WriteString("}]"[n.kind-mappingNode : n.kind-mappingNode+1])
	default:
		b.WriteString("<none>")
	}
}

// snippets cover what the fast reader handles and the edges where it must give up.
var snippets = []string{
	"", "# only a comment\n", "---\n", "---\n---\n", "a: 1\n---\n", "# c\n---\na: 1\n",
	"a: 1\n---\n# c\n---\nb: 1\n", "a: 1\n--- # x\nb: 2\n", "a: 1\n---   \nb: 2",
	"a: 1\n...\n", "%YAML 1.2\n---\na: 1\n", "--- {a: 1}\n",
	"kind: Service\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  ports:\n  - port: 80\n    name: http\n  - {port: 81, name: x}\n",
	"items:\n- a\n- b: 1\n  c: 2\n-   d: 3\n    e: [1, 2]\n-\n  f: 4\n- \n", "- - a\n", "a:\n  - x\n  - y\nb: 1\n",
	"a: b # c\nd: 'it''s' # e\nf: \"q\\\"\\\\\\/\\n\\u00e9\"\n", "a: \"\\x41\"\n", "a: \"\\ud83d\"\n",
	"a: x:y\nb: -1\nc: 08\nd: 0x10\ne: 1_000\nf: 2001-12-14\ng: .5\nh: +1\ni: ~\nj: null\nk: Null\nl: yes\nm: 1e3\nn: 0\no: 007\np: 12345678901234567890\n",
	"a:\nb:\n  c:\nd: \"\"\ne: ''\n", "a: b: c\n", "a: b\n  c\n", "a:\n  b\n  c\n", "a: [1,]\n", "a: [,]\n", "a: {b: }\n",
	"{a:1}", "{\"a\":1}", "{\"a\": [1, 2.5, true, null, \"x\"], \"b\": {}}\n", "[]\n", "{}\n",
	"{\n  \"kind\": \"List\",\n  \"items\": [\n    {\"a\": 1},\n    {\"b\": \"c\"}\n  ]\n}\n",
	"a: {b: 1,\n  c: 2}\n", "a: {b: 1,\nc: 2}\n", "a: [x\n  , y]\n", "a: [x\n  y]\n", "a: [x # c\n  , y]\n",
	"a: |\n  line 1\n  line 2\nb: 1\n", "a: |-\n  x\n\n  y\n\nb: 1\n", "a: |+\n  x\n\n\nb: 1\n", "a: |\n  x\n", "a: |\n  x",
	"a: |\n\n  x\n", "a: |\n  x\n    y\n  # not a comment\nb: 2\n", "a: |2\n   x\n", "a: >\n  x\n  y\n", "- |\n  x\n- y\n",
	"a: &x 1\nb: *x\n", "a: !!str 1\n", "? a\n: b\n", "a:\tb\n", "a: b\r\nc: d\r\n", "\ta: b\n",
	"just a string\n", "just\n  more\n", "\"quoted\"\n", "- 1\n- 2\n", "a:\n- 1\nb:\n- 2\n", "a:\n  - 1\n  b: 2\n",
	"a: 1\n  b: 2\n", "a: 1\nb: 2\n a: 3\n", "  a: 1\n  b: 2\n", "a: 1\na: 2\n", "'a': 1\n\"b\": 2\n", "a : 1\n",
	"a: \"x\ny\"\n", "a: 'x\n  y'\n", "a: b#c\n", "a: \"b\"#c\n", "a: [b]#c\n", "- a\n b\n", "a: -\n", "a: - b\n",
	"a: [a: b]\n", "a: {b, c}\n", "a: {\"b\":c}\n", "a: {b:c}\n", "a: [b]c\n", "a: ] \n", "a: \"\\u0000\"\n",
	"é: ü\n", "a: \u2028\n", "a: \x01\n", "\ufeffa: 1\n", "a: [\n]\n", "a: [\n  1,\n  2\n  ]\n", "a: [\n1]\n",
	"a: |\n  x\n---\nb: 1\n", "a: [1,\n---\n]\n", "a: 1 # c\n# d\n  # e\nb: 2\n", "-\n", "- # c\n  a: 1\n",
	"a: [1, [2, {b: 3}], {c: [4]}]\n", "a: { }\n", "a: [ ]\n", "a: b \n", "a: 'b' \n", "a:  |\n  x\n",
}

func TestFastReaderMatchesYAML(t *testing.T) {
	accepted := 0
	for _, s := range snippets {
		if checkSame(t, fmt.Sprintf("%q", s), []byte(s)) {
			accepted++
		}
	}
	t.Logf("the fast reader took %d of %d snippets", accepted, len(snippets))
}

// The fast reader must take every manifest of the repository (and build yaml.v3's
// trees): otherwise large inputs of the same shape would fall back to yaml.v3.
func TestFastReaderTakesRepositoryManifests(t *testing.T) {
	var files []string
	for _, dir := range []string{"../examples", "../golden", "../shared/seed-systems/examples", "../../shared/seed-systems/examples"} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".json")) {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 20 {
		t.Fatalf("only %d manifest files found", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !checkSame(t, f, data) {
			t.Errorf("%s: the fast reader gave up", f)
		}
	}
	// Command-line cases keep their manifests in txtar archives; some are bad on purpose.
	archives, _ := filepath.Glob("../cmd/svcgen/testdata/*.txtar")
	for _, a := range archives {
		ar, err := txtar.ParseFile(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".yaml") || strings.HasSuffix(f.Name, ".json") {
				checkSame(t, a+":"+f.Name, f.Data)
			}
		}
	}
}

func TestFastReaderTakesGeneratedClusters(t *testing.T) {
	for _, format := range []gen.Format{gen.YAML, gen.JSON} {
		var buf bytes.Buffer
		if err := gen.Write(&buf, gen.Options{Services: 120, Endpoints: 4, Format: format}); err != nil {
			t.Fatal(err)
		}
		if !checkSame(t, "generated "+string(format), buf.Bytes()) {
			t.Errorf("generated %s: the fast reader gave up", format)
		}
	}
}

func FuzzFastReader(f *testing.F) {
	for _, s := range snippets {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSame(t, "fuzz", data)
	})
}

// resolvePlain's shortcuts agree with yaml.v3.
func TestResolvePlain(t *testing.T) {
	for _, v := range []string{
		"a", "true", "True", "TRUE", "tRUE", "false", "null", "Null", "NULL", "nULL", "no", "yes", "on", "off", "y", "n", "~",
		"0", "1", "80", "08", "0x10", "0o7", "0b1", "1_000", "123456789012345678", "1234567890123456789", "99999999999999999999",
		"1.5", "1.", ".5", "1e3", "1.5e3", "+1", "-1", "-1.5", ".inf", "-.inf", ".nan", "10.0.0.1", "10.0.0.0/8", "1/2",
		"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2001-12-1.4.5", "1.2.3", "fd00::1", "::1",
		"1:2", "0.0.0.0/0", "10.0.0.1e5", "<<", "-", "+", ".", "1..2", "1_0.5", "0x1.8p1",
	} {
		want := tagOf((&yaml.Node{Kind: yaml.ScalarNode, Value: v}).ShortTag())
		if got := resolvePlain(v); got != want {
			t.Errorf("resolvePlain(%q) = %d, yaml.v3 says %d", v, got, want)
		}
	}
}

// Read in pieces, a cluster loads exactly as read whole: same objects, documents
// numbered the same, same problems in the same order.
func TestPiecesLoadAsWhole(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 200, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	// Bad documents here and there, and a comment and an empty document at the start.
	src := "# head\n---\n---\n" + strings.Replace(buf.String(), "port: 80\n", "port: 80000\n", 7) +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: \"HelloService\"}\nspec: {ports: [{port: 1}]}\n"
	whole := &Loader{}
	if !whole.fastPieces("x.yaml", src, 1, 0) {
		t.Fatal("the fast reader gave up")
	}
	for _, n := range []int{2, 3, 7} {
		pieces, _ := splitDocuments(src, n, 1000)
		if len(pieces) != n {
			t.Fatalf("%d pieces, want %d", len(pieces), n)
		}
		split := &Loader{}
		if !split.fastPieces("x.yaml", src, n, 1000) {
			t.Fatalf("%d pieces: the fast reader gave up", n)
		}
		if !reflect.DeepEqual(split.Cluster, whole.Cluster) {
			t.Errorf("%d pieces: the objects differ", n)
		}
		if got, want := split.Errors.Err(), whole.Errors.Err(); fmt.Sprint(got) != fmt.Sprint(want) || whole.Errors.Len() != 7 {
			t.Errorf("%d pieces: errors\n%v\nwant\n%v", n, got, want)
		}
		if !reflect.DeepEqual(split.Warnings, whole.Warnings) || whole.Warnings.Len() == 0 {
			t.Errorf("%d pieces: warnings %v, want %v", n, split.Warnings.List(), whole.Warnings.List())
		}
	}
	// The slow path numbers documents the same way.
	slow := &Loader{}
	slow.Text("x.yaml", src+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: &anchor v}\n")
	if fmt.Sprint(slow.Errors.Err()) != fmt.Sprint(whole.Errors.Err()) || !reflect.DeepEqual(slow.Cluster, whole.Cluster) {
		t.Errorf("yaml.v3 reports\n%v\nwant\n%v", slow.Errors.Err(), whole.Errors.Err())
	}
}

// A List's items, handed over one by one as the fast reader reads them, load as
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
		fast, slow := &Loader{}, &Loader{}
		if looksJSON(src) {
			fast.Text(name, src)
		} else if !fast.fastPieces(name, src, 2, 1000) {
			t.Errorf("%s: the fast reader gave up", name)
			continue
		}
		slow.slow(name, src)
		if !reflect.DeepEqual(fast.Cluster, slow.Cluster) {
			t.Errorf("%s: the objects differ", name)
		}
		if fmt.Sprint(fast.Errors.Err()) != fmt.Sprint(slow.Errors.Err()) || !reflect.DeepEqual(fast.Warnings, slow.Warnings) {
			t.Errorf("%s: problems\n%v %v\nwant\n%v %v", name, fast.Errors.Err(), fast.Warnings.List(), slow.Errors.Err(), slow.Warnings.List())
		}
	}
}

// printable8 agrees with the byte-by-byte test for every byte in every position.
func TestPrintable8(t *testing.T) {
	word := []byte("abcdefgh")
	for pos := range word {
		for c := 0; c < 256; c++ {
			w := append([]byte(nil), word...)
			w[pos] = byte(c)
			if got, want := printable8(string(w)), c >= 0x20 && c < 0x7f; got != want {
				t.Errorf("printable8(%q) = %v", w, got)
			}
		}
	}
	if got := spaces("x          y", 1); got != 10 {
		t.Errorf("spaces = %d, want 10", got)
	}
}
