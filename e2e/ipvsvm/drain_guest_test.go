package ipvsvm

import (
	"bufio"
	"context"
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
	"github.com/svcgen/svcgen/ir"
)

// drainYAML is one TCP Service, drain, in ipvs mode; its endpoints are appended.
const drainYAML = guestNode + `---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: node1
ipvs: {scheduler: rr}
---
apiVersion: v1
kind: Service
metadata: {name: drain, namespace: demo}
spec:
  clusterIP: 198.19.0.14
  ports: [{name: tcp, port: 80, targetPort: 7000, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: drain-1, namespace: demo, labels: {kubernetes.io/service-name: drain}}
addressType: IPv4
ports: [{name: tcp, port: 7000, protocol: TCP}]
endpoints:
`

var drainVIP = netip.MustParseAddrPort("198.19.0.14:80")

func drainMap(t *testing.T, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	y := drainYAML
	for _, e := range endpoints {
		y += "- {addresses: [" + e + "], nodeName: node1}\n"
	}
	return testkit.Compile(t, "drain.yaml", y, pipeline.Settings{}).Map
}

// Graceful termination on the real kernel: apply sets a real server that is no longer
// wanted but has an open TCP connection to weight 0 (the connection goes on, new ones
// avoid it), leaves it so while the connection is open, and a later apply deletes it
// once the kernel counts no connection to it.
func TestGuestApplyDrains(t *testing.T) {
	insideGuest(t)
	g, _ := newGuest(t)
	keep, gone := "198.18.1.5", "198.18.1.6"
	pods := map[string]string{}
	for _, ip := range []string{keep, gone} {
		pods[ip] = g.l.Pod(g.node, nodeIP, netip.MustParseAddr(ip))
		g.l.ServeEcho(pods[ip], netip.MustParseAddrPort(ip+":7000"), pods[ip])
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
	sync(drainMap(t, keep, gone))
	conn, r := connectTo(t, g.client, pods[gone])
	defer conn.Close()

	one := drainMap(t, keep)
	res := sync(one)
	drained := "-a -t 198.19.0.14:80 -r " + gone + ":7000 -m -w 0"
	if saved := g.in("ipvsadm", "-Sn"); !strings.Contains(saved, drained) {
		t.Fatalf("after the endpoint went (%s), its real server is not drained at weight 0:\n%s\n%s", res.Summary.Text, saved, g.in("ipvsadm", "-Ln"))
	}
	fmt.Fprintln(conn, "still there?")
	if l, err := r.ReadString('\n'); err != nil || l != "still there?\n" {
		t.Errorf("the connection to the drained server did not go on: %q %v", l, err)
	}
	for i := 0; i < 3; i++ {
		if id, err := netlab.Dial(g.client, drainVIP, 3*time.Second); err != nil || id != pods[keep] {
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
		if !strings.Contains(saved, gone+":7000") {
			t.Logf("the drained server was deleted by the apply %v after the connection closed", time.Since(start).Round(time.Second))
			break
		}
		if !strings.Contains(saved, drained) || time.Since(start) > 40*time.Second {
			t.Fatalf("%v after the connection closed:\n%s\n%s", time.Since(start).Round(time.Second), saved, g.in("ipvsadm", "-Ln"))
		}
		time.Sleep(2 * time.Second)
	}
}

// connectTo opens connections from the client to drainVIP until one reaches the
// server of namespace pod (round robin: the second at the latest), and returns it
// open with its reader.
func connectTo(t *testing.T, client, pod string) (net.Conn, *bufio.Reader) {
	t.Helper()
	for i := 0; i < 4; i++ {
		c, err := netlab.Connect(client, drainVIP, 3*time.Second)
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
	t.Fatalf("four connections to %s never reached %s", drainVIP, pod)
	return nil, nil
}
