package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/randcluster"
	svcrelease "github.com/svcgen/svcgen/release"
)

// Knobs, each also an environment variable (test.sh passes the environment on):
//
//	SVCGEN_ORACLE_RELEASES  releases to run, "v1.35,v1.34" (default: every conformance/v*)
//	SVCGEN_ORACLE_MODES     modes, "iptables,nftables" (default: all three)
//	SVCGEN_ORACLE_CLUSTERS  random clusters per release and mode (default: defaultClusters)
//	SVCGEN_ORACLE_GOLDEN    "all": every golden case through every release; "0": none;
//	                        default: each golden case through one release, in turn
//	                        (every mode it is for), so CI stays within its budget
//	SVCGEN_ORACLE_JOBS      cases run at once (default 4: most of a case is waiting on
//	                        processes, so more than the 2 CPUs keeps them busy)
//	SVCGEN_ORACLE_REPORT    a file the summary is written to
func knob(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// TestOracle compares svcgen with kube-proxy's own proxier for every release under
// conformance/, every mode and every case (svcgen's golden inputs and random
// clusters): see the package doc. It needs root, network namespaces, iptables,
// ip6tables, nft, ipset and the Go toolchain (each release's oracle is built here, a
// few minutes cold).
func TestOracle(t *testing.T) {
	var report string
	t.Cleanup(func() { writeReport(t, report) })
	netlab.Require(t)
	requireTools(t, "iptables", "ip6tables", "iptables-save", "iptables-restore", "ip6tables-save",
		"ip6tables-restore", "nft", "ipset", "nfacct", "sysctl")
	start := time.Now()
	h := newHarness(t)
	cases := h.cases(t)
	jobs := make(chan struct{}, atoiOr(knob("SVCGEN_ORACLE_JOBS", "4"), 4))
	t.Run("cases", func(t *testing.T) {
		for _, rel := range h.releases {
			for _, mode := range h.modes {
				for _, c := range cases {
					if !slices.Contains(c.Modes, mode) || (c.Release != "" && c.Release != rel.name) {
						continue
					}
					t.Run(rel.name+"/"+mode+"/"+c.Name, func(t *testing.T) {
						t.Parallel()
						jobs <- struct{}{}
						defer func() { <-jobs }()
						h.compare(t, rel, mode, c)
					})
				}
			}
		}
	})
	report = h.report(t, time.Since(start))
}

// writeReport leaves the report where $SVCGEN_ORACLE_REPORT names (test.sh prints
// it: go test shows a passing test's log only with -v).
func writeReport(t *testing.T, report string) {
	path := os.Getenv("SVCGEN_ORACLE_REPORT")
	if path == "" {
		return
	}
	if report == "" {
		report = "TestOracle compared nothing: it was skipped or stopped before the cases (go test -v -run TestOracle ./conformance says why)\n"
	}
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Error(err)
	}
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the oracle cannot run under CI: missing %s (test.sh installs them)", strings.Join(missing, ", "))
	}
	t.Skipf("the oracle needs %s (run test.sh as root)", strings.Join(missing, ", "))
}

// defaultClusters is the number of random clusters per release and mode when
// SVCGEN_ORACLE_CLUSTERS does not say: sized so that test.sh stays within CI's budget
// (docs/oracle.md has the measurements).
func defaultClusters() int {
	if testing.Short() {
		return 4
	}
	return 24
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}

// release is one built oracle program and the entry of svcgen's release table it
// checks.
type release struct {
	name  string // "v1.35"
	bin   string
	probe Probe
	table svcrelease.Release
}

// harness holds what every case shares: the svcgen binary, the oracles, the
// expectations, svcgen's resolved clusters (per case), and the tally.
type harness struct {
	dir          string
	svcgen       string
	releases     []*release
	modes        []string
	expectations []*Expectation
	// complete: the run has every case of the default size (the golden cases and at
	// least the default number of random clusters), so an expectation that matches
	// nothing in a release and mode it names is stale, and fails the test.
	complete bool

	mu       sync.Mutex
	resolved map[string]*resolution
	svcgens  map[string]*svcgenResult
	tally    tally
}

type resolution struct {
	once sync.Once
	yaml []byte
	err  error
}

func newHarness(t *testing.T) *harness {
	h := &harness{dir: t.TempDir(), resolved: map[string]*resolution{}, svcgens: map[string]*svcgenResult{}, tally: newTally()}
	text, err := os.ReadFile("expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	if h.expectations, err = ParseExpectations(string(text)); err != nil {
		t.Fatal(err)
	}
	h.modes = strings.Split(knob("SVCGEN_ORACLE_MODES", strings.Join(AllModes, ",")), ",")
	h.svcgen = filepath.Join(h.dir, "svcgen")
	build(t, "svcgen", "build", "-o", h.svcgen, "../cmd/svcgen")
	h.releases = h.buildReleases(t)
	return h
}

