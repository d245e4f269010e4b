package release

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int{
		"1.37": 37, "v1.37": 37, "v1.37.2": 37, "1.34.0": 34, "v1.36.1-eks-1a2b3c": 36, "v1.35.4+k3s1": 35,
	} {
		r, err := Parse(in)
		if err != nil || r.Minor != want {
			t.Errorf("Parse(%q) = %v, %v; want 1.%d", in, r, err, want)
		}
	}
	for _, in := range []string{"1.33", "1.38", "2.37", "37", "", "v1.x", "1.-1"} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), "1.34, 1.35, 1.36 or 1.37") {
			t.Errorf("Parse(%q): %v, want an error naming the supported releases", in, err)
		}
	}
	if Newest().String() != "1.37" {
		t.Errorf("newest is %s", Newest())
	}
}

// Each release's layout is what its kube-proxy writes (see releases.md in the shared
// spec and the oracle): the switches arrive in v1.36 and v1.37 and stay.
func TestLayouts(t *testing.T) {
	want := map[int]Layout{
		34: {ExternalIPs: true, IPVS: true, PreferSameNode: true},
		35: {ExternalIPs: true, IPVS: true, PreferSameNode: true},
		36: {NFTInlineMasquerade: true, NFTNumgenDNAT: true, PreferNonTerminating: true, ExternalIPs: true, IPVS: true, PreferSameNode: true},
		37: {RandomFullyAlways: true, NFTInlineMasquerade: true, NFTNumgenDNAT: true, NFTSingleEndpointDNAT: true,
			NFTElementCommentMax: 128, PreferNonTerminating: true, NodePortAddressKeywords: true, ExternalIPs: true,
			IPVS: true, PreferSameNode: true},
	}
	for _, r := range All() {
		tg, err := r.Target(nil)
		if err != nil {
			t.Fatal(err)
		}
		if tg.Layout != want[r.Minor] {
			t.Errorf("%s: layout %+v\nwant %+v", r, tg.Layout, want[r.Minor])
		}
		if got := tg.String(); got != "kube-proxy v"+r.String() {
			t.Errorf("%s: header %q", r, got)
		}
	}
}

func TestGates(t *testing.T) {
	r, _ := Parse("1.37")
	tg, err := r.Target(map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: true, GateAllowServiceExternalIPs: false})
	if err != nil {
		t.Fatal(err)
	}
	if !tg.Layout.NFTLocalhostNodePorts || tg.Layout.ExternalIPs {
		t.Errorf("gates not applied: %+v", tg.Layout)
	}
	if got, want := tg.String(), "kube-proxy v1.37 (feature gates AllowServiceExternalIPs=false,KubeProxyNFTablesLocalhostNodePorts=true)"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	// A gate the release does not have.
	old, _ := Parse("1.35")
	_, err = old.Target(map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: true})
	var unknown *UnknownGateError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "PreferSameTrafficDistribution") {
		t.Errorf("unknown gate: %v", err)
	}
	// A locked gate.
	if _, err := old.Target(map[string]bool{GatePreferSameTrafficDistribution: false}); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("locked gate: %v", err)
	}
	// The same gate open in v1.34.
	v34, _ := Parse("1.34")
	if tg, err := v34.Target(map[string]bool{GatePreferSameTrafficDistribution: false}); err != nil || tg.Layout.PreferSameNode {
		t.Errorf("v1.34 PreferSameTrafficDistribution=false: %+v, %v", tg.Layout, err)
	}
}

// A gate whose rules svcgen does not write refuses only the modes it changes, and
// only when it is on.
func TestWrites(t *testing.T) {
	r, err := Parse("1.37")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gates map[string]bool
		mode  string
		ok    bool
	}{
		{nil, "nftables", true},
		{map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: true}, "nftables", false},
		{map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: true}, "iptables", true},
		{map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: true}, "ipvs", true},
		{map[string]bool{GateKubeProxyNFTablesLocalhostNodePorts: false}, "nftables", true},
	} {
		tg, err := r.Target(tc.gates)
		if err != nil {
			t.Fatal(err)
		}
		err = tg.Writes(tc.mode)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), GateKubeProxyNFTablesLocalhostNodePorts+"=true")) {
			t.Errorf("%v in %s: %v, want ok %v", tc.gates, tc.mode, err, tc.ok)
		}
	}
}
