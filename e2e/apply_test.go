package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/ipvskernel"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
)

// TestApply: apply loads the examples next to another tool's rules, which survive; the
// services answer; a second apply changes nothing; audit finds the node in step; a
// dry run before any of it changed nothing.
func TestApply(t *testing.T) {
	n := newNode(t)
	before := n.save()

	diff, stderr, err := n.svcgen("apply", "-f", n.dir, "--apply-lock", n.lock, "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, stderr)
	}
	hello := findPort(t, n.c.sm, "default", "hello-service")
	svc := iptsyntax.ServiceChainsFor(hello.Name.String(), "tcp").SVC
	if !strings.Contains(diff, "+:"+svc+" (default/hello-service:http) -") {
		t.Errorf("dry run diff lacks %s with its Service:\n%s", svc, diff)
	}
	if got := n.save(); got != before {
		t.Fatalf("--dry-run changed the kernel:\n%s", got)
	}

	n.apply()
	first := n.save()
	if otherRules(first) != otherRules(before) {
		t.Errorf("another tool's rules changed:\n%s\nwant\n%s", otherRules(first), otherRules(before))
	}
	checkExamples(t, n.c)

	if msg := n.apply(); !strings.Contains(msg, "no changes") {
		t.Errorf("second apply: %s", msg)
	}
	if got := n.save(); got != first {
		t.Errorf("second apply changed the kernel:\n%s\nwant\n%s", got, first)
	}
	if _, stderr, err := n.svcgen("audit", "-f", n.dir, "--live"); err != nil {
		t.Errorf("audit after apply: %v\n%s", err, stderr)
	}
	if out, _, err := n.svcgen("diff", "--live", "-f", n.dir); err != nil || out != "" {
		t.Errorf("diff --live after apply: %v\n%s", err, out)
	}
}

