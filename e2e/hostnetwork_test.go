package e2e

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
)

// TestHostNetworkEndpointKeepsSource holds the tracers and verify's service map to
// the kernel where a NodePort's endpoint is the node itself. kube-proxy marks such
// external traffic for masquerade, but masquerading happens in nat POSTROUTING, which
// a packet the node delivers to itself never passes: the hostNetwork endpoint sees
// the client's own address, while the Pod behind a veth sees the node's. Both modes
// are loaded with the real tools, connections go from another host to the node port,
// and the rules read back from the kernel must trace to the same.
func TestHostNetworkEndpointKeepsSource(t *testing.T) {
	netlab.Require(t)
	for _, mode := range []compiler.Mode{compiler.IPTables, compiler.NFTables} {
		t.Run(string(mode), func(t *testing.T) {
			res := testkit.Compile(t, "hostnetwork.yaml", testkit.HostNetworkNodePort, pipeline.Settings{Mode: mode})
			l := netlab.New(t)
			node, client := l.NS("node"), l.NS("host")
			nodeIP, clientIP := netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.77")
			l.Link(node, "198.18.1.1/24", client, "198.18.1.77/24")
			l.In(node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
			pod := netip.MustParseAddr("198.18.5.5")
			l.ServeSeen(l.Pod(node, nodeIP, pod), netip.AddrPortFrom(pod, 9100))
			l.ServeSeen(node, netip.AddrPortFrom(nodeIP, 9100))

			var rules bytes.Buffer
			var listing func() []trace.File
			switch mode {
			case compiler.IPTables:
				l.Counters(node, iptrules.Counters...)
				if err := iptrules.Write(&rules, res.Map, iptrules.Options{}); err != nil {
					t.Fatal(err)
				}
				if err := l.Feed(node, rules.Bytes(), "iptables-restore"); err != nil {
					t.Fatal(err)
				}
				listing = func() []trace.File {
					return []trace.File{{Name: "iptables-save", Data: []byte(l.In(node, "iptables-save"))}}
				}
			case compiler.NFTables:
				if err := nftrules.Write(&rules, res.Map, nftrules.Options{}); err != nil {
					t.Fatal(err)
				}
				if err := l.Feed(node, rules.Bytes(), "nft", "-f", "-"); err != nil {
					t.Fatal(err)
				}
				listing = func() []trace.File {
					return []trace.File{{Name: "nft list ruleset", Data: []byte(l.In(node, "nft", "list", "ruleset"))}}
				}
			}

			// What each endpoint saw as the source, over bounded tries until both
			// have answered (each connection picks one at random).
			seen := map[string]string{}
			to := netip.AddrPortFrom(nodeIP, 30860)
			for i := 0; i < 60 && len(seen) < 2; i++ {
				line, err := netlab.Dial(client, to, 2*time.Second)
				if err != nil {
					t.Fatalf("connecting to the node port %s from another host: %v", to, err)
				}
				if f := strings.Fields(line); len(f) == 2 {
					seen[f[0]] = f[1]
				}
			}
			want := map[string]string{"198.18.1.1:9100": clientIP.String(), "198.18.5.5:9100": nodeIP.String()}
			for ep, src := range want {
				if seen[ep] != src {
					t.Errorf("endpoint %s saw the connection from %q, want %s (all seen: %v)", ep, seen[ep], src, seen)
				}
			}

			// The kernel's own rules, traced, agree with the service map, and say
			// the same of each endpoint as the connections did.
			tr, err := trace.Open(listing(), verify.HostOf(res.Map))
			if err != nil {
				t.Fatal(err)
			}
			mr := verify.CheckTracer(mode, res.Map, res.Resolved.Cluster, tr)
			for _, d := range mr.Disagreements {
				t.Errorf("%s", d)
			}
			r, err := tr.Trace(trace.Packet{Proto: "tcp", Src: clientIP, Dst: nodeIP, DPort: 30860})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range r.Outcomes {
				if masq := o.Endpoint != "198.18.1.1:9100"; o.Verdict != trace.DNAT || o.Masquerade != masq {
					t.Errorf("trace from another host: %s %s masquerade %v, want DNAT with masquerade %v", o.Verdict, o.Endpoint, o.Masquerade, masq)
				}
			}
			if len(r.Outcomes) != 2 {
				t.Errorf("trace from another host: %d outcomes, want the two endpoints: %+v", len(r.Outcomes), r.Outcomes)
			}
		})
	}
}
