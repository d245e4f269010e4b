// Package e2e holds real-kernel tests: they build network namespaces, load svcgen's
// output with the real tools, run real servers and connect to Service addresses.
//
// Network rule: traffic stays inside namespaces the test creates (none is linked to the
// root namespace) and goes only to addresses the test assigns, all in 198.18.0.0/15.
// Every loop that sends traffic is bounded in count and time.
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// requireKernel skips a test that needs root and network namespaces, or fails it under
// CI=true, where the real-kernel tests must run.
func requireKernel(t *testing.T) {
	t.Helper()
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
		t.Fatalf("real-kernel test cannot run under CI: %s", reason)
	}
	t.Skipf("real-kernel test skipped: %s (run as root; under CI=true this fails)", reason)
}

// lab creates namespaces and links and removes them when the test ends.
type lab struct {
	t      *testing.T
	prefix string
	links  int
}

func newLab(t *testing.T) *lab {
	requireKernel(t)
	l := &lab{t: t, prefix: fmt.Sprintf("svcgen-%d-%04x-", os.Getpid(), rand.IntN(0x10000))}
	t.Cleanup(l.cleanup)
	return l
}

func (l *lab) cleanup() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], l.prefix) {
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
}

// ns creates a namespace with loopback up and returns its name.
func (l *lab) ns(role string) string {
	name := l.prefix + role
	l.sh("ip", "netns", "add", name)
	l.in(name, "ip", "link", "set", "lo", "up")
	l.in(name, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
	return name
}

// sh runs a command and fails the test on error.
func (l *lab) sh(args ...string) string {
	l.t.Helper()
	out, err := l.try(args...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

func (l *lab) try(args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// in runs a command inside a namespace.
func (l *lab) in(ns string, args ...string) string {
	l.t.Helper()
	return l.sh(append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// feed runs a command inside a namespace with stdin.
func (l *lab) feed(ns string, stdin []byte, args ...string) error {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// link joins two namespaces with a veth pair; the address and device names of each
// end are returned. Empty addresses leave an end unnumbered.
func (l *lab) link(a, aAddr, b, bAddr string) (aDev, bDev string) {
	l.links++
	aDev, bDev = fmt.Sprintf("va%d", l.links), fmt.Sprintf("vb%d", l.links)
	l.sh("ip", "link", "add", aDev, "netns", a, "type", "veth", "peer", "name", bDev, "netns", b)
	for _, end := range [][3]string{{a, aDev, aAddr}, {b, bDev, bAddr}} {
		if end[2] != "" {
			l.in(end[0], "ip", "addr", "add", end[2], "dev", end[1])
		}
		l.in(end[0], "ip", "link", "set", end[1], "up")
	}
	return aDev, bDev
}

// inNS runs fn with the calling goroutine's thread in a namespace. Sockets made in fn
// stay in that namespace afterwards.
func inNS(name string, fn func() error) error {
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

// serve runs a TCP server in a namespace that answers every connection with id.
func (l *lab) serve(ns string, addr netip.AddrPort, id string) {
	l.t.Helper()
	var ln net.Listener
	err := inNS(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		l.t.Fatalf("serving %s in %s: %v", addr, ns, err)
	}
	l.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(2 * time.Second))
			fmt.Fprintln(c, id)
			c.Close()
		}
	}()
}

// errRefused is a connection refused at once (a REJECT, or nothing listening).
var errRefused = errors.New("connection refused")

// dial connects from a namespace and returns the server's id.
func dial(ns string, to netip.AddrPort, timeout time.Duration) (string, error) {
	var c net.Conn
	err := inNS(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", to.String(), timeout)
		return err
	})
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "", errRefused
		}
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// histogram makes n connections (each bounded by timeout) and counts the ids.
func histogram(t *testing.T, ns string, to netip.AddrPort, n int) map[string]int {
	t.Helper()
	h := map[string]int{}
	for i := 0; i < n; i++ {
		id, err := dial(ns, to, 2*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s from %s: %v", i+1, to, ns, err)
		}
		h[id]++
	}
	return h
}
