package apply

import (
	"testing"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/model"
)

// A backend refuses a state another backend read, and a service map of the other
// family, before it plans anything.
func TestBackendsRefuseOthersInput(t *testing.T) {
	sm := genMap(t, compiler.IPTables, "198.18.1.5")
	states := map[string]State{"iptables": &ipState{}, "ipvs": &ipvsState{}, "nftables": &nftState{}}
	for mode, b := range map[string][2]Backend{
		"iptables": {NewIPTables(model.IPv4, time.Second), NewIPTables(model.IPv6, time.Second)},
		"ipvs":     {NewIPVS(model.IPv4, time.Second), NewIPVS(model.IPv6, time.Second)},
		"nftables": {NewNFTables(model.IPv4), NewNFTables(model.IPv6)},
	} {
		for other, st := range states {
			if other == mode {
				continue
			}
			want := mode + ": a state of another backend"
			if _, err := b[0].Plan(sm, st, PlanOptions{}); err == nil || err.Error() != want {
				t.Errorf("%s plans over a %s state: %v, want %q", mode, other, err, want)
			}
			if _, err := b[0].Cleanup(st); err == nil || err.Error() != want {
				t.Errorf("%s cleans up a %s state: %v, want %q", mode, other, err, want)
			}
		}
		want := b[1].Name() + ": the service map is for IPv4"
		if _, err := b[1].Plan(sm, states[mode], PlanOptions{}); err == nil || err.Error() != want {
			t.Errorf("%s plans an IPv4 map: %v, want %q", b[1].Name(), err, want)
		}
	}
}
