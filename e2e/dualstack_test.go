package e2e

import (
	"bufio"
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/netlab"
)

// dualCluster is a dual-stack node: two Services of both families (one a NodePort)
// and one of IPv6 only, their endpoints two pods with an address of each family.
const dualCluster = `apiVersion: v1
kind: Node
metadata: {name: node1}
spec: {podCIDRs: [198.18.1.0/24, "fd00:198:18:1::/64"]}
status:
  addresses:
  - {type: InternalIP, address: 198.18.0.1}
  - {type: InternalIP, address: "fd00:198:18::1"}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: kubernetes}
spec: {cidrs: [198.19.0.0/24, "fd00:198:19::/112"]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  clusterIPs: [198.19.0.10, "fd00:198:19::10"]
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  ipFamilyPolicy: PreferDualStack
  clusterIPs: [198.19.0.11, "fd00:198:19::11"]
  ports: [{name: http, port: 81, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: v6only, namespace: shop}
spec:
  ipFamilies: [IPv6]
  clusterIPs: ["fd00:198:19::20"]
  ports: [{name: http, port: 80, targetPort: 9090}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-v4, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [198.18.1.11], nodeName: node1}
- {addresses: [198.18.1.12], nodeName: node1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-v6, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv6
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: ["fd00:198:18:1::11"], nodeName: node1}
- {addresses: ["fd00:198:18:1::12"], nodeName: node1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: api-v4, namespace: shop, labels: {kubernetes.io/service-name: api}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [198.18.1.12], nodeName: node1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: api-v6, namespace: shop, labels: {kubernetes.io/service-name: api}}
addressType: IPv6
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: ["fd00:198:18:1::12"], nodeName: node1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v6only-a, namespace: shop, labels: {kubernetes.io/service-name: v6only}}
addressType: IPv6
ports: [{name: http, port: 9090}]
endpoints:
- {addresses: ["fd00:198:18:1::11"], nodeName: node1}
`

// dualNode is one lab for dual-stack tests: the node (198.18.0.1, fd00:198:18::1), a
// client host on its link (198.18.0.2, fd00:198:18::2) that routes the service
// ranges through it, and two pods with an address of each family, each serving on
// every address and port with "IP:port".
type dualNode struct {
	*node
	client string
}

