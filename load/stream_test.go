package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/svcgen/svcgen/gen"
)

// splitStream's pieces make up the input; each but the first starts at a "---" line
// and each but the last holds at least min bytes.
func TestSplitStream(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	for name, src := range map[string]string{
		"empty":       "",
		"no marker":   strings.Repeat("a: 1\n", 100),
		"markers":     strings.Repeat("a: 1\n---\nb: 2\n", 100),
		"not markers": strings.Repeat("a: 1\n---x\n--- \n----\n", 50) + "---",
		"long lines":  "a: " + long + "\n---\nb: " + long + "\n---\nc: 1\n",
		"end marker":  strings.Repeat("a: 1\n", 30) + "---",
	} {
		for _, min := range []int{1, 7, 64, 1000} {
			var pieces []string
			err := splitStream(iotest.HalfReader(strings.NewReader(src)), min, func(text string, first bool) {
				if first != (len(pieces) == 0) {
					t.Errorf("%s/%d: piece %d first: %v", name, min, len(pieces), first)
				}
				pieces = append(pieces, text)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(pieces, ""); got != src {
				t.Errorf("%s/%d: the pieces make %q", name, min, got)
			}
			for i, p := range pieces {
				if i > 0 && !isMarker(p) {
					t.Errorf("%s/%d: piece %d starts %q", name, min, i, p[:len(p)/2])
				}
				if i < len(pieces)-1 && len(p) < min {
					t.Errorf("%s/%d: piece %d has %d bytes", name, min, i, len(p))
				}
			}
			if name == "markers" && min == 64 && len(pieces) < 10 {
				t.Errorf("%s/%d: only %d pieces", name, min, len(pieces))
			}
		}
	}
	err := splitStream(strings.NewReader("a: 1\n\x00"), 1, func(string, bool) {})
	if !errors.Is(err, errBinary) {
		t.Errorf("NUL: %v", err)
	}
	err = splitStream(iotest.ErrReader(io.ErrClosedPipe), 1, func(string, bool) {})
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read error: %v", err)
	}
}

// A file read as a stream loads as its text does: same objects, documents numbered
// the same, same problems. On what the fast reader gives up, nothing is loaded.
func TestStreamLoadsAsText(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 200, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	src := "# head\n---\n---\n" + strings.Replace(buf.String(), "port: 80\n", "port: 80000\n", 7) +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: \"HelloService\"}\nspec: {ports: [{port: 1}]}\n"
	whole := &Loader{}
	whole.Text("x.yaml", src)
	if whole.Errors.Len() != 7 || whole.Warnings.Len() == 0 {
		t.Fatalf("%d errors, %d warnings", whole.Errors.Len(), whole.Warnings.Len())
	}
	for _, min := range []int{5000, 50000, 1 << 30} {
		l := &Loader{}
		ok, err := l.streamYAML("x.yaml", strings.NewReader(src), min)
		if !ok || err != nil {
			t.Fatalf("%d: %v %v", min, ok, err)
		}
		if !reflect.DeepEqual(l.Cluster, whole.Cluster) {
			t.Errorf("%d: the objects differ", min)
		}
		if got, want := fmt.Sprint(l.Errors.Err()), fmt.Sprint(whole.Errors.Err()); got != want {
			t.Errorf("%d: errors\n%s\nwant\n%s", min, got, want)
		}
		if !reflect.DeepEqual(l.Warnings, whole.Warnings) {
			t.Errorf("%d: warnings differ", min)
		}
	}
	// An anchor near the end: the fast reader gives up on the last piece only.
	l := &Loader{}
	ok, err := l.streamYAML("x.yaml", strings.NewReader(src+"---\na: &x 1\nb: *x\n"), 1000)
	if ok || err != nil || len(l.Cluster.Services) != 0 || l.Errors.Len() != 0 {
		t.Errorf("streamYAML took an anchor: %v %v, %d services", ok, err, len(l.Cluster.Services))
	}
}
