// Package netlab builds network namespaces for svcgen's real-kernel tests (e2e, and the
// qemu guest of e2e/ipvsvm): namespaces and veth links made with iproute2, servers and
// clients run from Go on a thread inside a namespace, everything removed when the test
// ends. It is for tests only.
//
// The network rule every user keeps:
//   - only namespaces the test makes: a Lab never links one to the namespace the test
//     runs in, and a test never changes that namespace's iptables, nftables, ipsets or
//     IPVS (commands that load rules run In a lab namespace);
//   - only addresses the test assigns, all in 198.18.0.0/15, or for IPv6 in the
//     project's ranges, fd00:198:18::/48 (nodes, pods) and fd00:198:19::/112
//     (virtual IPs);
//   - every loop that sends traffic is bounded in count and time (Dial, AskUDP and
//     Histogram each bound one exchange; servers end with the test).
//
// Namespace names start with a prefix unique to the process and the Lab (the PID and
// a count of the process's labs, skipping any prefix a namespace already has), so
// tests running at once, and labs left behind by a killed run, never meet.
package netlab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"

	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/nfacct"

	"github.com/vishvananda/netns"
)

// Require skips a test (or benchmark) that needs root and network namespaces, or fails
// it under CI=true, where the real-kernel tests must run.
func Require(tb testing.TB) {
	tb.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "not root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		reason = "no ip command (iproute2)"
	} else {
		name := fmt.Sprintf("svcgen-probe-%d", os.Getpid())
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			reason = "cannot create a network namespace: " + strings.TrimSpace(string(out))
		} else {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("real-kernel test cannot run under CI: %s", reason)
	}
	tb.Skipf("real-kernel test skipped: %s (run as root; under CI=true this fails)", reason)
}

// Lab creates namespaces and links, and removes them when the test ends.
type Lab struct {
	tb     testing.TB
	prefix string
	links  int
}

// New checks that the test can make namespaces (Require) and returns an empty lab.
func New(tb testing.TB) *Lab {
	Require(tb)
	l := &Lab{tb: tb, prefix: freePrefix()}
	tb.Cleanup(l.Cleanup)
	return l
}

// labs counts the process's labs: the count in a prefix keeps labs of one process
// apart, which a random part did not (two labs of a long parallel run drew the same).
var labs atomic.Uint32

// freePrefix returns "svcgen-PID-N-" with N the next count whose prefix no namespace
// has yet: the PID keeps processes alive at once apart, the check a namespace left
// behind by a killed process that had the same PID.
func freePrefix() string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for {
		prefix := fmt.Sprintf("svcgen-%d-%04x-", os.Getpid(), labs.Add(1))
		if !bytes.Contains(out, []byte(prefix)) {
			return prefix
		}
	}
}

