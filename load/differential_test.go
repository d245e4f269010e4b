package load

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// A way of reading an input, and what it loaded.
type way struct {
	name string
	l    *Loader
}

// everyWay loads src with yaml.v3 alone (the reference) and every other way the
// loader reads an input: as text, and as a file read in pieces of min bytes (and of
// the default size) through a reader that returns a few bytes at a time. It reports
// whether the fast readers took src (rather than giving up, for yaml.v3 to read).
func everyWay(name, src string, d Dialect, min int, maxInput int64) (ref *Loader, ways []way, fast bool) {
	ref = &Loader{Dialect: d, Reader: Reference, MaxInput: maxInput}
	ref.Text(name, src)
	text := &Loader{Dialect: d, MaxInput: maxInput}
	text.Text(name, src)
	ways = append(ways, way{"text", text})
	for _, size := range []int{min, 0} {
		file := &Loader{Dialect: d, MaxInput: maxInput, pieces: size}
		file.load(&source{name: name, file: &dribble{r: strings.NewReader(src)}})
		ways = append(ways, way{fmt.Sprintf("file in pieces of %d", size), file})
	}
	probe := &Loader{Dialect: d, pieces: min}
	sub, _ := probe.readFast(&source{name: name, text: src})
	return ref, ways, sub != nil
}

// dribble is a file that reads a few bytes at a time.
type dribble struct {
	r *strings.Reader
	n int
}

func (d *dribble) Read(p []byte) (int, error) {
	d.n = d.n%7 + 1
	return d.r.Read(p[:min(len(p), d.n)])
}

func (d *dribble) Seek(offset int64, whence int) (int64, error) { return d.r.Seek(offset, whence) }

// checkSameLoad fails when any way of reading src loads other objects, errors or
// warnings than the reference does. It reports whether the fast readers took src.
func checkSameLoad(t *testing.T, name, src string, d Dialect, min int) bool {
	t.Helper()
	return checkSameLoadMax(t, name, src, d, min, 0)
}

// checkSameLoadMax is checkSameLoad with inputs of at most maxInput bytes.
func checkSameLoadMax(t *testing.T, name, src string, d Dialect, min int, maxInput int64) bool {
	t.Helper()
	ref, ways, fast := everyWay(name, src, d, min, maxInput)
	want := problemText(ref)
	if yamlIsNoJSONParser(src, want) {
		return fast
	}
	for _, w := range ways {
		if got := problemText(w.l); got != want {
			t.Errorf("%s, %s: problems\n%s\nyaml.v3 reports\n%s\ninput:\n%s", name, w.name, got, want, src)
		}
		if got, want := w.l.Tally.Line(""), ref.Tally.Line(""); got != want {
			t.Errorf("%s, %s: %q, yaml.v3 %q\ninput:\n%s", name, w.name, got, want, src)
		}
		if !reflect.DeepEqual(w.l.Cluster, ref.Cluster) {
			t.Errorf("%s, %s: the objects differ from yaml.v3's\ninput:\n%s", name, w.name, src)
		}
	}
	return fast
}

// differentialSeeds are inputs for FuzzLoaders beside the repository's manifests:
// the shapes where the readers part ways, and where pieces are cut.
var differentialSeeds = []string{
	"", "---\n", "# c\n---\n---\n", "a: 1\n---\nb: 2\n---\n", "apiVersion: v1\nkind: Service\n---\n--- \n---x\n",
	"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {ports: [{port: 0}]}\n- 3\n",
	"apiVersion: v1\nkind: Thing\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {ports: [{port: 0}]}\n",
	`{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 0}]}}], "kind": "ServiceList"}`,
	`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}} # c`,
	"a: &x 1\nb: *x\n", "a: &x [*x]\n", "a: &m {b: 1}\nc: {<<: *m, d: 2}\ne: {<<: {f: 1}}\n", "a: &x {b: [1, {c: *x}]}\n", billionLaughs(5), "a: [\n---\n]\n", "a: |\n  x\n---\nb: 1\n", "a: b\r\n---\r\nc: d\r\n",
	"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  ports:\n  - port: 80\n    port: 81\n",
	"kind: Service\n\x00", "\xff\xfe", "a: \"\\ud83d\"\n",
}

// FuzzLoaders holds every way of reading an input to the reference: the fast
// readers, as text and as a file read in pieces (of a few bytes too), must load the
// same objects and report the same errors and warnings as yaml.v3 alone; with a
// bound on the input's size too (max, when it is not 0).
func FuzzLoaders(f *testing.F) {
	for _, dir := range []string{"../examples", "../testdata/minik8s"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(string(data), false, uint16(64), uint32(0))
				f.Add(string(data), false, uint16(64), uint32(len(data)/2))
			}
		}
	}
	for _, a := range []string{"testdata/problems.txtar"} {
		ar, err := txtar.ParseFile(a)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			f.Add(string(file.Data), strings.HasPrefix(file.Name, "minik8s-"), uint16(16), uint32(0))
		}
	}
	for _, s := range differentialSeeds {
		f.Add(s, false, uint16(1), uint32(0))
	}
	f.Fuzz(func(t *testing.T, src string, minik8s bool, min uint16, max uint32) {
		d := Kubernetes
		if minik8s {
			d = MiniK8s
		}
		checkSameLoadMax(t, "fuzz.yaml", src, d, int(min), int64(max))
	})
}

// billionLaughs is a document of a few lines whose aliases stand for 10^levels
// values.
func billionLaughs(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  l0: &l0 lol\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	return b.String()
}

// yamlIsNoJSONParser reports valid JSON that yaml.v3 cannot read, or reads
// otherwise, as json.go lists: \/ escapes, a tab before a value, keys of more than
// 1024 characters, DEL and C1 characters in strings (errors, given the reference's
// report want), and surrogate pairs (two characters). There the JSON reader is right
// and yaml.v3 is not.
func yamlIsNoJSONParser(src, want string) bool {
	if !looksJSON(src) || !json.Valid([]byte(src)) {
		return false
	}
	return strings.Contains(want, "YAML syntax error") || strings.Contains(want, "a control character") ||
		strings.Contains(strings.ToLower(src), `\ud`)
}
