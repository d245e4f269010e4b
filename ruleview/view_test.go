package ruleview

import (
	"reflect"
	"strings"
	"testing"
)

func view(sections ...*Section) *View {
	v := &View{Sections: sections, Labels: map[string]string{"SVC-A": "ns/a:p", "SVC-B": "ns/b:p"}}
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
