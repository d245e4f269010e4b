package trace

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// Long chains are indexed by destination address or port (chainIndex), short ones
// dropped and read again (keepShort), and verify traces without paths
// (WithoutPaths): none of it may change a result.
func TestIndexAndPathsChangeNoResult(t *testing.T) {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-NODEPORTS - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	b.WriteString("-A PREROUTING -j KUBE-SERVICES\n-A OUTPUT -j KUBE-SERVICES\n-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n")
	for i := range 40 {
		fmt.Fprintf(&b, "-A KUBE-SERVICES -d 10.96.0.%d/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.1.0.%d:8080\n", i, i)
		fmt.Fprintf(&b, "-A KUBE-NODEPORTS -p tcp -m tcp --dport %d -m statistic --mode random --probability 0.5000000000 -j KUBE-MARK-MASQ\n", 30000+i)
		fmt.Fprintf(&b, "-A KUBE-NODEPORTS -p tcp -m tcp --dport %d -j DNAT --to-destination 10.2.0.%d:8080\n", 30000+i, i)
		if i%10 == 0 {
			b.WriteString("-A KUBE-SERVICES -d 10.96.0.0/24 -p tcp -m tcp --dport 81 -j KUBE-MARK-MASQ\n")
			b.WriteString("-A KUBE-NODEPORTS -p tcp -m tcp --dport 30000:30005 -j KUBE-MARK-MASQ\n")
			b.WriteString("-A KUBE-NODEPORTS -p tcp -m tcp ! --dport 30003 -j KUBE-MARK-MASQ\n")
		}
	}
	b.WriteString("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n")
	text := []byte(b.String())

	trace := func(tr Tracer) []*Result {
		var out []*Result
		for _, dst := range []string{"10.96.0.3:80", "10.96.0.3:81", "10.96.0.39:80", "10.96.1.1:80", "192.168.0.2:30003", "192.168.0.2:30021", "127.0.0.1:30039", "192.168.0.2:31000"} {
			for _, src := range []string{"10.0.0.2", "192.168.0.2"} {
				ap := netip.MustParseAddrPort(dst)
				r, err := tr.Trace(Packet{Src: netip.MustParseAddr(src), Dst: ap.Addr(), DPort: ap.Port(), Proto: "tcp"})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, r)
			}
		}
		return out
	}
	indexed := tracerOf(t, "rules", text, fakeNode)
	if ci, _ := indexed.chain(indexed.rs.Table("nat").Chain("KUBE-NODEPORTS")); ci.byKey == nil || !ci.byPort {
		t.Fatalf("KUBE-NODEPORTS is not indexed by port")
	}
	if ci, _ := indexed.chain(indexed.rs.Table("nat").Chain("KUBE-SERVICES")); ci.byKey == nil || ci.byPort {
		t.Fatalf("KUBE-SERVICES is not indexed by address")
	}
	want := trace(indexed)
	defer func(n int) { indexFrom = n }(indexFrom)
	indexFrom = 1 << 30
	if got := trace(tracerOf(t, "rules", text, fakeNode)); !reflect.DeepEqual(got, want) {
		t.Errorf("indexed chains trace differently from unindexed ones")
	}
	indexFrom = 32
	defer func(n int) { keepShort = n }(keepShort)
	keepShort = 1 // every short chain read again each time it is reached
	if got := trace(tracerOf(t, "rules", text, fakeNode)); !reflect.DeepEqual(got, want) {
		t.Errorf("chains read again trace differently")
	}
	got := trace(WithoutPaths(indexed))
	for i := range want {
		w := *want[i]
		w.Outcomes = append([]Outcome(nil), w.Outcomes...)
		for j := range w.Outcomes {
			if len(w.Outcomes[j].Path) == 0 {
				t.Fatalf("%s: outcome %d has no path", w.Packet, j)
			}
			w.Outcomes[j].Path = nil
		}
		if !reflect.DeepEqual(got[i], &w) {
			t.Errorf("%s: without paths\n got %+v\nwant %+v", w.Packet, got[i].Outcomes, w.Outcomes)
		}
	}
}
