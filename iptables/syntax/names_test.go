package syntax

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"testing"
)

// The hash examples are upstream's own test expectations (spec/iptables.md §4).
func TestHash16(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"ns1/svc1:p80", "tcp"}, "XPGD46QRK7WJZT7O"},
		{[]string{"ns2/svc2:p80", "tcp"}, "GNZBNJ2PO5MGZ6GT"},
		{[]string{"ns5/svc5:p80", "tcp"}, "NUKIZ6OKUXPJNT4C"},
		{[]string{"ns2/svc2:p8080", "tcp"}, "2VJB64SDSIJUP5T6"},
		{[]string{"ns4/svc4:p8082", "tcp"}, "EBDQOQU5SJFXRIL3"},
		{[]string{"ns1/svc1:p80", "tcp", "10.180.0.1:80"}, "SXIVWICOYRO3J4NJ"},
		{[]string{"ns5/svc5:p80", "tcp", "10.180.0.3:80"}, "I77PXRDZVX7PMWMN"},
		{[]string{"ns1/svc1:p80", "tcp", "10.0.0.0:80"}, "DKGQUZGBKLTPAR56"},
		{[]string{"ns3/svc3:p8081", "tcp", "203.0.113.4:8081"}, "RUVVH7YV3PHQBDOS"},
		{[]string{"ns1/svc1", "tcp"}, "AQI2S6QIMU7PVVRP"},
		{[]string{"ns1/svc1:p80", "tcp", "[fd00:10:180::1]:80"}, "OGYCNMB4EMRUSJ6N"},
		{[]string{"ns2/svc2:dns-udp", "udp"}, "56EGM3ZB4YILLRBZ"},
	} {
		if got := hash16(tc.parts...); got != tc.want {
			t.Errorf("hash16(%q) = %s, want %s", tc.parts, got, tc.want)
		}
	}
	c := ServiceChainsFor("ns1/svc1:p80", "tcp")
	want := ServiceChains{SVC: "KUBE-SVC-XPGD46QRK7WJZT7O", SVL: "KUBE-SVL-XPGD46QRK7WJZT7O", EXT: "KUBE-EXT-XPGD46QRK7WJZT7O", FW: "KUBE-FW-XPGD46QRK7WJZT7O"}
	if c != want {
		t.Errorf("ServiceChainsFor = %+v, want %+v", c, want)
	}
	if got := EndpointChain("ns1/svc1:p80", "tcp", "10.180.0.1:80"); got != "KUBE-SEP-SXIVWICOYRO3J4NJ" {
		t.Errorf("EndpointChain = %s", got)
	}
}

// Parts longer than hash16's buffer on the stack hash as the whole text does.
func TestHash16Long(t *testing.T) {
	ns, name := strings.Repeat("n", 63), strings.Repeat("s", 63)
	spn := ns + "/" + name + ":" + strings.Repeat("p", 15)
	ep := "[fd00:198:18:ffff:ffff:ffff:ffff:ffff]:65535"
	for _, parts := range [][]string{{spn, "sctp", ep}, {spn + spn, "tcp", ep + ep}} {
		sum := sha256.Sum256([]byte(strings.Join(parts, "")))
		want := base32.StdEncoding.EncodeToString(sum[:])[:16]
		if got := hash16(parts...); got != want {
			t.Errorf("hash16 of %d bytes = %s, want %s", len(strings.Join(parts, "")), got, want)
		}
	}
	c := ServiceChainsFor(spn, "sctp")
	h := hash16(spn, "sctp")
	if c.SVC != PrefixSVC+h || c.SVL != PrefixSVL+h || c.EXT != PrefixEXT+h || c.FW != PrefixFW+h {
		t.Errorf("ServiceChainsFor(long) = %+v, hash %s", c, h)
	}
}

// Upstream's TestComputeProbability.
func TestProbability(t *testing.T) {
	var p Probabilities
	for n, want := range map[int]string{
		1: "1.0000000000", 2: "0.5000000000", 3: "0.3333333333", 7: "0.1428571429",
		10: "0.1000000000", 100: "0.0100000000", 1000: "0.0010000000",
		10000: "0.0001000000", 100000: "0.0000100000", 100001: "0.0000099999",
	} {
		if got := p.Get(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestIsServiceChain(t *testing.T) {
	for name, want := range map[string]bool{
		"KUBE-SVC-XPGD46QRK7WJZT7O": true, "KUBE-SEP-SXIVWICOYRO3J4NJ": true, "KUBE-FW-X": true,
		"KUBE-EXT-X": true, "KUBE-SVL-X": true, "KUBE-SERVICES": false, "KUBE-MARK-MASQ": false,
		"KUBE-NODEPORTS": false, "OTHER-SVC-X": false,
	} {
		if got := IsServiceChain(name); got != want {
			t.Errorf("IsServiceChain(%s) = %v", name, got)
		}
	}
}
