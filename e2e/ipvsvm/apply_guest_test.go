package ipvsvm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/modes"
)

// The apply tests run in namespaces of a lab of their own inside the guest (the node,
// the client, one per endpoint), so they share nothing with the script tests.
// applyHead is their cluster without its EndpointSlices.
var applyHead = guestHead + serviceYAML("keep", "198.19.0.12", 80, 7000)

// broken adds a Service whose endpoint is the broadcast address of the node's
// 198.18.3.0/24: the kernel refuses such a real server (EINVAL).
var broken = serviceYAML("bad", "198.19.0.13", 80, 80) + sliceYAML("demo", "bad", "tcp", 80, "TCP", "198.18.3.255@node1")

// applyMap is the apply tests' cluster with web's endpoints (all on node1) and extra
// documents.
func applyMap(t *testing.T, endpoints []string, extra string) *ir.ServiceMap {
	t.Helper()
	var web []string
	for _, e := range endpoints {
		web = append(web, e+"@node1")
	}
	y := applyHead + sliceYAML("demo", "web", "http", 8080, "TCP", web...) + sliceYAML("demo", "keep", "tcp", 7000, "TCP", "198.18.1.9@node1") + extra
	return testkit.Compile(t, "apply.yaml", y, pipeline.Settings{}).Map
}

// applyLab is the topology of TestGuestApply.
type applyLab struct {
	*guest
	endpoints map[string]string // address -> its namespace, which web's servers answer with
}

// applyTopology makes the node namespace with another tool's rules and a virtual
// server inside excludeCIDRs, the client, and one namespace per endpoint.
func applyTopology(t *testing.T) *applyLab {
	g, _ := newGuest(t)
	a, l := &applyLab{guest: g, endpoints: map[string]string{}}, g.l
	l.In(a.node, "ip", "addr", "add", "198.18.3.1/24", "dev", "lo") // makes 198.18.3.255 a broadcast address
	for _, ip := range []string{"198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.9"} {
		ns := l.Pod(a.node, nodeIP, netip.MustParseAddr(ip))
		a.endpoints[ip] = ns
		if ip == "198.18.1.9" {
			l.ServeEcho(ns, netip.MustParseAddrPort(ip+":7000"), "keep")
		} else {
			l.Serve(ns, netip.MustParseAddrPort(ip+":8080"), ns)
		}
	}
	l.In(a.node, "iptables", "-t", "nat", "-N", "OTHER-TOOL")
	l.In(a.node, "iptables", "-t", "nat", "-A", "OTHER-TOOL", "-d", "198.18.9.9", "-j", "RETURN")
	l.In(a.node, "iptables", "-t", "nat", "-A", "PREROUTING", "-j", "OTHER-TOOL")
	l.In(a.node, "ipvsadm", "-A", "-t", "198.51.100.7:80", "-s", "rr")
	return a
}

// nodeState is what the node namespace holds: IPVS, sets, kube-ipvs0, tables.
func (a *applyLab) nodeState() string {
	var b strings.Builder
	b.WriteString(a.in("ipvsadm", "-Sn"))
	b.WriteString(a.in("ipset", "save"))
	b.WriteString(a.in("ip", "-o", "addr", "show"))
	for _, l := range strings.Split(a.in("iptables-save"), "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(strings.TrimSuffix(l, " [0:0]") + "\n")
		}
	}
	return b.String()
}