func newDualNode(t *testing.T) *dualNode {
	l := netlab.New(t)
	n := &node{t: t, l: l, c: &cluster{}, dir: t.TempDir(), bin: svcgenBinary(t)}
	n.lock = filepath.Join(n.dir, "..", "apply.lock")
	n.write("cluster.yaml", dualCluster)
	n.c.node = l.NS("node")
	l.In(n.c.node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	client := l.NS("client")
	nodeDev, clientDev := l.Link(n.c.node, "198.18.0.1/24", client, "198.18.0.2/24")
	l.In(n.c.node, "ip", "addr", "add", "fd00:198:18::1/64", "dev", nodeDev, "nodad")
	l.In(client, "ip", "addr", "add", "fd00:198:18::2/64", "dev", clientDev, "nodad")
	l.In(client, "ip", "route", "add", "198.19.0.0/24", "via", "198.18.0.1")
	l.In(client, "ip", "route", "add", "fd00:198:19::/112", "via", "fd00:198:18::1")
	for _, pod := range [][2]string{{"198.18.1.11", "fd00:198:18:1::11"}, {"198.18.1.12", "fd00:198:18:1::12"}} {
		ip4, ip6 := netip.MustParseAddr(pod[0]), netip.MustParseAddr(pod[1])
		ns := l.DualPod(n.c.node, netip.MustParseAddr("198.18.0.1"), ip4, ip6)
		for _, ip := range []netip.Addr{ip4, ip6} {
			for _, port := range []uint16{8080, 9090} {
				l.Serve(ns, netip.AddrPortFrom(ip, port), netip.AddrPortFrom(ip, port).String())
			}
		}
	}
	return &dualNode{node: n, client: client}
}

// reach connects from the client to every frontend of both families (at most 40
// bounded connections each) and checks that each reaches all its endpoints, of the
// frontend's own family, and nothing else.
func (n *dualNode) reach() {
	n.t.Helper()
	for to, want := range map[string][]string{
		"198.19.0.10:80":         {"198.18.1.11:8080", "198.18.1.12:8080"},
		"[fd00:198:19::10]:80":   {"[fd00:198:18:1::11]:8080", "[fd00:198:18:1::12]:8080"},
		"198.18.0.1:30080":       {"198.18.1.11:8080", "198.18.1.12:8080"},
		"[fd00:198:18::1]:30080": {"[fd00:198:18:1::11]:8080", "[fd00:198:18:1::12]:8080"},
		"198.19.0.11:81":         {"198.18.1.12:8080"},
		"[fd00:198:19::11]:81":   {"[fd00:198:18:1::12]:8080"},
		"[fd00:198:19::20]:80":   {"[fd00:198:18:1::11]:9090"},
	} {
		seen := map[string]bool{}
		for i := 0; i < 40 && len(seen) < len(want); i++ {
			id, err := netlab.Dial(n.client, netip.MustParseAddrPort(to), 2*time.Second)
			if err != nil {
				n.t.Fatalf("connection %d to %s: %v", i+1, to, err)
			}
			if !contains(want, id) {
				n.t.Fatalf("%s answered from %s, want one of %v", to, id, want)
			}
			seen[id] = true
		}
		if len(seen) != len(want) {
			n.t.Errorf("%s reached %v in 40 connections, want all of %v", to, seen, want)
		}
	}
}

// TestApplyDualStack: in one namespace lab, apply loads a dual-stack cluster's rules
// of both families in one run, in iptables mode and then in nftables mode; the IPv4
// and IPv6 ClusterIPs and NodePorts of the same Services answer from endpoints of
// their own family; a second apply changes nothing; audit and diff find both families
// in step; cleanup removes both. Last, on the same node with IPv6 disabled, apply
// leaves IPv6 out with a warning, as kube-proxy falls back to single-stack.
func TestApplyDualStack(t *testing.T) {
	n := newDualNode(t)
	for _, mode := range []struct {
		name       string
		v4, v6     string // what apply calls each family's backend
		hasV4Rules func() bool
		hasV6Rules func() bool
	}{
		{"iptables", "iptables:", "ip6tables:",
			func() bool { return strings.Contains(n.l.In(n.c.node, "iptables-save"), "KUBE-") },
			func() bool { return strings.Contains(n.l.In(n.c.node, "ip6tables-save"), "KUBE-") }},
		{"nftables", "nftables:", "nftables (IPv6):",
			func() bool { return strings.Contains(n.l.In(n.c.node, "nft", "list", "tables"), "table ip kube-proxy") },
			func() bool {
				return strings.Contains(n.l.In(n.c.node, "nft", "list", "tables"), "table ip6 kube-proxy")
			}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			n.t = t
			stderr := n.apply("-m", mode.name)
			for _, fam := range []string{mode.v4, mode.v6} {
				if !strings.Contains(stderr, "\n"+fam+" ") && !strings.HasPrefix(stderr, fam+" ") {
					t.Errorf("apply says nothing of %s:\n%s", fam, stderr)
				}
			}
			if !mode.hasV4Rules() || !mode.hasV6Rules() {
				t.Fatalf("after apply, IPv4 rules %v, IPv6 rules %v", mode.hasV4Rules(), mode.hasV6Rules())
			}
			n.reach()
			if again := n.apply("-m", mode.name); strings.Count(again, "no changes") != 2 {
				t.Errorf("a second apply changed something:\n%s", again)
			}
			if out, stderr, err := n.svcgen("audit", "-f", n.dir, "-m", mode.name, "--live"); err != nil || !strings.Contains(stderr, "audit: 5 service ports, all in step") {
				t.Errorf("audit: %v\n%s%s", err, out, stderr)
			}
			if out, stderr, err := n.svcgen("diff", "--live", "-f", n.dir, "-m", mode.name); err != nil || out != "" {
				t.Errorf("diff --live: %v\n%s%s", err, out, stderr)
			}
			if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
				t.Fatalf("cleanup: %v\n%s", err, stderr)
			}
			if mode.hasV4Rules() || mode.hasV6Rules() {
				t.Errorf("after cleanup, IPv4 rules %v, IPv6 rules %v", mode.hasV4Rules(), mode.hasV6Rules())
			}
			if _, err := netlab.Dial(n.client, netip.MustParseAddrPort("[fd00:198:19::10]:80"), time.Second); err == nil {
				t.Error("the IPv6 ClusterIP still answers after cleanup")
			}
		})
	}
	n.t = t
	if t.Failed() {
		return
	}
	t.Run("watch", func(t *testing.T) { n.t = t; n.watchBoth() })
	n.t = t

	// A host without IPv6: kube-proxy runs single-stack, and so does apply.
	n.l.In(n.c.node, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	stderr := n.apply("-m", "nftables")
	if !strings.Contains(stderr, "warning: IPv6 left out, as kube-proxy runs single-stack on this host: no support for the IP family on this host: IPv6 is disabled (net.ipv6.conf.all.disable_ipv6 = 1)") {
		t.Errorf("apply on a node without IPv6:\n%s", stderr)
	}
	if tables := n.l.In(n.c.node, "nft", "list", "tables"); !strings.Contains(tables, "table ip kube-proxy") || strings.Contains(tables, "table ip6 kube-proxy") {
		t.Errorf("apply on a node without IPv6 made: %s", tables)
	}
	if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, stderr)
	}
}