// TestApplyOneEndpoint: moving one endpoint rewrites that Service's chains and nothing
// else (KUBE-SERVICES keeps its rules, as nf_tables handles show), while a connection
// to another Service stays up through the apply.
func TestApplyOneEndpoint(t *testing.T) {
	n := newNode(t)
	keepIP := netip.MustParseAddr("198.18.1.61")
	keepNS := n.l.Pod(n.c.node, n.c.nodeIP, keepIP)
	n.l.ServeEcho(keepNS, netip.AddrPortFrom(keepIP, 7000), "keep")
	n.write("extra.yaml", svcWithEndpoints("keep", "198.19.1.61", 7000, "198.18.1.61")+"---\n"+
		svcWithEndpoints("moving", "198.19.1.71", 8080, "198.18.1.71", "198.18.1.72"))
	n.apply()

	// A long-lived connection to keep.
	conn, err := netlab.Connect(n.c.client, netip.MustParseAddrPort("198.19.1.61:80"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if id, err := r.ReadString('\n'); err != nil || id != "keep\n" {
		t.Fatalf("keep answered %q, %v", id, err)
	}

	handles := n.ruleHandles()
	n.write("extra.yaml", svcWithEndpoints("keep", "198.19.1.61", 7000, "198.18.1.61")+"---\n"+
		svcWithEndpoints("moving", "198.19.1.71", 8080, "198.18.1.71", "198.18.1.73"))
	msg := n.apply()
	if !strings.Contains(msg, "1 chain deleted") {
		t.Errorf("apply: %s; want the old endpoint's chain deleted", msg)
	}

	fmt.Fprintln(conn, "still there?")
	if echo, err := r.ReadString('\n'); err != nil || echo != "still there?\n" {
		t.Errorf("the connection to keep did not survive the apply: %q, %v", echo, err)
	}

	if handles == nil {
		t.Log("iptables uses the legacy backend: rule handles not checked")
		return
	}
	after := n.ruleHandles()
	res := testkit.CompileFiles(t, pipeline.Settings{}, n.dir)
	moving := findPort(t, res.Map, "default", "moving")
	owners := iptrules.MapOwners(res.Map)
	for chain, hs := range after {
		old, existed := handles[chain]
		mine := owners[chain].Port == moving.Name.String()
		switch {
		case mine && existed && strings.Join(old, " ") == strings.Join(hs, " "):
			t.Errorf("%s (%s) was not rewritten", chain, owners.Label(chain))
		case !mine && strings.Join(old, " ") != strings.Join(hs, " "):
			t.Errorf("%s (%s) was rewritten: handles %v, now %v", chain, owners.Label(chain), old, hs)
		}
	}
}

// svcWithEndpoints is a ClusterIP Service on port 80 with an EndpointSlice on node1
// whose endpoints serve on port.
func svcWithEndpoints(name, clusterIP string, port int, ips ...string) string {
	var eps strings.Builder
	for _, ip := range ips {
		fmt.Fprintf(&eps, "- {addresses: [%s], nodeName: node1}\n", ip)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: default}
spec:
  clusterIP: %[2]s
  ports: [{name: tcp, port: 80, targetPort: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s-1, namespace: default, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{name: tcp, port: %[3]d}]
endpoints:
%[4]s`, name, clusterIP, port, eps.String())
}

// TestApplyRollback: a ruleset the kernel refuses leaves the rules as they were, though
// the filter table was loaded before the nat table failed; the error names the rule
// and its Service. The kernel refuses to delete a chain another program's rule still
// jumps to: here the chains of a Service that goes away, while the NodeEnvironment's
// nfacct turning off changes the filter table in the same apply.
func TestApplyRollback(t *testing.T) {
	n := newNode(t)
	n.write("extra.yaml", svcWithEndpoints("going", "198.19.1.95", 8080, "198.18.1.95"))
	n.apply()
	svc := iptsyntax.ServiceChainsFor("default/going:tcp", "tcp").SVC
	foreign := "*nat\n:FOREIGN - [0:0]\n-A FOREIGN -d 198.18.9.9/32 -j " + svc + "\nCOMMIT\n"
	if err := n.l.Feed(n.c.node, []byte(foreign), "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	before := n.save()
	n.write("extra.yaml", "")
	n.write("env.yaml", `apiVersion: svcgen/v1alpha1
kind: NodeEnvironment
metadata: {name: node1}
iptables: {randomFully: true, nfacct: false}
`)
	diff, _, _ := n.svcgen("apply", "-f", n.dir, "--apply-lock", n.lock, "--dry-run")
	if !strings.Contains(diff, "--ctstate INVALID -j DROP") {
		t.Fatalf("the broken apply should change the filter table too:\n%s", diff)
	}
	_, stderr, err := n.svcgen("apply", "-f", n.dir, "--apply-lock", n.lock)
	if err == nil {
		t.Fatal("apply of a ruleset the kernel refuses succeeded")
	}
	for _, want := range []string{svc, "default/going:tcp", "previous rules are in place"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, stderr)
		}
	}
	if got := n.save(); got != before {
		t.Errorf("a failed apply changed the kernel:\n%s\nwant\n%s", got, before)
	}
	checkExamples(t, n.c)
}

// TestAuditRepair: audit finds a rule deleted by hand, apply puts it back.
func TestAuditRepair(t *testing.T) {
	n := newNode(t)
	n.apply()
	hello := findPort(t, n.c.sm, "default", "hello-service")
	svc := iptsyntax.ServiceChainsFor(hello.Name.String(), "tcp").SVC
	n.l.In(n.c.node, "iptables", "-t", "nat", "-D", svc, "1")
	out, stderr, err := n.svcgen("audit", "-f", n.dir, "--live")
	if err == nil {
		t.Fatalf("audit found no drift:\n%s", out)
	}
	if !strings.Contains(out, "different default/hello-service:http") || !strings.Contains(out, "  - -A "+svc+" (default/hello-service:http)") {
		t.Errorf("audit output:\n%s\n%s", out, stderr)
	}
	if strings.Contains(out, "hello-service2") || !strings.Contains(stderr, "1 drifted") {
		t.Errorf("audit reports more than the one service port:\n%s\n%s", out, stderr)
	}
	if msg := n.apply(); !regexp.MustCompile(`\d+ chains? written`).MatchString(msg) {
		t.Errorf("repair: %s", msg)
	}
	if _, stderr, err := n.svcgen("audit", "-f", n.dir, "--live"); err != nil {
		t.Errorf("audit after the repair: %v\n%s", err, stderr)
	}
}

// TestCleanup: cleanup leaves exactly the other tool's rules, and removes the
// nftables mode's kube-proxy table but not another program's table.
func TestCleanup(t *testing.T) {
	n := newNode(t)
	before := n.save()
	n.apply()
	nftables := "table ip kube-proxy {\n chain services {\n }\n}\ntable ip other-tool {\n chain c {\n }\n}\n"
	if err := n.l.Feed(n.c.node, []byte(nftables), "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, stderr)
	}
	if got := n.save(); got != before {
		t.Errorf("after cleanup:\n%s\nwant the other tool's rules only:\n%s", got, before)
	}
	if tables := n.l.In(n.c.node, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") || !strings.Contains(tables, "table ip other-tool") {
		t.Errorf("nft tables after cleanup:\n%s", tables)
	}
	if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil || !strings.Contains(stderr, "nothing to remove") {
		t.Errorf("second cleanup: %v\n%s", err, stderr)
	}
}

// TestApplyLock: an apply waits for another one holding the lock, at most --wait;
// applies at once are serialised and all succeed.
func TestApplyLock(t *testing.T) {
	n := newNode(t)
	holder := exec.Command("flock", n.lock, "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	for i := 0; i < 50; i++ { // until flock holds it
		if exec.Command("flock", "-n", n.lock, "true").Run() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	_, stderr, err := n.svcgen("apply", "-f", n.dir, "--apply-lock", n.lock, "--wait", "500ms")
	if err == nil || !strings.Contains(stderr, "another svcgen apply holds") {
		t.Fatalf("apply while the lock is held: %v\n%s", err, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %v; --wait was 500ms", d)
	}
	holder.Process.Kill()
	holder.Wait()

	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, stderr, err := n.svcgen("apply", "-f", n.dir, "--apply-lock", n.lock)
			if err != nil {
				err = fmt.Errorf("%v: %s", err, stderr)
			}
			errs <- err
		}()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	checkExamples(t, n.c)
}

// TestApplyConntrack: when a UDP Service's endpoint goes away, its conntrack entries go
// too, so the next datagram of the same flow reaches the endpoint that is left, not the
// old one (which still answers here).
func TestApplyConntrack(t *testing.T) {
	if _, err := exec.LookPath("conntrack"); err != nil && os.Getenv("CI") != "true" {
		t.Log("conntrack tool missing: entries are checked through traffic only")
	}
	n := newNode(t)
	a, b := netip.MustParseAddr("198.18.1.81"), netip.MustParseAddr("198.18.1.82")
	for _, ip := range []netip.Addr{a, b} {
		ns := n.l.Pod(n.c.node, n.c.nodeIP, ip)
		n.l.ServeUDP(ns, netip.AddrPortFrom(ip, 5353), ip.String())
	}
	dns := func(ips ...string) string {
		var eps strings.Builder
		for _, ip := range ips {
			fmt.Fprintf(&eps, "- {addresses: [%s], nodeName: node1}\n", ip)
		}
		return `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec:
  clusterIP: 198.19.1.53
  ports: [{name: dns, port: 53, protocol: UDP, targetPort: 5353}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, port: 5353, protocol: UDP}]
endpoints:
` + eps.String()
	}
	vip := netip.MustParseAddrPort("198.19.1.53:53")
	from := netip.AddrPortFrom(clientIP, 40053)
	n.write("extra.yaml", dns(a.String()))
	n.apply()
	if got, err := netlab.AskUDP(n.c.client, from, vip); err != nil || got != a.String() {
		t.Fatalf("first datagram: %q, %v", got, err)
	}
	n.write("extra.yaml", dns(b.String()))
	if msg := n.apply(); !regexp.MustCompile(`conntrack: \d+ stale UDP entr(y|ies) deleted`).MatchString(msg) {
		t.Errorf("apply: %s", msg)
	}
	if got, err := netlab.AskUDP(n.c.client, from, vip); err != nil || got != b.String() {
		t.Errorf("after the endpoint moved, the same flow reached %q (%v); want %s", got, err, b)
	}
}

// TestApplyWatch: --watch syncs on a manifest change, skips reading the rules in an
// interval where nf_tables' generation stood still, and repairs a rule deleted by hand
// within an interval, logging each sync, and serves /healthz and /metrics.
func TestApplyWatch(t *testing.T) {
	n := newNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.c.node, n.bin, "apply", "-f", n.dir, "--apply-lock", n.lock,
		"--watch", "--interval", "1s", "--listen", "127.0.0.1:10249")
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	waitLog := func(what string, match func(string) bool) string {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("svcgen apply --watch ended before %s", what)
				}
				if match(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("no log line for %s in 30s", what)
			}
		}
	}
	// The first sync: of both families where the host has IPv6 (the watch syncs
	// IPv4 first, then IPv6).
	last := "family=IPv4"
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil {
		last = "family=IPv6"
	}
	waitLog("the first sync", func(l string) bool {
		return strings.Contains(l, "msg=sync") && strings.Contains(l, last) && strings.Contains(l, "reason=start")
	})
	checkExamples(t, n.c)

	get := func(path string) (int, string) {
		t.Helper()
		// net/http dials from goroutines of its own, outside the namespace: dial here.
		c, err := netlab.Connect(n.c.node, netip.MustParseAddrPort("127.0.0.1:10249"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest("GET", "http://127.0.0.1:10249"+path, nil)
		if err := req.Write(c); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "svcgen_sync_duration_seconds_count") || !strings.Contains(body, "svcgen_last_sync_success_timestamp_seconds") {
		t.Errorf("/metrics lacks the sync metrics:\n%s", body)
	}

	// A new Service in a new file is loaded.
	n.write("extra.yaml", svcWithEndpoints("late", "198.19.1.91", 8080, "198.18.1.91"))
	// (Its own sync, or an interval's once the file has settled.)
	// (The IPv4 family's: the watch keeps IPv6 too, this host supporting both.)
	waitLog("the change", func(l string) bool {
		return strings.Contains(l, "msg=sync") && strings.Contains(l, "family=IPv4") && strings.Contains(l, "changed=true")
	})
	late := iptsyntax.ServiceChainsFor("default/late:tcp", "tcp").SVC
	if !strings.Contains(n.save(), ":"+late) {
		t.Errorf("the new Service's chain %s is not in the kernel", late)
	}

	// An interval with nothing changed does not read the rules (iptables-nft: the
	// nf_tables generation stood still); on iptables-legacy every interval reads.
	if strings.Contains(n.l.In(n.c.node, "iptables", "-V"), "nf_tables") {
		waitLog("an interval that skips the read", func(l string) bool {
			return strings.Contains(l, "family=IPv4 reason=interval") && strings.Contains(l, "read=skipped") && strings.Contains(l, "changed=false")
		})
		if _, body := get("/metrics"); !strings.Contains(body, "svcgen_kernel_reads_skipped_total") || strings.Contains(body, `svcgen_kernel_reads_skipped_total{family="IPv4"} 0`+"\n") {
			t.Errorf("/metrics counts no skipped read:\n%s", body)
		}
	}

	// A rule deleted by hand comes back at the next interval.
	hello := findPort(t, n.c.sm, "default", "hello-service")
	svc := iptsyntax.ServiceChainsFor(hello.Name.String(), "tcp").SVC
	n.l.In(n.c.node, "iptables", "-t", "nat", "-D", svc, "1")
	waitLog("the repair", func(l string) bool {
		return strings.Contains(l, "reason=interval") && strings.Contains(l, "drift=repaired")
	})
	if _, stderr, err := n.svcgen("audit", "-f", n.dir, "--live"); err != nil {
		t.Errorf("audit after the repair: %v\n%s", err, stderr)
	}
	checkExamples(t, n.c)
}

// TestApplyIPVSNeedsKernel: on a kernel without IPVS (these machines'), apply -m ipvs
// says so and changes nothing, instead of "programming" virtual servers through
// moby/ipvs, which reports success there. (The ipvs applier itself is tested in the
// qemu guest, e2e/ipvsvm.)
func TestApplyIPVSNeedsKernel(t *testing.T) {
	if ipvskernel.Check() == nil {
		t.Skip("this kernel has IPVS; e2e/ipvsvm tests the ipvs applier")
	}
	n := newNode(t)
	before := n.save()
	_, stderr, err := n.svcgen("apply", "-f", n.dir, "-m", "ipvs", "--apply-lock", n.lock)
	if err == nil || !strings.Contains(stderr, "the kernel has no IPVS") {
		t.Errorf("apply -m ipvs: %v\n%s", err, stderr)
	}
	if got := n.save(); got != before {
		t.Errorf("a refused ipvs apply changed the tables:\n%s", got)
	}
}

// TestApplyNFT: apply -m nftables loads kube-proxy's table next to another program's
// table and iptables rules (which survive), the Services answer, a second apply
// changes nothing, one endpoint moved rewrites only the chains of its Service whose
// rules changed while a connection to another Service stays up, audit finds a rule deleted by hand and apply
// puts it back, and cleanup removes the table and nothing else.
func TestApplyNFT(t *testing.T) {
	n := newNode(t)
	keepIP := netip.MustParseAddr("198.18.1.61")
	keepNS := n.l.Pod(n.c.node, n.c.nodeIP, keepIP)
	n.l.ServeEcho(keepNS, netip.AddrPortFrom(keepIP, 7000), "keep")
	extra := func(moving string) string {
		return svcWithEndpoints("keep", "198.19.1.61", 7000, "198.18.1.61") + "---\n" +
			svcWithEndpoints("moving", "198.19.1.71", 8080, "198.18.1.71", moving)
	}
	n.write("extra.yaml", extra("198.18.1.72"))
	if err := n.l.Feed(n.c.node, []byte("table ip other-tool {\n chain c {\n  type filter hook input priority 10 ;\n  ip saddr 198.18.7.7 accept\n }\n}\n"), "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	otherTable := n.l.In(n.c.node, "nft", "list", "table", "ip", "other-tool")
	before := otherRules(n.save())
	nftApply := func(args ...string) string {
		t.Helper()
		_, stderr, err := n.svcgen(append([]string{"apply", "-f", n.dir, "-m", "nftables", "--apply-lock", n.lock}, args...)...)
		if err != nil {
			t.Fatalf("svcgen apply -m nftables: %v\n%s", err, stderr)
		}
		return stderr
	}
	nftApply()
	checkExamples(t, n.c)
	if msg := nftApply(); !strings.Contains(msg, "no changes") {
		t.Errorf("second apply: %s", msg)
	}

	conn, err := netlab.Connect(n.c.client, netip.MustParseAddrPort("198.19.1.61:80"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	if id, err := r.ReadString('\n'); err != nil || id != "keep\n" {
		t.Fatalf("keep answered %q, %v", id, err)
	}
	handles := nftHandles(t, n)
	n.write("extra.yaml", extra("198.18.1.73"))
	nftApply()
	fmt.Fprintln(conn, "still there?")
	if echo, err := r.ReadString('\n'); err != nil || echo != "still there?\n" {
		t.Errorf("the connection to keep did not survive the apply: %q, %v", echo, err)
	}
	// Only the chains whose rules changed are written (the minimal partial sync): the
	// moving Service's service chain, which DNATs itself (since v1.36 a Service without
	// affinity has no endpoint chains); every other Service keeps its chains.
	rewritten := 0
	for chain, hs := range nftHandles(t, n) {
		old, existed := handles[chain]
		changed := strings.HasPrefix(chain, "service-") && strings.Contains(chain, "default/moving/")
		switch {
		case changed && existed && old == hs:
			t.Errorf("%s was not rewritten", chain)
		case !changed && existed && old != hs:
			t.Errorf("%s was rewritten: handles %s, now %s", chain, old, hs)
		case !existed && !strings.Contains(chain, "default/moving/") && !strings.HasSuffix(chain, "__198.18.1.73/8080"):
			t.Errorf("%s is new", chain)
		}
		if changed || !existed {
			rewritten++
		}
	}
	if rewritten != 1 {
		t.Errorf("%d chains written, want 1 (the service chain)", rewritten)
	}

	// A rule deleted by hand: audit finds it, apply puts it back.
	hello := findPort(t, n.c.sm, "default", "hello-service")
	var chain, handle string
	for c, hs := range nftHandles(t, n) {
		if strings.HasPrefix(c, "service-") && strings.Contains(c, "default/hello-service/") {
			chain, handle = c, strings.Fields(hs)[0]
		}
	}
	n.l.In(n.c.node, "nft", "delete", "rule", "ip", "kube-proxy", chain, "handle", handle)
	out, _, err := n.svcgen("audit", "-f", n.dir, "-m", "nftables", "--live")
	if err == nil || !strings.Contains(out, "different "+hello.Name.String()) {
		t.Errorf("audit after a rule was deleted: %v\n%s", err, out)
	}
	nftApply()
	if _, stderr, err := n.svcgen("audit", "-f", n.dir, "-m", "nftables", "--live"); err != nil {
		t.Errorf("audit after the repair: %v\n%s", err, stderr)
	}
	checkExamples(t, n.c)

	if _, stderr, err := n.svcgen("cleanup", "--apply-lock", n.lock); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, stderr)
	}
	if tables := n.l.In(n.c.node, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") {
		t.Errorf("after cleanup: %s", tables)
	}
	if got := n.l.In(n.c.node, "nft", "list", "table", "ip", "other-tool"); got != otherTable {
		t.Errorf("the other program's table changed:\n%s\nwant\n%s", got, otherTable)
	}
	if got := otherRules(n.save()); got != before {
		t.Errorf("the other tool's iptables rules changed:\n%s\nwant\n%s", got, before)
	}
}

// nftHandles lists each chain of the kube-proxy table with its rules' handles.
func nftHandles(t *testing.T, n *node) map[string]string {
	t.Helper()
	out := map[string]string{}
	chain := ""
	for _, l := range strings.Split(n.l.In(n.c.node, "nft", "-a", "list", "table", "ip", "kube-proxy"), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "chain ") {
			chain = strings.Fields(l)[1]
			out[chain] = ""
			continue
		}
		if i := strings.LastIndex(l, "# handle "); i >= 0 && chain != "" && !strings.HasPrefix(l, "}") && !strings.Contains(l, "{ #") {
			out[chain] += l[i+len("# handle "):] + " "
		}
	}
	return out
}

// TestApplyRefusesToEmpty: an empty stdin (kubectl ... | svcgen apply -f - whose kubectl
// failed), an empty file and a misspelt kind change nothing on a node that holds
// Services, and exit 1 naming --allow-empty; with --allow-empty the Services go.
func TestApplyRefusesToEmpty(t *testing.T) {
	n := newNode(t)
	n.apply()
	before := n.save()
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	typo := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(typo, []byte("apiVersion: v1\nkind: Servcie\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-f", "-"}, {"-f", empty}, {"-f", typo}} {
		_, stderr, err := n.svcgen(append([]string{"apply", "--apply-lock", n.lock}, args...)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr, "--allow-empty") {
			t.Errorf("apply %v: %v\n%s", args, err, stderr)
		}
		if got := n.save(); got != before {
			t.Errorf("apply %v changed the node:\n%s", args, got)
		}
	}
	if _, stderr, err := n.svcgen("apply", "--apply-lock", n.lock, "-f", empty, "--allow-empty"); err != nil {
		t.Fatalf("--allow-empty: %v\n%s", err, stderr)
	}
	if got := n.save(); strings.Contains(got, "KUBE-SVC-") || otherRules(got) != otherRules(before) {
		t.Errorf("--allow-empty left:\n%s", got)
	}
}

// TestCompleteThenAudit: a complete ruleset loaded with a plain iptables-restore is in
// step for audit --live, also when KUBE-FIREWALL is only the empty jump target the
// complete file declares for kubelet (localhost node ports off). Before, audit
// reported that empty chain and its jumps as drift, for ever.
func TestCompleteThenAudit(t *testing.T) {
	l := netlab.New(t)
	ns := l.NS("node")
	dir := t.TempDir()
	bin := svcgenBinary(t)
	for _, f := range []string{"cluster.yaml", "list.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(data), "clusterCIDR: 198.18.0.0/15", "clusterCIDR: 198.18.0.0/15\niptables: {localhostNodePorts: false}", 1)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := exec.Command(bin, "compile", "-f", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), ":KUBE-FIREWALL - [0:0]") || strings.Contains(string(rules), "-A KUBE-FIREWALL") {
		t.Fatalf("the case needs an empty KUBE-FIREWALL:\n%s", rules)
	}
	l.Counters(ns, iptrules.Counters...)
	if err := l.Feed(ns, rules, "iptables-restore"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", ns, bin, "audit", "-f", dir, "--live").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all in step") {
		t.Errorf("audit after compile | iptables-restore: %v\n%s", err, out)
	}
	// The host supports IPv6, so the run has it, but the input has no IPv6 Service
	// and the node no IPv6 rule: passed over, not missing.
	if _, err := os.Stat("/proc/net/if_inet6"); err == nil && !strings.Contains(string(out), "audit: IPv6 passed over: the input has no IPv6 Service and the node no kube-proxy rule of IPv6") {
		t.Errorf("audit did not say it passed over IPv6:\n%s", out)
	}
}

// TestSourceRangeCoveringItsVIPSettles: a LoadBalancer whose source range holds the
// node's address lets its VIP through too ("ip saddr != { 198.18.0.0/24 , 198.18.0.10 }"),
// which the kernel keeps merged as "198.18.0.0/24". audit and apply must take the two
// for the same rule: before, every apply rewrote the chain and audit reported drift.
func TestSourceRangeCoveringItsVIPSettles(t *testing.T) {
	l := netlab.New(t)
	ns := l.NS("node")
	dir := t.TempDir()
	bin := svcgenBinary(t)
	manifest := `apiVersion: v1
kind: Node
metadata: {name: n1}
status: {addresses: [{type: InternalIP, address: 198.18.0.5}]}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 198.19.0.20
  loadBalancerSourceRanges: [198.18.0.0/24]
  ports: [{port: 80, nodePort: 30080, targetPort: 8080}]
status: {loadBalancer: {ingress: [{ip: 198.18.0.10}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-1, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [198.18.1.5]}]
`
	if err := os.WriteFile(filepath.Join(dir, "lb.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...).CombinedOutput()
		return string(out), err
	}
	script, err := exec.Command(bin, "compile", "-m", "nftables", "-f", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "ip saddr != { 198.18.0.0/24 , 198.18.0.10 } drop") {
		t.Fatalf("the case needs the VIP beside its source range:\n%s", script)
	}
	if err := l.Feed(ns, script, "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("audit", "-m", "nftables", "-f", dir, "--live"); err != nil || !strings.Contains(out, "all in step") {
		t.Errorf("audit after nft -f: %v\n%s", err, out)
	}
	if out, err := run("apply", "-m", "nftables", "-f", dir, "--apply-lock", filepath.Join(dir, "lock")); err != nil || !strings.Contains(out, "no changes") {
		t.Errorf("apply after nft -f: %v\n%s", err, out)
	}
}
