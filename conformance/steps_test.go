package conformance

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/netlab"
	svcrelease "github.com/svcgen/svcgen/release"
)

// TestOracleSteps runs the steps form of the newest release's oracle (run -step, see
// conformance/oracle/steps.go), which scripts/beside-kube-proxy.sh times, and checks
// that each step is the sync it claims and really changes the rules: after a resync
// with nothing changed, one endpoint moved and one Service added, the namespace's
// rules send the Service to the new endpoint and not the old one, and have the new
// Service. The resync comes first, so the partial syncs after it are what leave the
// rules as they are (a full sync would mend whatever a partial one missed).
func TestOracleSteps(t *testing.T) {
	netlab.Require(t)
	requireTools(t, "iptables", "iptables-save", "iptables-restore", "nft")
	dir := t.TempDir()
	svcgen := filepath.Join(dir, "svcgen")
	build(t, "svcgen", "build", "-o", svcgen, "../cmd/svcgen")
	rel := newestRelease(t)
	oracle := filepath.Join(dir, "oracle-"+rel)
	build(t, "the "+rel+" oracle", "build", "-C", rel, "-o", oracle, ".")

	// 30 Services x 10 endpoints, under iptables' large-cluster threshold (1,000
	// endpoints), so the resync is a full sync in both modes.
	var base bytes.Buffer
	if err := gen.Write(&base, gen.Options{Services: 30, Endpoints: 10, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	var added bytes.Buffer
	if err := gen.Write(&added, gen.Options{Services: 31, Endpoints: 10, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	move := regexp.MustCompile(`(?m)^( *- )10\.128\.1\.1$`)
	moved := move.ReplaceAll(base.Bytes(), []byte("${1}10.99.0.1"))
	if bytes.Equal(moved, base.Bytes()) {
		t.Fatal("the generated cluster has no endpoint 10.128.1.1 to move")
	}
	files := map[string][]byte{"0.yaml": base.Bytes(), "moved.yaml": moved,
		"added.yaml": move.ReplaceAll(added.Bytes(), []byte("${1}10.99.0.1"))}
	resolved := map[string]string{}
	for name, data := range files {
		in := filepath.Join(dir, "in-"+name)
		write(t, dir, "in-"+name, data)
		out, err := runOut(svcgen, "resolve", "-f", in)
		if err != nil {
			t.Fatal(err)
		}
		resolved[name] = filepath.Join(dir, name)
		write(t, dir, name, out)
	}
	newIP := newClusterIP(t, resolved["moved.yaml"], resolved["added.yaml"])

	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			config := filepath.Join(dir, "config-"+mode+".yaml")
			write(t, dir, "config-"+mode+".yaml", []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\n"+
				"kind: KubeProxyConfiguration\nhostnameOverride: node-0\nclusterCIDR: 10.128.0.0/9\nmode: "+mode+"\n"))
			l := netlab.New(t)
			ns := l.NS("kp")
			out := l.In(ns, oracle, "run", "-cluster", resolved["0.yaml"], "-config", config, "-node", "node-0",
				"-step", "resync", "-step", resolved["moved.yaml"], "-step", resolved["added.yaml"])
			checkStepLines(t, out, []string{
				`^programmed \d+\.\d{9} first-sync full \d+\.\d+$`,
				`^step resync events 0 sync full \d+\.\d+$`,
				`^step \S+/moved\.yaml events 1 sync partial \d+\.\d+$`,
				`^step \S+/added\.yaml events 2 sync partial \d+\.\d+$`,
			})
			if mode == "iptables" {
				checkIPTablesMoved(t, l.In(ns, "iptables-save"), newIP)
			} else {
				checkNFTablesMoved(t, l.In(ns, "nft", "list", "table", "ip", "kube-proxy"), newIP)
			}
		})
	}
}

// newestRelease is the newest conformance/vX.Y module of svcgen's release table.
func newestRelease(t *testing.T) string {
	dirs, _ := filepath.Glob("v*/go.mod")
	best, bestMinor := "", -1
	for _, d := range dirs {
		name := filepath.Dir(d)
		r, err := svcrelease.Parse(name)
		if err != nil {
			t.Fatalf("conformance/%s: %v", name, err)
		}
		if r.Minor > bestMinor {
			best, bestMinor = name, r.Minor
		}
	}
	if best == "" {
		t.Fatal("no conformance/v* module")
	}
	return best
}

// newClusterIP is the ClusterIP the added Service has: in after, not in before.
func newClusterIP(t *testing.T, before, after string) string {
	ips := func(path string) []string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^  clusterIP: (\S+)$`).FindAllSubmatch(data, -1) {
			out = append(out, string(m[1]))
		}
		return out
	}
	was := ips(before)
	var found []string
	for _, ip := range ips(after) {
		if !slices.Contains(was, ip) {
			found = append(found, ip)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the added cluster should have one new ClusterIP, it has %v", found)
	}
	return found[0]
}

func checkStepLines(t *testing.T, out string, want []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("the oracle printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i+1, lines[i], w)
		}
	}
}

// oldEndpoint matches the moved endpoint's old address, not 10.128.1.10 to .19.
var oldEndpoint = regexp.MustCompile(`10\.128\.1\.1\b`)

// checkIPTablesMoved: a DNAT to the new endpoint, nothing jumping to a chain that
// DNATs to the old one (in large-cluster mode kube-proxy deletes stale chains only
// now and then, so the chain itself may stay), and the new Service's ClusterIP.
func checkIPTablesMoved(t *testing.T, rules, newIP string) {
	t.Helper()
	if !strings.Contains(rules, "--to-destination 10.99.0.1:") {
		t.Errorf("no DNAT to the moved endpoint 10.99.0.1:\n%s", rules)
	}
	stale := regexp.MustCompile(`(?m)^-A (\S+) .*--to-destination 10\.128\.1\.1:`).FindAllStringSubmatch(rules, -1)
	for _, m := range stale {
		if strings.Contains(rules, "-j "+m[1]+"\n") || strings.Contains(rules, "-j "+m[1]+" ") {
			t.Errorf("a rule still jumps to %s, the old endpoint's chain", m[1])
		}
	}
	if !strings.Contains(rules, "-A KUBE-SERVICES -d "+newIP+"/32 ") {
		t.Errorf("no KUBE-SERVICES rule for the added Service's %s", newIP)
	}
}

// checkNFTablesMoved: the endpoints the service chains DNAT to (v1.37's service chains
// name them in their numgen maps; older releases jump to endpoint chains named after
// them) include the new address and not the old one, and the new Service's ClusterIP
// is in the table.
func checkNFTablesMoved(t *testing.T, table, newIP string) {
	t.Helper()
	var newSeen bool
	for _, line := range strings.Split(table, "\n") {
		if !strings.Contains(line, "numgen") {
			continue
		}
		if oldEndpoint.MatchString(line) {
			t.Errorf("a service chain still sends to 10.128.1.1: %s", strings.TrimSpace(line))
		}
		newSeen = newSeen || strings.Contains(line, "10.99.0.1")
	}
	if !newSeen {
		t.Errorf("no service chain sends to the moved endpoint 10.99.0.1:\n%s", table)
	}
	if !strings.Contains(table, newIP) {
		t.Errorf("the added Service's %s is not in the table", newIP)
	}
}

// runOut runs a program and returns its stdout, or an error with its stderr.
func runOut(name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