// watchBoth: apply --watch keeps both families in step in one process: its first sync
// loads both, an interval with nothing changed reads neither (each family's own
// nf_tables generation tracking), and a rule of one family deleted by hand is put
// back, logged with its family.
func (n *dualNode) watchBoth() {
	t := n.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.c.node, n.bin, "apply", "-f", n.dir, "-m", "nftables",
		"--apply-lock", n.lock, "--watch", "--interval", "1s", "--listen", "")
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
			t.Errorf("cleanup: %v\n%s", err, stderr)
		}
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLog := func(what string, parts ...string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("apply --watch ended before %s", what)
				}
				all := true
				for _, p := range parts {
					all = all && strings.Contains(l, p)
				}
				if all {
					return
				}
			case <-deadline:
				t.Fatalf("no log line for %s in 30s", what)
			}
		}
	}
	waitLog("IPv4's first sync", "msg=sync", "family=IPv4 reason=start", "changed=true")
	waitLog("IPv6's first sync", "msg=sync", "family=IPv6 reason=start", "changed=true")
	n.reach()
	waitLog("an IPv4 interval that skips the read", "family=IPv4 reason=interval", "changed=false", "read=skipped")
	waitLog("an IPv6 interval that skips the read", "family=IPv6 reason=interval", "changed=false", "read=skipped")

	// The IPv6 NodePort's element deleted by hand comes back, and only IPv6 changes.
	n.l.In(n.c.node, "nft", "delete", "element", "ip6", "kube-proxy", "service-nodeports", "{", "tcp", ".", "30080", "}")
	waitLog("the IPv6 repair", "family=IPv6 reason=interval", "changed=true", "drift=repaired")
	n.reach()
	if _, stderr, err := n.svcgen("audit", "-f", n.dir, "-m", "nftables", "--live"); err != nil {
		t.Errorf("audit after the repair: %v\n%s", err, stderr)
	}
}

