package apply

import (
	"strings"
	"testing"
	"time"
)

// The iptables backend takes a hint only about the map its state was loaded from: then
// it looks at the Services the hint names and no others; a hint about another map is
// not used.
func TestIPTablesPlanHint(t *testing.T) {
	// ipvsMap compiles for ipvs mode; the iptables writer reads the same service map.
	before := ipvsMap(t, "198.18.1.1")
	after := ipvsMap(t, "198.18.1.2")
	b := NewIPTables(before.Family, time.Second)
	loaded, err := b.Want(before)
	if err != nil {
		t.Fatal(err)
	}
	st := loaded.(*ipState)
	st.sm = before // as Load leaves it
	for _, tc := range []struct {
		name   string
		hint   *Hint
		writes bool
	}{
		{"no hint", nil, true},
		{"hint naming the Service", &Hint{Since: before, Changed: []string{"demo/web"}}, true},
		{"hint naming no Service", &Hint{Since: before, Changed: []string{}}, false},
		{"hint about another map", &Hint{Since: after, Changed: []string{}}, true},
	} {
		p, err := b.Plan(after, st, PlanOptions{Hint: tc.hint})
		if err != nil {
			t.Fatal(err)
		}
		if writes := !p.Empty(); writes != tc.writes {
			t.Errorf("%s: plan writes %v, want %v: %s", tc.name, writes, tc.writes, p.Summary().Text)
		}
		if tc.writes && !strings.Contains(string(p.(*ipPlan).payload), "198.18.1.2") {
			t.Errorf("%s: the new endpoint is not written:\n%s", tc.name, p.(*ipPlan).payload)
		}
	}
}