// build runs the go command and logs how long it took.
func build(t *testing.T, what string, args ...string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	start := time.Now()
	out, err := exec.Command(goBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("building %s: go %s: %v\n%s", what, strings.Join(args, " "), err, out)
	}
	t.Logf("built %s in %s", what, time.Since(start).Round(time.Second))
}

// buildReleases builds each release's oracle (go build -C conformance/vX.Y) and asks
// it what kube-proxy finds on this node, in a namespace of its own.
func (h *harness) buildReleases(t *testing.T) []*release {
	dirs, _ := filepath.Glob("v*/go.mod")
	want := knob("SVCGEN_ORACLE_RELEASES", "")
	var out []*release
	for _, d := range dirs {
		name := filepath.Dir(d)
		if want != "" && !slices.Contains(strings.Split(want, ","), name) {
			continue
		}
		table, err := svcrelease.Parse(name)
		if err != nil {
			t.Fatalf("conformance/%s: svcgen's release table has no such release: %v", name, err)
		}
		r := &release{name: name, bin: filepath.Join(h.dir, "oracle-"+name), table: table}
		build(t, "the "+name+" oracle", "build", "-C", name, "-o", r.bin, ".")
		checkGates(t, r)
		l := netlab.New(t)
		ns := l.NS("probe")
		if err := json.Unmarshal([]byte(l.In(ns, r.bin, "probe")), &r.probe); err != nil {
			t.Fatalf("%s probe: %v", name, err)
		}
		l.Cleanup()
		t.Logf("%s: kube-proxy finds randomFully=%v nfacct=%v", name, r.probe.RandomFully, r.probe.NFAcct)
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatalf("no release matches SVCGEN_ORACLE_RELEASES=%q", want)
	}
	return out
}

// cases are the golden cases (see SVCGEN_ORACLE_GOLDEN), the oracle's own
// (testdata/) and the random clusters, every fourth one IPv6, and a few
// dual-stack ones (dualClusters).
func (h *harness) cases(t *testing.T) []Case {
	var cases []Case
	golden := knob("SVCGEN_ORACLE_GOLDEN", "1")
	if golden != "0" {
		gc, steps, err := GoldenCases("../golden")
		if err != nil {
			t.Fatal(err)
		}
		if golden != "all" {
			for i := range gc {
				gc[i].Release = h.releases[i%len(h.releases)].name
			}
			h.tally.note("each golden case through one release, in turn (SVCGEN_ORACLE_GOLDEN=all: through every release)")
		}
		cases = append(cases, gc...)
		h.tally.note("multi-step golden cases (step-NN, --previous) not run: %s", strings.Join(steps, ", "))
	}
	own, err := TestdataCases("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, own...)
	def := defaultClusters()
	n := atoiOr(knob("SVCGEN_ORACLE_CLUSTERS", ""), def)
	h.complete = golden != "0" && n >= def
	for seed := 1; seed <= n; seed++ {
		cases = append(cases, Case{
			Name:  fmt.Sprintf("random-%d", seed),
			Input: randcluster.Generate(uint64(seed), randcluster.Options{IPv6: seed%4 == 0, DualHost: seed%3 == 0}),
			Modes: AllModes,
		})
	}
	for seed := 1; seed <= dualClusters(n); seed++ {
		cases = append(cases, Case{
			Name:  fmt.Sprintf("random-dual-%d", seed),
			Input: randcluster.Generate(uint64(seed), randcluster.Options{Dual: true, IPv6: seed%2 == 0}),
			Modes: AllModes,
		})
	}
	return cases
}

// dualClusters is the number of dual-stack random clusters beside n single-family
// ones: one for every eight, at least one, every other one IPv6-primary (three
// at the default size, one with -short). A dual-stack comparison runs both
// proxiers and loads both families, so it costs about one and a half
// single-family ones (docs/oracle.md has the measurements).
func dualClusters(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/8)
}

// resolve runs svcgen resolve once per case: the cluster after svcgen's control
// plane does not depend on the kube-proxy release.
func (h *harness) resolve(c Case, dir string) ([]byte, error) {
	return h.once("resolve "+c.Name, func() ([]byte, error) {
		return h.run(append([]string{"resolve"}, h.inputArgs(c, dir)...)...)
	})
}