// TestApplyDualStackEmptyFamily: an input that keeps the IPv4 Services but has no IPv6
// one any more would delete every IPv6 Service's rules on a dual-stack node: apply
// refuses it (naming the family), as it refuses an empty input, unless
// --allow-empty.
func TestApplyDualStackEmptyFamily(t *testing.T) {
	n := newDualNode(t).node
	stderr := n.apply()
	if !strings.Contains(stderr, "ip6tables: ") {
		t.Fatalf("the dual-stack apply:\n%s", stderr)
	}
	before, before4 := n.l.In(n.c.node, "ip6tables-save"), n.l.In(n.c.node, "iptables-save")
	v4only := strings.NewReplacer("ipFamilyPolicy: RequireDualStack", "ipFamilyPolicy: SingleStack\n  ipFamilies: [IPv4]",
		`clusterIPs: [198.19.0.10, "fd00:198:19::10"]`, "clusterIPs: [198.19.0.10]").Replace(dualCluster)
	v4only = v4only[:strings.Index(v4only, "---\napiVersion: v1\nkind: Service\nmetadata: {name: api")]
	file := filepath.Join(t.TempDir(), "v4only.yaml")
	if err := os.WriteFile(file, []byte(v4only), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := n.svcgen("apply", "-f", file, "--apply-lock", n.lock)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr, "ip6tables: refused: the input has no IPv6 Service and the node has IPv6 rules for 3 Services") {
		t.Errorf("apply of an input without IPv6 Services: %v\n%s", err, stderr)
	}
	if got := n.l.In(n.c.node, "ip6tables-save"); stripCounters(got) != stripCounters(before) {
		t.Errorf("the refused apply changed the IPv6 rules:\n%s", got)
	}
	// Nor the IPv4 rules, though the IPv4 part of the input alone would pass: every
	// family is checked before any is loaded.
	if got := n.l.In(n.c.node, "iptables-save"); stripCounters(got) != stripCounters(before4) {
		t.Errorf("the refused apply changed the IPv4 rules:\n%s", got)
	}
	if _, stderr, err := n.svcgen("apply", "-f", file, "--apply-lock", n.lock, "--allow-empty"); err != nil {
		t.Fatalf("--allow-empty: %v\n%s", err, stderr)
	}
	if got := n.l.In(n.c.node, "ip6tables-save"); strings.Contains(got, "KUBE-SVC-") {
		t.Errorf("--allow-empty kept IPv6 Services' rules:\n%s", got)
	}
}

