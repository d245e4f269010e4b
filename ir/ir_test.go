package ir

import (
	"net/netip"
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