// once runs f once per key and keeps what it returned.
func (h *harness) once(key string, f func() ([]byte, error)) ([]byte, error) {
	h.mu.Lock()
	r := h.resolved[key]
	if r == nil {
		r = &resolution{}
		h.resolved[key] = r
	}
	h.mu.Unlock()
	r.once.Do(func() { r.yaml, r.err = f() })
	return r.yaml, r.err
}

// nftHeader is the line svcgen's nftables script starts each family's table with:
// "# kube-proxy v1.37 nftables rules for node node1 (IPv6), written by svcgen".
var nftHeader = regexp.MustCompile(`(?m)^# kube-proxy v1\.\d+ nftables rules for node \S+ \((IPv[46])\)`)

// families are the IP families of the case's run, as svcgen chooses them
// (compiler.families: the NodeEnvironment's ipFamily, else the families the input
// has), read from the one nftables script that holds every family's table. The
// kube-proxy side runs on a host that supports exactly these: the dual-stack
// proxier for two, as kube-proxy runs it where iptables, ip6tables and the kernel
// support both (platformCheckSupported), else the single-stack proxier of the one.
// When svcgen refuses the input, the NodeEnvironment's family (IPv4 when it says
// none) is the oracle's, and svcgen's side is its error.
func (h *harness) families(c Case, dir, node string, env Env) ([]string, error) {
	script, err := h.once("families "+c.Name, func() ([]byte, error) {
		return h.run(append([]string{"compile", "-m", "nftables", "--node", node}, h.inputArgs(c, dir)...)...)
	})
	if err != nil {
		if env.Family == "DualStack" {
			return []string{"IPv4", "IPv6"}, nil
		}
		return []string{env.Family}, nil
	}
	var fams []string
	for _, m := range nftHeader.FindAllSubmatch(script, -1) {
		fams = append(fams, string(m[1]))
	}
	if len(fams) == 0 {
		return nil, fmt.Errorf("svcgen's nftables script names no family in a header the harness knows (%s): %.200q", nftHeader, script)
	}
	return fams, nil
}

// inputArgs are the input flags of svcgen resolve and compile for a case whose files
// are in dir.
func (h *harness) inputArgs(c Case, dir string) []string {
	args := []string{"-f", filepath.Join(dir, "input.yaml")}
	if c.Config != nil {
		args = append(args, "-c", filepath.Join(dir, "case-config.yaml"))
	}
	if c.NodePortRange != "" {
		args = append(args, "--node-port-range", c.NodePortRange)
	}
	return args
}