// stripCounters drops iptables-save's comment lines and chain counters.
func stripCounters(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, ":") {
			l = l[:strings.LastIndex(l, " ")]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// v4Cluster is an IPv4-only cluster on the dual-stack lab's node: a Node with an
// IPv4 address only, and a NodePort Service with two endpoints.
const v4Cluster = `apiVersion: v1
kind: Node
metadata: {name: node1}
spec: {podCIDR: 198.18.1.0/24}
status: {addresses: [{type: InternalIP, address: 198.18.0.1}]}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: kubernetes}
spec: {cidrs: [198.19.0.0/24]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  clusterIP: 198.19.0.10
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-v4, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: [198.18.1.11], nodeName: node1}
- {addresses: [198.18.1.12], nodeName: node1}
`

// TestApplyOneFamilyOnDualHost: kube-proxy runs its dual-stack proxier wherever the
// host supports both families, whatever the cluster has; so does apply. An IPv4-only
// cluster on a node that has IPv6 gets kube-proxy's IPv6 fixed rules too (no
// Service's), a second apply changes neither family, audit and diff --live find both
// in step, and cleanup removes both. --ip-family ipv4 keeps to IPv4; on a host
// without IPv6, IPv4 alone is programmed, without a warning: there was no IPv6
// Service to leave out.
func TestApplyOneFamilyOnDualHost(t *testing.T) {
	n := newDualNode(t)
	n.write("cluster.yaml", v4Cluster)
	for _, mode := range []struct {
		name   string
		v6     string // what apply calls the IPv6 backend
		fixed  func() string
		hasSvc string // in fixed's output when an IPv6 Service's rules are there
	}{
		{"iptables", "ip6tables:", func() string { return n.l.In(n.c.node, "ip6tables-save") }, "KUBE-SVC-"},
		{"nftables", "nftables (IPv6):", func() string {
			return n.l.In(n.c.node, "nft", "list", "ruleset", "ip6")
		}, "fd00:198:19"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			n.t = t
			stderr := n.apply("-m", mode.name)
			if !strings.Contains(stderr, mode.v6+" ") {
				t.Errorf("apply of an IPv4 cluster on a dual-stack host says nothing of IPv6:\n%s", stderr)
			}
			fixed := mode.fixed()
			if !strings.Contains(fixed, "KUBE-SERVICES") && !strings.Contains(fixed, "chain services") {
				t.Errorf("no IPv6 fixed rules after apply:\n%s", fixed)
			}
			if strings.Contains(fixed, mode.hasSvc) {
				t.Errorf("IPv6 rules of a Service, from an IPv4 cluster:\n%s", fixed)
			}
			for to, want := range map[string][]string{
				"198.19.0.10:80":   {"198.18.1.11:8080", "198.18.1.12:8080"},
				"198.18.0.1:30080": {"198.18.1.11:8080", "198.18.1.12:8080"},
			} {
				id, err := netlab.Dial(n.client, netip.MustParseAddrPort(to), 2*time.Second)
				if err != nil || !contains(want, id) {
					t.Errorf("%s: %q, %v; want one of %v", to, id, err, want)
				}
			}
			if again := n.apply("-m", mode.name); strings.Count(again, "no changes") != 2 {
				t.Errorf("a second apply changed something:\n%s", again)
			}
			if out, stderr, err := n.svcgen("audit", "-f", n.dir, "-m", mode.name, "--live"); err != nil {
				t.Errorf("audit: %v\n%s%s", err, out, stderr)
			}
			if out, stderr, err := n.svcgen("diff", "--live", "-f", n.dir, "-m", mode.name); err != nil || out != "" {
				t.Errorf("diff --live: %v\n%s%s", err, out, stderr)
			}
			if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
				t.Fatalf("cleanup: %v\n%s", err, stderr)
			}
			if fixed := mode.fixed(); strings.Contains(fixed, "KUBE-") || strings.Contains(fixed, "kube-proxy") {
				t.Errorf("after cleanup, IPv6 rules remain:\n%s", fixed)
			}
		})
	}
	n.t = t
	if t.Failed() {
		return
	}
	// Asked for IPv4 alone, apply keeps to it.
	if stderr := n.apply("-m", "nftables", "--ip-family", "ipv4"); strings.Contains(stderr, "IPv6") {
		t.Errorf("apply --ip-family ipv4 spoke of IPv6:\n%s", stderr)
	}
	if tables := n.l.In(n.c.node, "nft", "list", "tables"); strings.Contains(tables, "table ip6 kube-proxy") {
		t.Errorf("apply --ip-family ipv4 made: %s", tables)
	}
	// Comparing that node with the manifests passes IPv6 over: no IPv6 Service in the
	// input, no IPv6 rule on the node.
	for _, cmd := range [][]string{{"audit", "--live"}, {"diff", "--live"}} {
		out, stderr, err := n.svcgen(append(cmd, "-f", n.dir, "-m", "nftables")...)
		if err != nil || out != "" || !strings.Contains(stderr, cmd[0]+": IPv6 passed over") {
			t.Errorf("%s after apply --ip-family ipv4: %v\n%s%s", cmd, err, out, stderr)
		}
	}
	// No IPv6 on the host: IPv4 alone, and nothing to warn of.
	n.l.In(n.c.node, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	if stderr := n.apply("-m", "nftables"); strings.Contains(stderr, "warning") {
		t.Errorf("apply of an IPv4 cluster on a host without IPv6 warned:\n%s", stderr)
	}
	if tables := n.l.In(n.c.node, "nft", "list", "tables"); !strings.Contains(tables, "table ip kube-proxy") || strings.Contains(tables, "table ip6 kube-proxy") {
		t.Errorf("apply on a node without IPv6 made: %s", tables)
	}
	if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, stderr)
	}
}
