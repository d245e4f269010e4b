package trace

import (
	"math/big"
	"net/netip"
	"os"
	"strings"
	"testing"

	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// examplesListing is testdata/examples-1.35.list of nftables/syntax, "nft list ruleset" of the
// examples loaded into a namespace: as text, and parsed.
func examplesListing(t *testing.T) ([]byte, *nftsyntax.Ruleset) {
	t.Helper()
	data, err := os.ReadFile("../nftables/syntax/testdata/examples-1.35.list")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := nftsyntax.ParseBytes("examples.list", data)
	if err != nil {
		t.Fatal(err)
	}
	return data, rs
}

// The tracer reads the table as nft lists it too.
func TestNFTTraceListing(t *testing.T) {
	_, rs := examplesListing(t)
	host := Host{Local: []netip.Addr{netip.MustParseAddr("198.18.0.1")}}
	tr, err := NewNFT(rs.Tables[knftables.IPv4Family], host)
	if err != nil {
		t.Fatal(err)
	}
	pod, outside := netip.MustParseAddr("198.18.1.250"), netip.MustParseAddr("203.0.113.9")
	for _, tc := range []struct {
		name     string
		src, dst string
		port     uint16
		want     string
		masq     bool
		affinity bool
	}{
		{"pod to hello-service", pod.String(), "198.19.43.152", 12345, "198.18.1.11:8080, 198.18.2.12:8080", false, false},
		{"outside to hello-service2's NodePort", outside.String(), "198.18.0.1", 32266, "198.18.1.11:8080, 198.18.2.12:8080", true, false},
		// The node address is inside the examples' clusterCIDR (198.18.0.0/15): not masqueraded.
		{"node to hello-service", "198.18.0.1", "198.19.43.152", 12345, "198.18.1.11:8080, 198.18.2.12:8080", false, false},
		{"pod to checkout, no endpoints", pod.String(), "198.19.0.81", 80, "REJECT", false, false},
		{"pod to a wrong port of a cluster IP", pod.String(), "198.19.43.152", 80, "REJECT", false, false},
		{"pod to an unallocated cluster IP", pod.String(), "198.19.7.7", 80, "DROP", false, false},
		{"pod to cart, affinity", pod.String(), "198.19.0.80", 80, "198.18.1.21:8080, 198.18.2.22:8080", false, true},
	} {
		r, err := tr.Trace(Packet{Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), DPort: tc.port, Proto: "tcp"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Summary() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, r.Summary(), tc.want)
		}
		for _, o := range r.Outcomes {
			if o.Masquerade != tc.masq || o.Affinity != tc.affinity {
				t.Errorf("%s: outcome %s masquerade=%v affinity=%v, want %v %v", tc.name, o.Endpoint, o.Masquerade, o.Affinity, tc.masq, tc.affinity)
			}
			if o.Verdict == DNAT && o.Probability.Cmp(big.NewRat(1, 2)) != 0 {
				t.Errorf("%s: %s with probability %s, want 1/2", tc.name, o.Endpoint, o.Probability)
			}
		}
	}
}

// Per-service chains carry their Service, read from the chain name; endpoint chains
// carry the endpoint from their dnat rule.
func TestNFTServiceLabels(t *testing.T) {
	data, rs := examplesListing(t)
	tr, err := Open([]File{{Name: "examples.list", Data: data}}, Host{Local: []netip.Addr{netip.MustParseAddr("198.18.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.Trace(Packet{Src: netip.MustParseAddr("198.18.1.250"), Dst: netip.MustParseAddr("198.19.43.152"), DPort: 12345, Proto: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	labelled := 0
	for _, o := range r.Outcomes {
		for _, s := range o.Path {
			want := ""
			switch {
			case s.Chain == "services":
			case strings.HasPrefix(s.Chain, "endpoint-"):
				want = "default/hello-service:http -> " + o.Endpoint
			case strings.HasPrefix(s.Chain, "service-") && strings.Contains(s.Chain, "/"):
				want = "default/hello-service:http"
			default:
				continue
			}
			if s.Service != want {
				t.Errorf("%s: service %q, want %q", s.Chain, s.Service, want)
			}
			labelled++
		}
	}
	if labelled < 4 || r.Mode != "nftables" {
		t.Errorf("mode %q, %d labelled steps: %+v", r.Mode, labelled, r.Outcomes)
	}
	if len(rs.Tables) != 1 {
		t.Errorf("tables: %v", rs.Tables)
	}
}