func TestGuestApply(t *testing.T) {
	insideGuest(t)
	lab := applyTopology(t)
	ctx := context.Background()
	a := &apply.Applier{Backend: apply.NewIPVS("IPv4", 5*time.Second)}
	sync := func(sm *ir.ServiceMap, opts apply.SyncOptions) (*apply.Result, error) {
		var res *apply.Result
		err := netlab.InNS(lab.node, func() (err error) {
			res, err = a.Sync(ctx, sm, opts)
			return err
		})
		return res, err
	}
	three := applyMap(t, []string{"198.18.1.1", "198.18.1.2", "198.18.1.3"}, "")
	res, err := sync(three, apply.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first apply: %s", res.Summary.Text)
	want := ipvsrules.Build(three)
	saved := lab.l.In(lab.node, "ipvsadm", "-Sn")
	for _, vs := range want.Services {
		if !strings.Contains(saved, ipvssyntax.ServiceLine(vs)) {
			t.Errorf("ipvsadm -Sn lacks %s:\n%s", ipvssyntax.ServiceLine(vs), saved)
		}
	}
	for _, keep := range []string{"-A -t 198.51.100.7:80 -s rr"} {
		if !strings.Contains(saved, keep) {
			t.Errorf("the virtual server in excludeCIDRs is gone:\n%s", saved)
		}
	}
	if tables := lab.l.In(lab.node, "iptables-save", "-t", "nat"); !strings.Contains(tables, "-A PREROUTING -j OTHER-TOOL") || !strings.Contains(tables, "-A KUBE-SERVICES") {
		t.Errorf("nat table:\n%s", tables)
	}
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		id, err := netlab.Dial(lab.client, clusterIP, 3*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s: %v", i+1, clusterIP, err)
		}
		seen[id] = true
	}
	if len(seen) != 3 {
		t.Errorf("connections reached %v, want all three real servers", seen)
	}

	// A second apply, reading the node again, changes nothing.
	if res, err := sync(three, apply.SyncOptions{Reread: true}); err != nil || res.Changed {
		t.Errorf("second apply: %v changed=%v %s", err, res != nil && res.Changed, res.Summary.Text)
	}

	// A connection to keep stays up while web loses an endpoint and gains none.
	conn, err := netlab.Connect(lab.client, netip.MustParseAddrPort("198.19.0.12:80"), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if l, err := r.ReadString('\n'); err != nil || l != "keep\n" {
		t.Fatalf("keep: %q %v", l, err)
	}
	two := applyMap(t, []string{"198.18.1.1", "198.18.1.3"}, "")
	res, err = sync(two, apply.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary.Text, "0 virtual servers added, 0 updated, 0 deleted") {
		t.Errorf("one endpoint removed: %s", res.Summary.Text)
	}
	fmt.Fprintln(conn, "still there?")
	if l, err := r.ReadString('\n'); err != nil || l != "still there?\n" {
		t.Errorf("the connection to keep did not survive: %q %v", l, err)
	}
	for i := 0; i < 4; i++ {
		if id, err := netlab.Dial(lab.client, clusterIP, 3*time.Second); err != nil || id == lab.endpoints["198.18.1.2"] {
			t.Errorf("connection %d after the change: %q %v", i+1, id, err)
		}
	}

	// The kernel refuses a real server: everything goes back as it was.
	before := lab.nodeState()
	_, err = sync(applyMap(t, []string{"198.18.1.1", "198.18.1.2"}, broken), apply.SyncOptions{})
	var le *apply.LoadError
	if !errors.As(err, &le) || le.Rollback != nil || !strings.Contains(le.Service, "demo/bad:tcp") || !strings.Contains(le.Rule, "198.18.3.255") {
		t.Fatalf("apply of a refused real server: %v", err)
	}
	t.Logf("refused: %v", err)
	if after := lab.nodeState(); after != before {
		t.Errorf("the failed apply left the node changed:\n%s\nwant\n%s", after, before)
	}

	// Cleanup leaves the other tool's rules and the excluded virtual server.
	err = netlab.InNS(lab.node, func() error {
		for _, b := range modes.Cleaners(5 * time.Second) {
			if _, err := apply.Cleanup(ctx, b, nil, false); err != nil {
				return fmt.Errorf("%s: %w", b.Name(), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	left := lab.nodeState()
	for _, gone := range []string{"KUBE-", "198.19.0.10", ipvssyntax.DummyInterface} {
		if strings.Contains(left, gone) {
			t.Errorf("after cleanup the node still has %s:\n%s", gone, left)
		}
	}
	for _, kept := range []string{"-A PREROUTING -j OTHER-TOOL", "-A -t 198.51.100.7:80 -s rr"} {
		if !strings.Contains(left, kept) {
			t.Errorf("cleanup removed %q:\n%s", kept, left)
		}
	}
}

// Graceful termination on the real kernel, with applyYAML's web: apply sets a real
// server that is no longer wanted but has an open TCP connection to weight 0 (the
// connection goes on, new ones avoid it), leaves it so while the connection is open,
// and a later apply deletes it once the kernel counts no connection to it.
func TestGuestApplyDrains(t *testing.T) {
	insideGuest(t)
	g, _ := newGuest(t)
	keep, gone := "198.18.1.5", "198.18.1.6"
	pods := map[string]string{}
	for _, ip := range []string{keep, gone} {
		pods[ip] = g.l.Pod(g.node, nodeIP, netip.MustParseAddr(ip))
		g.l.ServeEcho(pods[ip], netip.MustParseAddrPort(ip+":8080"), pods[ip])
	}
	a := &apply.Applier{Backend: apply.NewIPVS("IPv4", 5*time.Second)}
	sync := func(sm *ir.ServiceMap) *apply.Result {
		t.Helper()
		var res *apply.Result
		err := netlab.InNS(g.node, func() (err error) {
			res, err = a.Sync(context.Background(), sm, apply.SyncOptions{Reread: true})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	sync(applyMap(t, []string{keep, gone}, ""))
	conn, r := connectTo(t, g.client, pods[gone])
	defer conn.Close()

	one := applyMap(t, []string{keep}, "")
	res := sync(one)
	// Behind the cluster IP the connection keeps the server, at weight 0; behind the
	// node port, where it has none, the server goes at once.
	drained := "-a -t 198.19.0.10:80 -r " + gone + ":8080 -m -w 0"
	saved := g.in("ipvsadm", "-Sn")
	if !strings.Contains(saved, drained) || strings.Contains(saved, "-a -t 198.18.0.1:30080 -r "+gone) {
		t.Fatalf("after the endpoint went (%s), its real servers are not drained and deleted:\n%s\n%s", res.Summary.Text, saved, g.in("ipvsadm", "-Ln"))
	}
	fmt.Fprintln(conn, "still there?")
	if l, err := r.ReadString('\n'); err != nil || l != "still there?\n" {
		t.Errorf("the connection to the drained server did not go on: %q %v", l, err)
	}
	for i := 0; i < 3; i++ {
		if id, err := netlab.Dial(g.client, clusterIP, 3*time.Second); err != nil || id != pods[keep] {
			t.Errorf("new connection %d went to %q (%v), want %s", i+1, id, err, pods[keep])
		}
	}
	if res := sync(one); res.Changed || !strings.Contains(g.in("ipvsadm", "-Sn"), drained) {
		t.Errorf("an apply while the connection is open changed %s:\n%s", res.Summary.Text, g.in("ipvsadm", "-Sn"))
	}
	// Reset: IPVS keeps the connection, inactive, in its CLOSE state for 10 seconds.
	if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	start := time.Now()
	for {
		sync(one)
		saved := g.in("ipvsadm", "-Sn")
		if !strings.Contains(saved, gone+":8080") {
			t.Logf("the drained server was deleted by the apply %v after the connection closed", time.Since(start).Round(time.Second))
			break
		}
		if !strings.Contains(saved, drained) || time.Since(start) > 40*time.Second {
			t.Fatalf("%v after the connection closed:\n%s\n%s", time.Since(start).Round(time.Second), saved, g.in("ipvsadm", "-Ln"))
		}
		time.Sleep(2 * time.Second)
	}
}

// connectTo opens connections from the client to clusterIP until one reaches the
// server of namespace pod (round robin: the second at the latest), and returns it
// open with its reader.
func connectTo(t *testing.T, client, pod string) (net.Conn, *bufio.Reader) {
	t.Helper()
	for i := 0; i < 4; i++ {
		c, err := netlab.Connect(client, clusterIP, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(90 * time.Second))
		r := bufio.NewReader(c)
		id, err := r.ReadString('\n')
		if err == nil && strings.TrimSpace(id) == pod {
			return c, r
		}
		c.Close()
	}
	t.Fatalf("four connections to %s never reached %s", clusterIP, pod)
	return nil, nil
}
