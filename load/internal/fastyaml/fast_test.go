package fastyaml

import (
	"bytes"
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

func read(src string, doc func(int, *tree.Node)) bool { return Read(src, doc, nil, nil) }

// checkSame fails when the fast reader accepts data but builds other trees than
// yaml.v3 (or yaml.v3 rejects data). It reports whether the fast reader accepted it.
func checkSame(t *testing.T, name string, data []byte) bool {
	t.Helper()
	fast, ok := treetest.Collect(read, data)
	if !ok {
		return false
	}
	slow, err := treetest.Reference(data)
	if err != nil {
		t.Errorf("%s: the fast reader accepts what yaml.v3 rejects (%v):\n%s", name, err, data)
		return true
	}
	treetest.NullDocuments(slow, fast)
	if !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s: trees differ\ninput:\n%s\nfast: %s\nslow: %s", name, data, treetest.Dump(fast), treetest.Dump(slow))
	}
	return true
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
	for _, dir := range []string{"../../../examples", "../../../golden", "../../../testdata/minik8s"} {
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
	archives, _ := filepath.Glob("../../../cmd/svcgen/testdata/*.txtar")
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
