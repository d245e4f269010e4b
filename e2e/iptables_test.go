package e2e

import (
	"bytes"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/ir"
)

// cluster is a node namespace with a namespace per endpoint address (each serving on
// its endpoint ports, answering with "IP:port"), a client pod, an external host and a
// sink the node's default route points to.
type cluster struct {
	node, client, external string
	nodeIP, externalIP     netip.Addr
	sm                     *ir.ServiceMap
}

// Addresses of the test topology that the manifests do not give.
var (
	clientIP   = netip.MustParseAddr("198.18.1.250")
	externalIP = netip.MustParseAddr("198.18.0.100")
	sinkNet    = [2]string{"198.18.254.1/30", "198.18.254.2/30"}
)

func buildCluster(l *netlab.Lab, sm *ir.ServiceMap) *cluster {
	c := &cluster{sm: sm, nodeIP: sm.Node.IP, externalIP: externalIP}
	c.node = l.NS("node")
	l.In(c.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	c.external = l.NS("ext")
	l.Link(c.node, c.nodeIP.String()+"/24", c.external, externalIP.String()+"/24")
	sink := l.NS("sink")
	l.Link(c.node, sinkNet[0], sink, sinkNet[1])
	l.In(c.node, "ip", "route", "add", "default", "via", strings.Split(sinkNet[1], "/")[0])
	c.client = l.Pod(c.node, c.nodeIP, clientIP)
	for ip, ports := range endpointAddresses(sm) {
		ns := l.Pod(c.node, c.nodeIP, ip)
		for _, p := range ports {
			l.Serve(ns, netip.AddrPortFrom(ip, p), netip.AddrPortFrom(ip, p).String())
		}
	}
	return c
}

// endpointAddresses lists every endpoint (ready or not) with its ports.
func endpointAddresses(sm *ir.ServiceMap) map[netip.Addr][]uint16 {
	out := map[netip.Addr][]uint16{}
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			for _, e := range p.Endpoints {
				if !containsPort(out[e.IP], e.Port) {
					out[e.IP] = append(out[e.IP], e.Port)
				}
			}
		}
	}
	return out
}

func containsPort(ps []uint16, p uint16) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func findPort(t *testing.T, sm *ir.ServiceMap, ns, name string) *ir.Port {
	t.Helper()
	for _, s := range sm.Services {
		if s.Namespace == ns && s.Name == name {
			return s.Ports[0]
		}
	}
	t.Fatalf("no Service %s/%s in the compiled examples", ns, name)
	return nil
}

func readyEndpoints(p *ir.Port) []string {
	var out []string
	for _, e := range p.Endpoints {
		if e.Ready {
			out = append(out, e.String())
		}
	}
	return out
}

func keys(h map[string]int) []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestIPTablesExamples loads the compiled examples into a node namespace with the real
// iptables-restore (nf_tables and legacy backends) and checks with real connections.
func TestIPTablesExamples(t *testing.T) {
	netlab.Require(t)
	res := testkit.CompileFiles(t, pipeline.Settings{}, "../examples")
	var rules bytes.Buffer
	if err := iptrules.Write(&rules, res.Map, iptrules.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, restore := range []string{"iptables-restore", "iptables-legacy-restore"} {
		t.Run(restore, func(t *testing.T) {
			if _, err := exec.LookPath(restore); err != nil {
				t.Fatalf("%s is not installed: %v", restore, err)
			}
			l := netlab.New(t)
			c := buildCluster(l, res.Map)
			l.Counters(c.node, iptrules.Counters...) // as on a node where kube-proxy ran
			if err := l.Feed(c.node, rules.Bytes(), restore); err != nil {
				t.Fatal(err)
			}
			checkExamples(t, c)
		})
	}
}

func checkExamples(t *testing.T, c *cluster) {
	hello := findPort(t, c.sm, "default", "hello-service")
	vip := netip.AddrPortFrom(hello.ClusterIP, hello.Port)
	t.Run("ClusterIP spreads over ready pods only", func(t *testing.T) {
		for _, from := range []string{c.client, c.node} {
			h := netlab.Histogram(t, from, vip, 60)
			if got, want := keys(h), readyEndpoints(hello); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("from %s: reached %v (%v), want every ready endpoint %v and nothing else", from, got, h, want)
			}
		}
	})
	t.Run("NodePort answers from another host", func(t *testing.T) {
		np := findPort(t, c.sm, "default", "hello-service2")
		h := netlab.Histogram(t, c.external, netip.AddrPortFrom(c.nodeIP, np.NodePort), 30)
		for id := range h {
			if !contains(readyEndpoints(np), id) {
				t.Errorf("NodePort reached %s, not a ready endpoint (%v)", id, h)
			}
		}
	})
	t.Run("no endpoints is refused at once", func(t *testing.T) {
		p := findPort(t, c.sm, "shop", "checkout")
		start := time.Now()
		_, err := netlab.Dial(c.client, netip.AddrPortFrom(p.ClusterIP, p.Port), 3*time.Second)
		if err != netlab.ErrRefused || time.Since(start) > time.Second {
			t.Errorf("got %v after %v; want connection refused at once", err, time.Since(start))
		}
	})
	t.Run("session affinity keeps a client on one pod", func(t *testing.T) {
		p := findPort(t, c.sm, "shop", "cart")
		if p.AffinitySeconds == 0 || len(readyEndpoints(p)) < 2 {
			t.Fatalf("examples changed: shop/cart should have ClientIP affinity and two endpoints")
		}
		h := netlab.Histogram(t, c.client, netip.AddrPortFrom(p.ClusterIP, p.Port), 20)
		if len(h) != 1 {
			t.Errorf("one client reached %v; want one pod", h)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
