package trace

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/text/*.txt (read the diff before committing it)")

// The tree form of traces through upstream's TestTracePacket ruleset, compared with
// golden files.
func TestWriteText(t *testing.T) {
	tr := loadTracer(t, "testdata/tracepacket.rules")
	for _, tc := range []struct {
		file, src, dst string
		port           uint16
		source         Source
	}{
		{"two-endpoints", "10.0.0.2", "172.30.0.44", 80, Source{Locality: LocalPod, Name: "ns/client"}},
		{"external-ip-masquerade", "192.168.0.2", "192.168.99.22", 80, Source{Locality: FromNode}},
		{"reject", "10.0.0.2", "172.30.0.46", 80, Source{}},
		{"no-match", "10.0.0.2", "10.0.0.3", 80, Source{Locality: Outside}},
	} {
		r, err := tr.Trace(Packet{Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), DPort: tc.port, Proto: "tcp"})
		if err != nil {
			t.Fatal(err)
		}
		r.Source = tc.source
		var b bytes.Buffer
		if err := WriteText(&b, r); err != nil {
			t.Fatal(err)
		}
		testkit.CompareGolden(t, filepath.Join("testdata", "text", tc.file+".txt"), b.Bytes(), *update)
	}
}

// Every hashed chain on a path carries its Service, and only chains whose name is the
// hash of that Service port do.
func TestServiceLabels(t *testing.T) {
	tr := loadTracer(t, "testdata/tracepacket.rules")
	r, err := tr.Trace(Packet{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("172.30.0.44"), DPort: 80, Proto: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"KUBE-SVC-4SW47YFZTEDKD3PK": "ns4/svc4:p80",
		"KUBE-SEP-UKSFD7AGPMPPLUHC": "ns4/svc4:p80 -> 10.180.0.4:80",
		"KUBE-SEP-C6EBXVWJJZMIWKLZ": "ns4/svc4:p80 -> 10.180.0.5:80",
		"KUBE-SERVICES":             "",
		"PREROUTING":                "",
	}
	seen := 0
	for _, o := range r.Outcomes {
		for _, s := range o.Path {
			if w, ok := want[s.Chain]; ok {
				seen++
				if s.Service != w {
					t.Errorf("%s %s: service %q, want %q", s.Table, s.Chain, s.Service, w)
				}
			}
		}
	}
	if seen < 5 {
		t.Errorf("the paths passed %d of the expected chains: %+v", seen, r.Outcomes)
	}

	// Large-cluster mode: endpoint chains without comments take the Service from the
	// chain that jumps to them. A comment that names the wrong Service labels nothing.
	rules := `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
-A KUBE-SERVICES -m comment --comment "ns9/other:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
-A KUBE-SVC-XPGD46QRK7WJZT7O -j KUBE-SEP-SXIVWICOYRO3J4NJ
-A KUBE-SEP-SXIVWICOYRO3J4NJ -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
COMMIT
`
	lt := tracerOf(t, "rules", []byte(rules), Host{})
	for chain, w := range map[string]string{
		"KUBE-SVC-XPGD46QRK7WJZT7O": "ns1/svc1:p80",
		"KUBE-SEP-SXIVWICOYRO3J4NJ": "ns1/svc1:p80 -> 10.180.0.1:80",
		"KUBE-SVC-GNZBNJ2PO5MGZ6GT": "", // the hash of ns2/svc2:p80, not of ns9/other:p80
	} {
		if got := lt.label(chain); got != w {
			t.Errorf("%s: label %q, want %q", chain, got, w)
		}
	}
}

// The JSON form carries exact fractions and every step.
func TestWriteJSON(t *testing.T) {
	tr := loadTracer(t, "testdata/tracepacket.rules")
	r, err := tr.Trace(Packet{Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("172.30.0.44"), DPort: 80, Proto: "tcp", InIface: "cbr0"})
	if err != nil {
		t.Fatal(err)
	}
	r.Source = Source{Locality: LocalPod, Name: "ns/client"}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var got jsonResult
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Mode != "iptables" || got.Packet.Dst != "172.30.0.44:80" || got.Packet.InIface != "cbr0" ||
		got.Source == nil || got.Source.Locality != "local-pod" || got.Source.Name != "ns/client" {
		t.Errorf("header: %+v", got)
	}
	if len(got.Outcomes) != 2 {
		t.Fatalf("outcomes: %+v", got.Outcomes)
	}
	for i, ep := range []string{"10.180.0.4:80", "10.180.0.5:80"} {
		o := got.Outcomes[i]
		if o.Verdict != "DNAT" || o.Endpoint != ep || o.Probability != "1/2" || o.Masquerade {
			t.Errorf("outcome %d: %+v", i, o)
		}
		last := o.Path[len(o.Path)-1]
		if last.Chain != "KUBE-POSTROUTING" {
			t.Errorf("outcome %d ends in %s", i, last.Chain)
		}
	}
	first := got.Outcomes[0].Path
	for _, s := range first {
		if s.Chain == "KUBE-SVC-4SW47YFZTEDKD3PK" && (s.Probability != "1/2" || !strings.Contains(s.Rule, "--probability 0.5000000000")) {
			t.Errorf("dispatch step: %+v", s)
		}
	}
}
