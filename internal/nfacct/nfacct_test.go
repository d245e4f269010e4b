package nfacct_test

import (
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/nfacct"
)

// TestEnsure makes counters in a fresh namespace, twice (the second time finds them
// and keeps their counts), and reads them back with the nfacct tool.
func TestEnsure(t *testing.T) {
	netlab.Require(t)
	l := netlab.New(t)
	ns := l.NS("node")
	names := []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"}
	for range 2 {
		if err := netlab.InNS(ns, func() error { return nfacct.Ensure(names...) }); err != nil {
			t.Fatal(err)
		}
	}
	out := l.In(ns, "nfacct", "list")
	for _, n := range names {
		if strings.Count(out, "= "+n+";") != 1 {
			t.Errorf("nfacct list does not show %s once:\n%s", n, out)
		}
	}
	if err := netlab.InNS(ns, func() error { return nfacct.Ensure(strings.Repeat("x", 32)) }); err == nil {
		t.Error("a 32-byte name was accepted")
	}
}