// Cleanup deletes the lab's namespaces (with their links and servers' sockets). It
// runs when the test ends; a benchmark may call it between iterations.
func (l *Lab) Cleanup() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], l.prefix) {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

// NS creates a namespace with loopback up and reverse-path filtering off (traffic in
// a lab takes paths rp_filter would refuse), and returns its name. IPv6 duplicate
// address detection is off too, so that an IPv6 address can be used as soon as it is
// assigned (not seconds later, once it is no longer "tentative"); a kernel without
// IPv6 has no such setting, and its namespaces do without.
func (l *Lab) NS(role string) string {
	name := l.prefix + role
	l.Run("ip", "netns", "add", name)
	l.In(name, "ip", "link", "set", "lo", "up")
	l.In(name, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
	l.Try("ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
	return name
}

// addAddr assigns an address (a prefix) to a device in a namespace; an IPv6 one
// without duplicate address detection ("nodad"), usable at once.
func (l *Lab) addAddr(ns, dev, prefix string) {
	l.tb.Helper()
	args := []string{"ip", "addr", "add", prefix, "dev", dev}
	if p, err := netip.ParsePrefix(prefix); err == nil && p.Addr().Is6() {
		args = append(args, "nodad")
	}
	l.In(ns, args...)
}

// Run runs a command and fails the test on error.
func (l *Lab) Run(args ...string) string {
	l.tb.Helper()
	out, err := l.Try(args...)
	if err != nil {
		l.tb.Fatal(err)
	}
	return out
}

// Try runs a command and returns its output, or an error with what it said.
func (l *Lab) Try(args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// In runs a command inside a namespace and fails the test on error.
func (l *Lab) In(ns string, args ...string) string {
	l.tb.Helper()
	return l.Run(append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// Feed runs a command inside a namespace with stdin.
func (l *Lab) Feed(ns string, stdin []byte, args ...string) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Link joins two lab namespaces with a veth pair and returns the device names of its
// ends; each end gets its address (a prefix, "198.18.0.1/24") unless that is empty.
func (l *Lab) Link(a, aAddr, b, bAddr string) (aDev, bDev string) {
	l.tb.Helper()
	for _, ns := range []string{a, b} {
		if !strings.HasPrefix(ns, l.prefix) {
			l.tb.Fatalf("link to %q: a lab links only its own namespaces", ns)
		}
	}
	l.links++
	aDev, bDev = fmt.Sprintf("va%d", l.links), fmt.Sprintf("vb%d", l.links)
	l.Run("ip", "link", "add", aDev, "netns", a, "type", "veth", "peer", "name", bDev, "netns", b)
	for _, end := range [][3]string{{a, aDev, aAddr}, {b, bDev, bAddr}} {
		if end[2] != "" {
			l.addAddr(end[0], end[1], end[2])
		}
		l.In(end[0], "ip", "link", "set", end[1], "up")
	}
	return aDev, bDev
}

// Pod makes a namespace that holds one address, ip, on a link of its own to node: node
// routes ip to it, and its default route goes back through gateway, node's address.
// This is a pod, or an endpoint, as a node sees it.
func (l *Lab) Pod(node string, gateway, ip netip.Addr) string {
	l.tb.Helper()
	return l.DualPod(node, gateway, ip)
}

// podGateway6 is the node's link-local address on each pod link: a pod's IPv6 default
// route goes through it, because a node answers neighbor solicitation only for the
// addresses of the interface it comes in on (IPv4's ARP answers for any of them, so
// an IPv4 pod routes through the node's address on another link, "onlink").
const podGateway6 = "fe80::1"

// DualPod is Pod with several addresses, one of each family, say: node routes each
// to the pod; the pod's IPv4 default route goes back through gateway4 (an IPv4
// address of node), its IPv6 one through node's link-local address on their link.
// The namespace is named after the first address.
func (l *Lab) DualPod(node string, gateway4 netip.Addr, ips ...netip.Addr) string {
	l.tb.Helper()
	ns := l.NS("p" + strings.NewReplacer(".", "-", ":", "-").Replace(ips[0].String()))
	nodeDev, podDev := l.Link(node, "", ns, "")
	gw6 := false
	for _, ip := range ips {
		host := netip.PrefixFrom(ip, ip.BitLen()).String()
		l.addAddr(ns, podDev, host)
		l.In(node, "ip", "route", "add", host, "dev", nodeDev)
		switch {
		case ip.Is4():
			l.In(ns, "ip", "route", "add", "default", "via", gateway4.String(), "dev", podDev, "onlink")
		case !gw6:
			gw6 = true
			l.addAddr(node, nodeDev, podGateway6+"/64")
			l.In(ns, "ip", "-6", "route", "add", "default", "via", podGateway6, "dev", podDev)
		}
	}
	return ns
}

// InNS runs fn with the calling goroutine's thread in a namespace. Sockets made in fn
// stay in that namespace afterwards.
func InNS(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	h, err := netns.GetFromName(name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("cannot return to the test's namespace: %v", err) // thread stays locked and dies
	}
	runtime.UnlockOSThread()
	return ferr
}

// Counters makes nfacct counters in a namespace, as kube-proxy makes them on a node
// before it loads rules that name them.
func (l *Lab) Counters(ns string, names ...string) {
	l.tb.Helper()
	if err := InNS(ns, func() error { return nfacct.Ensure(names...) }); err != nil {
		l.tb.Fatal(err)
	}
}

// serve accepts TCP connections to addr in a namespace until the test ends, and
// handles each on a goroutine of its own.
func (l *Lab) serve(ns string, addr netip.AddrPort, handle func(net.Conn)) {
	l.tb.Helper()
	var ln net.Listener
	err := InNS(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		l.tb.Fatalf("serving %s in %s: %v", addr, ns, err)
	}
	l.tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// Serve runs a TCP server in a namespace that answers every connection with id.
func (l *Lab) Serve(ns string, addr netip.AddrPort, id string) {
	l.tb.Helper()
	l.serve(ns, addr, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintln(c, id)
	})
}

// ServeSeen runs a TCP server in a namespace that answers every connection with the
// address it serves and the source address it sees, "198.18.1.1:8080 198.18.0.2": which
// endpoint a connection reached, and whether it was masqueraded on the way.
func (l *Lab) ServeSeen(ns string, addr netip.AddrPort) {
	l.tb.Helper()
	l.serve(ns, addr, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		fmt.Fprintln(c, addr, peer.Addr().Unmap())
	})
}

// ServeEcho runs a TCP server in a namespace that answers each connection with id and
// then echoes every line until the client closes it (at most 2 minutes).
func (l *Lab) ServeEcho(ns string, addr netip.AddrPort, id string) {
	l.tb.Helper()
	l.serve(ns, addr, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		fmt.Fprintln(c, id)
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(line))
		}
	})
}

// ServeUDP answers every datagram to addr with id.
func (l *Lab) ServeUDP(ns string, addr netip.AddrPort, id string) {
	l.tb.Helper()
	var pc net.PacketConn
	if err := InNS(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", addr.String())
		return err
	}); err != nil {
		l.tb.Fatalf("serving udp %s in %s: %v", addr, ns, err)
	}
	l.tb.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(id), from)
		}
	}()
}

