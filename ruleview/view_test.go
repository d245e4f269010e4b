package ruleview

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
)

func view(sections ...*Section) *View {
	labels := map[string]string{"SVC-A": "ns/a:p", "SVC-B": "ns/b:p"}
	v := &View{Sections: sections, Label: func(name string) string { return labels[name] }}
	v.Sort()
	return v
}

func sec(name, owner string, lines ...string) *Section {
	s := &Section{Table: "nat", Name: name, Header: ":" + name, Owner: owner, Rank: 1}
	if owner == "" {
		s.Rank = 0
	}
	for _, l := range lines {
		text, lineOwner, _ := strings.Cut(l, "|")
		s.Lines = append(s.Lines, Line{Text: text, Key: strings.ToLower(text), Owner: lineOwner})
	}
	return s
}

func TestAudit(t *testing.T) {
	want := view(
		sec("SERVICES", "", "-A SERVICES -d 1 -j SVC-A|ns/a:p", "-A SERVICES -d 2 -j SVC-B|ns/b:p", "-A SERVICES -d 4 -j SVC-D|ns/d:p"),
		sec("SVC-A", "ns/a:p", "-A SVC-A -j SEP-1", "-A SVC-A -j SEP-2"),
		sec("SVC-B", "ns/b:p", "-A SVC-B -j SEP-3"),
		sec("SVC-D", "ns/d:p", "-A SVC-D -j SEP-9"),
		sec("MASQ", "", "-A MASQ -j MARK"),
	)
	have := view(
		// svc a in step (spelled in capitals: same key), b's rule changed, c extra,
		// d missing, the node's MASQ rule gone.
		sec("SERVICES", "", "-A SERVICES -D 1 -J SVC-A|ns/a:p", "-A SERVICES -d 2 -j SVC-B|ns/b:p", "-A SERVICES -d 3 -j SVC-C|ns/c:p"),
		sec("SVC-A", "ns/a:p", "-A SVC-A -j SEP-1", "-A SVC-A -j SEP-2"),
		sec("SVC-B", "ns/b:p", "-A SVC-B -j SEP-4"),
		sec("SVC-C", "ns/c:p", "-A SVC-C -j SEP-5"),
		sec("MASQ", ""),
	)
	got := Audit(want, have)
	var kinds []string
	for _, d := range got {
		kinds = append(kinds, string(d.Kind)+" "+d.Port)
	}
	wantKinds := []string{"different (node)", "different ns/b:p", "extra ns/c:p", "missing ns/d:p"}
	if !reflect.DeepEqual(kinds, wantKinds) {
		t.Fatalf("drift = %q, want %q", kinds, wantKinds)
	}
	b := got[1]
	if !reflect.DeepEqual(b.Missing, []string{"-A SVC-B (ns/b:p) -j SEP-3"}) || !reflect.DeepEqual(b.Extra, []string{"-A SVC-B (ns/b:p) -j SEP-4"}) {
		t.Errorf("ns/b:p: missing %q, extra %q", b.Missing, b.Extra)
	}
	if len(Audit(want, want)) != 0 {
		t.Error("a view drifts from itself")
	}
	// Nothing on the node: every port is missing.
	for _, d := range Audit(want, view()) {
		if d.Kind != Missing {
			t.Errorf("%s: %s, want missing", d.Port, d.Kind)
		}
	}
	// The same rules in another order.
	swapped := view(
		sec("SERVICES", "", "-A SERVICES -d 1 -j SVC-A|ns/a:p", "-A SERVICES -d 2 -j SVC-B|ns/b:p", "-A SERVICES -d 4 -j SVC-D|ns/d:p"),
		sec("SVC-A", "ns/a:p", "-A SVC-A -j SEP-2", "-A SVC-A -j SEP-1"),
		sec("SVC-B", "ns/b:p", "-A SVC-B -j SEP-3"),
		sec("SVC-D", "ns/d:p", "-A SVC-D -j SEP-9"),
		sec("MASQ", "", "-A MASQ -j MARK"),
	)
	if d := Audit(want, swapped); len(d) != 1 || d[0].Port != "ns/a:p" || d[0].Kind != Different {
		t.Errorf("reordered rules: %+v", d)
	}
}

func TestUnified(t *testing.T) {
	old := view(sec("SVC-A", "ns/a:p", "-A SVC-A -J SEP-1", "-A SVC-A -j SEP-2"))
	new := view(sec("SVC-A", "ns/a:p", "-A SVC-A -j SEP-1", "-A SVC-A -j SEP-3"))
	got := string(Unified("old", old, "new", new))
	want := `diff old new
--- old
+++ new
@@ -1,4 +1,4 @@
 *nat
 :SVC-A (ns/a:p)
 -A SVC-A (ns/a:p) -j SEP-1
--A SVC-A (ns/a:p) -j SEP-2
+-A SVC-A (ns/a:p) -j SEP-3
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if Unified("old", old, "old", old) != nil {
		t.Error("a view differs from itself")
	}
}

// Cutting the lines both texts share at their ends gives a correct diff, the same as
// the diff of the whole texts when lines are unique (with repeated lines the anchored
// algorithm may choose other, equally correct, hunks).
func TestUnifiedTrimsCommonEnds(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		n := 5 + rnd.IntN(60)
		unique := round%2 == 0 // rules are mostly unique lines; repeats leave choices
		var a []string
		for i := 0; i < n; i++ {
			if unique {
				a = append(a, fmt.Sprintf("-A CHAIN-%d rule %d", rnd.IntN(8), i))
			} else {
				a = append(a, fmt.Sprintf("-A CHAIN-%d rule %d", rnd.IntN(8), rnd.IntN(4)))
			}
		}
		b := append([]string(nil), a...)
		for e := 1 + rnd.IntN(3); e > 0; e-- {
			i := rnd.IntN(len(b) + 1)
			switch rnd.IntN(3) {
			case 0:
				b = slices.Insert(b, i, "-A NEW rule")
			case 1:
				if i < len(b) {
					b = slices.Delete(b, i, i+1)
				}
			default:
				if i < len(b) {
					b[i] = "-A CHANGED rule"
				}
			}
		}
		old, new := []byte(strings.Join(a, "\n")+"\n"), []byte(strings.Join(b, "\n")+"\n")
		got, want := string(unified("a", old, "b", new)), string(diff.Diff("a", old, "b", new))
		if patched := patch(t, string(old), got); patched != string(new) {
			t.Fatalf("round %d: the diff does not turn a into b:\n%s", round, got)
		}
		if unique && got != want {
			t.Fatalf("round %d:\n%s\nwant\n%s", round, got, want)
		}
	}
}

// patch applies a unified diff to text.
func patch(t *testing.T, text, d string) string {
	old := strings.SplitAfter(text, "\n")
	var out []string
	next := 0 // old lines copied so far
	for _, l := range strings.SplitAfter(d, "\n") {
		var x, nx, y, ny int
		switch {
		case strings.HasPrefix(l, "@@ "):
			fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &x, &nx, &y, &ny)
			start := x - 1
			if nx == 0 {
				start = x
			}
			out = append(out, old[next:start]...)
			next = start
		case strings.HasPrefix(l, " "), strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "--- "):
			if old[next] != l[1:] {
				t.Fatalf("context %q does not match %q", l, old[next])
			}
			if l[0] == ' ' {
				out = append(out, old[next])
			}
			next++
		case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ "):
			out = append(out, l[1:])
		}
	}
	return strings.Join(append(out, old[next:]...), "")
}
