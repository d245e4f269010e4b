package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/gen"
)

// splitCluster writes a generated cluster into dir: the EndpointSlices one a file
// under slices/, everything else in base.yaml.
func splitCluster(t *testing.T, dir string) {
	t.Helper()
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 40, Endpoints: 3, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	var base strings.Builder
	name := regexp.MustCompile(`(?m)^  name: (\S+)$`)
	os.MkdirAll(filepath.Join(dir, "slices"), 0o755)
	for _, doc := range strings.Split(buf.String(), "---\n") {
		if !strings.Contains(doc, "kind: EndpointSlice\n") {
			base.WriteString("---\n" + doc)
			continue
		}
		n := name.FindStringSubmatch(doc)[1]
		writeFile(t, filepath.Join(dir, "slices", n+".yaml"), doc)
	}
	writeFile(t, filepath.Join(dir, "base.yaml"), base.String())
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWatch: after every change to the files, a Refresh gives the map a fresh Run
// gives, having read only the files that changed.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	splitCluster(t, dir)
	in := Inputs{Files: []string{dir}}
	w, res, err := NewWatch(in, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *Result {
		t.Helper()
		r, err := Run(in, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if !reflect.DeepEqual(res.Map, fresh().Map) {
		t.Fatal("the first compile differs from Run's")
	}
	if up, err := w.Refresh(); up != nil || err != nil {
		t.Fatalf("nothing changed, yet Refresh says %+v, %v", up, err)
	}

	slice := filepath.Join(dir, "slices", "svc-5-abc12.yaml")
	old, _ := os.ReadFile(slice)
	changedIP := strings.Replace(string(old), "- 10.128.", "- 10.99.", 1)
	badSvc := "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 70000}]}\n"
	newSvc := "apiVersion: v1\nkind: Service\nmetadata: {name: extra, namespace: ns-0}\nspec:\n  clusterIP: 198.19.200.1\n  ports: [{port: 80}]\n"
	for _, step := range []struct {
		name    string
		edit    func()
		changed []string // nil: a full compile
		files   int
		wantErr bool
	}{
		{"an endpoint changes", func() { writeFile(t, slice, changedIP) }, []string{"ns-0/svc-5"}, 1, false},
		{"the same content again", func() { writeFile(t, slice, changedIP+"\n") }, []string{"ns-0/svc-5"}, 1, false},
		{"a slice file goes away", func() { os.Remove(slice) }, []string{"ns-0/svc-5"}, 1, false},
		{"a bad new file", func() { writeFile(t, filepath.Join(dir, "new.yaml"), badSvc) }, nil, 0, true},
		{"the new file mended", func() { writeFile(t, filepath.Join(dir, "new.yaml"), newSvc) }, nil, 1, false},
	} {
		step.edit()
		up, err := w.Refresh()
		if step.wantErr {
			if err == nil || !strings.Contains(err.Error(), "spec.ports[0].port: 70000 is out of range") {
				t.Errorf("%s: error %v", step.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.name == "the same content again" {
			// Only the trailing line break differs: the objects are the same.
			if up == nil || len(up.Files) != 1 {
				t.Errorf("%s: update %+v", step.name, up)
			}
		}
		if up == nil {
			t.Fatalf("%s: no update", step.name)
		}
		if !reflect.DeepEqual(up.Changed, step.changed) || len(up.Files) != step.files {
			t.Errorf("%s: changed %v in files %v; want %v in %d", step.name, up.Changed, up.Files, step.changed, step.files)
		}
		if !reflect.DeepEqual(up.Maps[0], fresh().Map) {
			t.Errorf("%s: the map differs from Run's", step.name)
		}
	}
}