// ErrRefused is a connection refused at once (a REJECT, or nothing listening).
var ErrRefused = errors.New("connection refused")

// Connect opens a TCP connection from a namespace within timeout (the socket stays in
// the namespace). A connection refused at once is ErrRefused.
func Connect(ns string, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	return ConnectFrom(ns, netip.Addr{}, to, timeout)
}

// ConnectFrom is Connect from a given source address of the namespace; the zero Addr
// lets the kernel choose, as Connect does.
func ConnectFrom(ns string, from netip.Addr, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if from.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))
	}
	var c net.Conn
	err := InNS(ns, func() (err error) {
		c, err = d.Dial("tcp", to.String())
		return err
	})
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, ErrRefused
	}
	return c, err
}

// Dial connects from a namespace and returns the first line the server sends (the id
// of a Serve), within timeout.
func Dial(ns string, to netip.AddrPort, timeout time.Duration) (string, error) {
	return DialFrom(ns, netip.Addr{}, to, timeout)
}

// DialFrom is Dial from a given source address of the namespace (see ConnectFrom).
func DialFrom(ns string, from netip.Addr, to netip.AddrPort, timeout time.Duration) (string, error) {
	c, err := ConnectFrom(ns, from, to, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// Histogram makes n connections (each bounded by 2 seconds) and counts the ids.
func Histogram(tb testing.TB, ns string, to netip.AddrPort, n int) map[string]int {
	tb.Helper()
	h := map[string]int{}
	for i := 0; i < n; i++ {
		id, err := Dial(ns, to, 2*time.Second)
		if err != nil {
			tb.Fatalf("connection %d to %s from %s: %v", i+1, to, ns, err)
		}
		h[id]++
	}
	return h
}

// AskUDP sends one datagram from a fixed source address and returns the answer,
// within 2 seconds.
func AskUDP(ns string, from, to netip.AddrPort) (string, error) {
	var pc net.PacketConn
	if err := InNS(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", from.String())
		return err
	}); err != nil {
		return "", err
	}
	defer pc.Close()
	pc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := pc.WriteTo([]byte("?"), net.UDPAddrFromAddrPort(to)); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, _, err := pc.ReadFrom(buf)
	return string(buf[:n]), err
}
