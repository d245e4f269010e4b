package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/modes"
)

// The sample application compiles to the same bytes whatever the order of its
// documents (reversed, rotated, split over files given in another order), in every
// mode: the Pods made from workloads, their names, Nodes and addresses, do not depend
// on the order they were read in.
func TestWorkloadsDocumentOrder(t *testing.T) {
	data, err := os.ReadFile("../../docs/examples/boutique/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) < 10 {
		t.Fatalf("%d documents; the app has more", len(docs))
	}
	dir := t.TempDir()
	write := func(name string, docs []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	reversed := make([]string, len(docs))
	for i, d := range docs {
		reversed[len(docs)-1-i] = d
	}
	half := len(docs) / 2
	orders := [][]string{
		{write("app.yaml", docs)},
		{write("reversed.yaml", reversed)},
		{write("rotated.yaml", append(append([]string{}, docs[half:]...), docs[:half]...))},
		{write("b-second.yaml", docs[half:]), write("a-first.yaml", docs[:half])},
	}
	for _, m := range modes.All() {
		var want []byte
		for i, files := range orders {
			args := []string{"compile", "--nodes", "3", "-q", "-m", m.Name}
			for _, f := range files {
				args = append(args, "-f", f)
			}
			var stdout, stderr bytes.Buffer
			if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d: %s", m.Name, code, stderr.String())
			}
			if i == 0 {
				want = stdout.Bytes()
				continue
			}
			if !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("%s: order %d (%v) gives other bytes than the file as written", m.Name, i, files)
			}
		}
	}
}