// run runs svcgen and returns its stdout, or an error with its stderr.
func (h *harness) run(args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(h.svcgen, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("svcgen %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// compare runs one case in one mode through one release and svcgen, and records
// the outcome; differences no expectation covers fail the test.
func (h *harness) compare(t *testing.T, rel *release, mode string, c Case) {
	key := rel.name + " " + mode
	dir := t.TempDir()
	prep, err := Prepare(c, mode, rel.probe)
	if err != nil {
		t.Fatal(err)
	}
	if prep.EnvAdjusted {
		h.tally.add(key, "NodeEnvironment set to what kube-proxy finds (randomFully, nfacct)")
	}
	write(t, dir, "input.yaml", prep.Input)
	if c.Config != nil {
		write(t, dir, "case-config.yaml", c.Config)
	}
	resolved, err := h.resolve(c, dir)
	if err != nil {
		if strings.HasPrefix(c.Name, "golden/") {
			h.tally.add(key, "not run: svcgen refuses the input (objects that never passed an API server)")
			t.Skipf("svcgen refuses the input: %v", err)
		}
		t.Fatal(err)
	}
	node, err := nodeName(prep, resolved)
	if err != nil {
		h.tally.add(key, "not run: "+err.Error())
		t.Skip(err)
	}
	families, err := h.families(c, dir, node, prep.Env)
	if err != nil {
		t.Fatal(err)
	}
	if len(families) > 1 {
		h.tally.add(key, "dual-stack: both families compared")
	}
	write(t, dir, "resolved.yaml", resolved)
	write(t, dir, "oracle-config.yaml", prep.Config)
	m := &modeRun{h: h, t: t, rel: rel, mode: mode, c: c, dir: dir, env: prep.Env, families: families, resolved: resolved, node: node}
	start := time.Now()
	kp := m.kubeProxy()
	took := time.Since(start)
	sg := h.svcgenSide(m)
	t.Logf("kube-proxy side %s, then svcgen side %s", took.Round(time.Millisecond), (time.Since(start) - took).Round(time.Millisecond))
	if kp.err != nil && sg.err != nil {
		h.tally.add(key, "both refuse the input (counted as identical)")
		t.Logf("both refuse the input:\nkube-proxy: %v\nsvcgen: %v", kp.err, sg.err)
	}
	h.record(t, key, c.Name, compareSides(rel.name, kp, sg))
}

// compareSides diffs two sides part by part. When a side failed, the difference is
// its error as one changed line ("-" kube-proxy, "+" svcgen); when both failed there
// is nothing to compare.
func compareSides(rel string, kp, sg side) outcome {
	o := outcome{parts: map[string]string{}}
	switch {
	case kp.err != nil && sg.err != nil:
		return o
	case kp.err != nil:
		o.parts["run"] = "-error: " + oneLine(kp.err.Error()) + "\n"
		return o
	case sg.err != nil:
		o.parts["run"] = "+error: " + oneLine(sg.err.Error()) + "\n"
		return o
	}
	for name := range kp.parts {
		o.parts[name] = unified(rel, kp.parts[name], sg.parts[name])
	}
	for name := range sg.parts {
		if _, ok := kp.parts[name]; !ok {
			o.parts[name] = unified(rel, "", sg.parts[name])
		}
	}
	return o
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nodeName is the node the rules are for, chosen as svcgen chooses it: the
// configuration's hostnameOverride, else the only Node. kube-proxy would take the
// host's name; the oracle is told this one.
func nodeName(prep *Prepared, resolved []byte) (string, error) {
	if n := HostnameOverride(prep.Config); n != "" {
		return n, nil
	}
	nodes, err := ResolvedNodes(resolved)
	if err != nil {
		return "", err
	}
	if len(nodes) != 1 {
		return "", fmt.Errorf("no hostnameOverride and %d Nodes: svcgen needs --node", len(nodes))
	}
	return nodes[0].Name, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// outcome is what one comparison found: a diff per part (kube-proxy "-", svcgen
// "+"), empty where the two agree.
type outcome struct {
	parts map[string]string
}

// record classifies an outcome against the expectations and counts it.
func (h *harness) record(t *testing.T, key, name string, o outcome) {
	rel, mode, _ := strings.Cut(key, " ")
	var unexpected []string
	ids := map[string]bool{}
	for _, part := range sortedKeys(o.parts) {
		d := o.parts[part]
		if d == "" {
			continue
		}
		covered, uncovered := Classify(d, h.expectations, rel, mode)
		for id := range covered {
			ids[id] = true
			h.tally.example(id, key, name, part, d)
		}
		if len(uncovered) > 0 {
			unexpected = append(unexpected, part+":\n"+d)
		}
	}
	h.tally.count(key, name, ids, len(unexpected) > 0)
	if len(unexpected) > 0 {
		t.Errorf("svcgen and kube-proxy %s differ (- kube-proxy, + svcgen) in lines expected.txt does not explain:\n%s",
			rel, strings.Join(unexpected, "\n"))
	}
}

// unified is the diff of kube-proxy's and svcgen's canonical text of one part.
func unified(rel, kubeProxy, svcgen string) string {
	if kubeProxy == svcgen {
		return ""
	}
	return string(diff.Diff("kube-proxy "+rel, []byte(kubeProxy), "svcgen", []byte(svcgen)))
}

// checkGates holds svcgen's release table to the release's own feature gates: every
// gate the table lists must be one the release knows, with the same default and the
// same lock. svcgen and the oracle then agree on every gate a case leaves unset, and
// a case's featureGates reach both (svcgen reads the configuration the oracle runs).
func checkGates(t *testing.T, r *release) {
	t.Helper()
	out, err := exec.Command(r.bin, "gates").Output()
	if err != nil {
		t.Fatalf("%s gates: %v", r.name, err)
	}
	var upstream map[string]struct{ Default, Locked bool }
	if err := json.Unmarshal(out, &upstream); err != nil {
		t.Fatalf("%s gates: %v", r.name, err)
	}
	for _, g := range r.table.Gates {
		u, ok := upstream[g.Name]
		switch {
		case !ok:
			t.Errorf("release %s: svcgen lists gate %s, which kube-proxy %s does not know", r.table, g.Name, r.table.Module)
		case u.Default != g.Default || u.Locked != g.Locked:
			t.Errorf("release %s: svcgen has gate %s default %v locked %v; kube-proxy %s: default %v locked %v",
				r.table, g.Name, g.Default, g.Locked, r.table.Module, u.Default, u.Locked)
		}
	}
}
