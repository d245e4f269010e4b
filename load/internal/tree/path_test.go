package tree

import (
	"strconv"
	"testing"

	"github.com/svcgen/svcgen/internal/textutil"
)

// A Path writes out what joining its steps as strings gives, at any depth, with
// keys that are not plain quoted (a label may be named "", or hold a space).
func TestPath(t *testing.T) {
	join := func(path, key string) string {
		if path == "" {
			return textutil.Quote(key)
		}
		return path + "." + textutil.Quote(key)
	}
	index := func(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
	p, want := At(""), ""
	for i, k := range []string{"spec", "", "containers", "#", "ports", "name", "a b", "x.y", "\x1b[2J"} {
		p, want = p.Key(k), join(want, k)
		if i%2 == 0 {
			p, want = p.Index(i), index(want, i)
		}
		if i%3 == 0 {
			p, want = p.Index(7), index(want, 7)
		}
		if got := p.String(); got != want {
			t.Fatalf("step %d: %q, want %q", i, got, want)
		}
	}
	if got := At("").Index(3).Index(4).String(); got != "[3][4]" {
		t.Errorf("indexes alone: %q", got)
	}
	if got := At("spec.ports").Index(2).Key("port").String(); got != "spec.ports[2].port" {
		t.Errorf("%q", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		p := At("spec").Key("containers").Index(1).Key("ports").Index(2)
		sink = p.Key("name").n
	}); n != 0 {
		t.Errorf("building a path allocates %v times", n)
	}
}

var sink uint8
