package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
)

// Helpers for the apply, audit, diff and cleanup tests: the svcgen command built once,
// a node with another tool's rules, servers that keep a connection open and answer UDP.

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the svcgen binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// svcgenBinary builds cmd/svcgen once per test process.
func svcgenBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		if built.dir, built.err = os.MkdirTemp("", "svcgen-e2e-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "svcgen")
		out, err := exec.Command(goTool, "build", "-o", built.path, "../cmd/svcgen").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// otherToolRules are another program's chains and rules in the tables kube-proxy uses.
const otherToolRules = `*nat
:OTHER-TOOL - [0:0]
-A PREROUTING -m comment --comment "other tool" -j OTHER-TOOL
-A OTHER-TOOL -d 198.18.9.9/32 -p tcp -j RETURN
COMMIT
*filter
:OTHER-FILTER - [0:0]
-A INPUT -s 198.18.7.7/32 -m comment --comment "a user's rule" -j ACCEPT
-A FORWARD -j OTHER-FILTER
-A OTHER-FILTER -d 198.18.9.9/32 -j DROP
COMMIT
*mangle
:OTHER-MANGLE - [0:0]
-A OUTPUT -j OTHER-MANGLE
COMMIT
`

// node is a cluster built from the examples (buildCluster) with another tool's rules
// in the node namespace, and a folder of manifests svcgen applies from.
type node struct {
	t    *testing.T
	l    *netlab.Lab
	c    *cluster
	dir  string // manifests: the examples and extra.yaml
	lock string
	bin  string
}

func newNode(t *testing.T) *node {
	l := netlab.New(t)
	bin := svcgenBinary(t)
	res := testkit.CompileFiles(t, pipeline.Settings{}, "../examples")
	n := &node{t: t, l: l, c: buildCluster(l, res.Map), dir: t.TempDir(), bin: bin}
	n.lock = filepath.Join(n.dir, "..", "apply.lock")
	for _, f := range []string{"cluster.yaml", "list.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		n.write(f, string(data))
	}
	if err := l.Feed(n.c.node, []byte(otherToolRules), "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) write(name, text string) {
	n.t.Helper()
	if err := os.WriteFile(filepath.Join(n.dir, name), []byte(text), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// svcgen runs the command in the node namespace, bounded in time.
func (n *node) svcgen(args ...string) (stdout, stderr string, err error) {
	return n.svcgenIn(n.c.node, args...)
}

func (n *node) svcgenIn(ns string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, n.bin}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// apply runs svcgen apply on the manifests folder and fails the test if it fails.
func (n *node) apply(extra ...string) string {
	n.t.Helper()
	_, stderr, err := n.svcgen(append([]string{"apply", "-f", n.dir, "--apply-lock", n.lock}, extra...)...)
	if err != nil {
		n.t.Fatalf("svcgen apply: %v\n%s", err, stderr)
	}
	return stderr
}

// save is the node's tables as iptables-save prints them, without comments and
// counters.
func (n *node) save() string {
	n.t.Helper()
	var lines []string
	for _, l := range strings.Split(n.l.In(n.c.node, "iptables-save"), "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if strings.HasPrefix(l, ":") {
			l = strings.TrimSuffix(l, " [0:0]")
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n") + "\n"
}

// otherRules is every line of the node's tables that is not kube-proxy's: chains not
// named KUBE-*, and rules that do not jump to KUBE-* chains.
func otherRules(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.Contains(l, "KUBE-") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// ruleHandles lists the nf_tables handle of every rule of the node's nat table by
// chain: a chain that is rewritten gets new handles, one left alone keeps them. It
// returns nil when iptables uses the legacy backend.
func (n *node) ruleHandles() map[string][]string {
	n.t.Helper()
	if !strings.Contains(n.l.In(n.c.node, "iptables", "-V"), "nf_tables") {
		return nil
	}
	out := map[string][]string{}
	chain := ""
	for _, l := range strings.Split(n.l.In(n.c.node, "nft", "-a", "list", "table", "ip", "nat"), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "chain ") {
			chain = strings.Fields(l)[1]
			out[chain] = []string{}
			continue
		}
		if i := strings.LastIndex(l, "# handle "); i >= 0 && chain != "" {
			out[chain] = append(out[chain], l[i+len("# handle "):])
		}
	}
	return out
}
