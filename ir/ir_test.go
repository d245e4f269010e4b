package ir

import (
	"net/netip"
	"slices"
	"testing"
)

func TestMasqueradeMark(t *testing.T) {
	for bit, want := range map[int]string{14: "0x00004000", 0: "0x00000001", 31: "0x80000000", 20: "0x00100000"} {
		if got := (&ServiceMap{MasqueradeBit: bit}).MasqueradeMark(); got != want {
			t.Errorf("MasqueradeMark(%d) = %s, want %s", bit, got, want)
		}
	}
}

// Service finds a Service in the map's order (namespace, then name), which is not the
// order of the keys as strings: "ns-x/b" sorts before "ns/a".
func TestServiceLookup(t *testing.T) {
	sm := &ServiceMap{Services: []*Service{{Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "b"}, {Namespace: "ns-x", Name: "a"}}}
	for _, s := range sm.Services {
		if got := sm.Service(s.Key()); got != s {
			t.Errorf("Service(%q) = %v", s.Key(), got)
		}
	}
	for _, key := range []string{"ns/c", "ns-x/b", "nsx/a", "", "ns"} {
		if got := sm.Service(key); got != nil {
			t.Errorf("Service(%q) = %v, want nil", key, got)
		}
	}
}

func TestEndpointAppendTo(t *testing.T) {
	for _, s := range []string{"10.1.2.3", "0.0.0.0", "fd00::1", "::ffff:10.1.2.3", "fe80::1%eth0", "2001:db8::"} {
		for _, port := range []uint16{0, 8, 80, 65535} {
			e := Endpoint{IP: netip.MustParseAddr(s), Port: port}
			if got, want := string(e.AppendTo([]byte("x"))), "x"+e.String(); got != want {
				t.Errorf("AppendTo = %q, String = %q", got, want)
			}
		}
	}
}

// Each policy routes on its own: no endpoints reject, Cluster goes to the cluster's,
// Local to the node's, and Local without a local endpoint drops.
func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		p                  Port
		internal, external Route
	}{
		{Port{InternalPolicyLocal: true, ExternalPolicyLocal: true}, Reject, Reject},
		{Port{HasEndpoints: true}, ToCluster, ToCluster},
		{Port{HasEndpoints: true, InternalPolicyLocal: true}, Drop, ToCluster},
		{Port{HasEndpoints: true, ExternalPolicyLocal: true}, ToCluster, Drop},
		{Port{HasEndpoints: true, InternalPolicyLocal: true, Local: []int{0}}, ToLocal, ToCluster},
		{Port{HasEndpoints: true, ExternalPolicyLocal: true, Local: []int{0}}, ToCluster, ToLocal},
	} {
		if got, got2 := tc.p.Internal(), tc.p.External(); got != tc.internal || got2 != tc.external {
			t.Errorf("%+v: internal %s, external %s; want %s, %s", tc.p, got, got2, tc.internal, tc.external)
		}
	}
}

// ChangedServices names the Services new, gone, or of another value, in the map's
// order ("ns" before "ns-x", unlike the keys as strings); a Service copied is the same.
func TestChangedServices(t *testing.T) {
	svc := func(ns, name string, port uint16) *Service {
		return &Service{Namespace: ns, Name: name, Ports: []*Port{{Name: PortName{ns, name, "p"}, Port: port}}}
	}
	a, b, c, d := svc("ns", "a", 80), svc("ns", "b", 80), svc("ns-x", "c", 80), svc("ns", "d", 80)
	copyB := *b
	prev := &ServiceMap{Services: []*Service{a, b, d, c}}
	next := &ServiceMap{Services: []*Service{svc("ns", "a", 81), &copyB, svc("ns", "e", 80), c}}
	got := ChangedServices(prev, next)
	if want := []string{"ns/a", "ns/d", "ns/e"}; !slices.Equal(got, want) {
		t.Errorf("ChangedServices = %q, want %q", got, want)
	}
	if got := ChangedServices(prev, prev); got != nil {
		t.Errorf("a map against itself: %q", got)
	}
}
