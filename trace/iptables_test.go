package trace

import (
	"math/big"
	"net/netip"
	"os"
	"testing"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
)

// upstream's fake node addresses: loopback is always local.
var fakeNode = Host{Local: addrs("192.168.0.2", "192.168.1.2", "192.168.99.11", "2001:db8::1", "2001:db8:1::2")}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// loadTracer reads a ruleset file for upstream's fake node.
func loadTracer(t *testing.T, path string) *IPTables {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tracerOf(t, path, data, fakeNode)
}

// tracerOf parses iptables-save text and makes a tracer for the host.
func tracerOf(t *testing.T, name string, data []byte, host Host) *IPTables {
	t.Helper()
	rs, err := iptsyntax.ParseBytes(name, data)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewIPTables(rs, host)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The flows of upstream's TestTracePacket over its static ruleset.
func TestTracePacket(t *testing.T) {
	tr := loadTracer(t, "testdata/tracepacket.rules")
	for _, tc := range []struct {
		name, src, dst string
		port           uint16
		want           string
		masq           bool
	}{
		{"no match", "10.0.0.2", "10.0.0.3", 80, "", false},
		{"single endpoint", "10.0.0.2", "172.30.0.41", 80, "10.180.0.1:80", false},
		{"multiple endpoints", "10.0.0.2", "172.30.0.44", 80, "10.180.0.4:80, 10.180.0.5:80", false},
		{"LOCAL, KUBE-MARK-MASQ", "192.168.0.2", "192.168.99.22", 80, "10.180.0.2:80", true},
		{"DROP", "203.0.113.2", "192.168.99.22", 80, "DROP", false},
		{"ACCEPT (NodePortHealthCheck)", "192.168.0.2", "192.168.0.2", 30000, "ACCEPT", false},
		{"REJECT", "10.0.0.2", "172.30.0.46", 80, "REJECT", false},
	} {
		r, err := tr.Trace(Packet{Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), DPort: tc.port, Proto: "tcp"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		masq, mixed := r.Masquerade()
		if r.Summary() != tc.want || masq != tc.masq || mixed {
			t.Errorf("%s: got %q masq=%v mixed=%v, want %q masq=%v", tc.name, r.Summary(), masq, mixed, tc.want, tc.masq)
		}
	}
}

// Probabilities are exact fractions: three endpoints get 1/3 each, through the chain
// of 1/3, 1/2 and the last unconditional rule.
func TestTraceProbabilities(t *testing.T) {
	rules := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-X - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SEP-B - [0:0]
:KUBE-SEP-C - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X
-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A
-A KUBE-SVC-X -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-B
-A KUBE-SVC-X -j KUBE-SEP-C
-A KUBE-SEP-A -p tcp -j DNAT --to-destination 10.0.0.1:8080
-A KUBE-SEP-B -p tcp -j DNAT --to-destination 10.0.0.2:8080
-A KUBE-SEP-C -p tcp -j DNAT --to-destination 10.0.0.3:8080
COMMIT
`
	tr := tracerOf(t, "rules", []byte(rules), Host{})
	r, err := tr.Trace(Packet{Src: netip.MustParseAddr("10.0.0.9"), Dst: netip.MustParseAddr("172.30.0.1"), DPort: 80, Proto: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Outcomes) != 3 {
		t.Fatalf("outcomes = %+v", r.Outcomes)
	}
	for _, o := range r.Outcomes {
		if o.Probability.Cmp(big.NewRat(1, 3)) != 0 || o.Verdict != DNAT {
			t.Errorf("%s: %v %s, want DNAT with 1/3", o.Endpoint, o.Verdict, o.Probability.RatString())
		}
	}
}
