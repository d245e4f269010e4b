// Package golden runs the golden cases of this folder; see README.md.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/release"
)

var update = flag.Bool("update", false, "rewrite svcgen's expected files (read the diff before committing it)")

// goldenCase is one folder with an input.yaml.
type goldenCase struct {
	dir      string
	upstream string // the README's "upstream:" line, empty for svcgen's own cases
	chain    []string
	// fullSync: a step that kube-proxy ran as a full sync ("sync: full" in the README).
	fullSync bool
	// modes the case is compiled in ("modes:" in the README; default every mode).
	modes []string
	// release is the kube-proxy release the expected files are for ("release:" in the
	// README; default the newest).
	release release.Release
	// multi: the README names several releases ("releases: 1.35 1.37"), so each
	// release's expected files carry it ("nftables-1.37.nft"); the case is run once
	// per release.
	multi bool
}

// name is the case's name in test output: its folder, and its release when it has
// several.
func (c goldenCase) name() string {
	if c.multi {
		return c.dir + "@" + c.release.String()
	}
	return c.dir
}

// file is the path of one of the case's expected files ("nftables.nft"), for its
// release when it has several ("nftables-1.37.nft").
func (c goldenCase) file(name string) string {
	if c.multi {
		ext := filepath.Ext(name)
		name = strings.TrimSuffix(name, ext) + "-" + c.release.String() + ext
	}
	return filepath.Join(c.dir, name)
}

// has reports whether the case is compiled in a mode.
func (c goldenCase) has(mode string) bool {
	return len(c.modes) == 0 || slices.Contains(c.modes, mode)
}

func findCases(t *testing.T) []goldenCase {
	var cases []goldenCase
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "input.yaml" {
			return err
		}
		c := goldenCase{dir: filepath.Dir(p)}
		var releases []release.Release
		readme, _ := os.ReadFile(filepath.Join(c.dir, "README"))
		for _, line := range strings.Split(string(readme), "\n") {
			if v, ok := strings.CutPrefix(line, "upstream:"); ok && c.upstream == "" {
				c.upstream = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "chain:"); ok {
				c.chain = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(line, "modes:"); ok {
				c.modes = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(line, "release:"); ok {
				v = "releases:" + v
				line = v
			}
			if v, ok := strings.CutPrefix(line, "releases:"); ok {
				for _, f := range strings.Fields(v) {
					r, err := release.Parse(f)
					if err != nil {
						return fmt.Errorf("%s/README: %w", c.dir, err)
					}
					releases = append(releases, r)
				}
			}
			if strings.TrimSpace(line) == "sync: full" {
				c.fullSync = true
			}
		}
		if len(releases) == 0 {
			releases = []release.Release{release.Newest()}
		}
		for _, r := range releases {
			c.release, c.multi = r, len(releases) > 1
			cases = append(cases, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(cases, func(i, j int) bool { return cases[i].dir < cases[j].dir })
	return cases
}

func TestGolden(t *testing.T) {
	cases := findCases(t)
	if len(cases) == 0 {
		t.Fatal("no golden cases found")
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) { runCase(t, c) })
	}
}

func runCase(t *testing.T, c goldenCase) {
	if len(compileCase(t, c, false).Maps) > 1 {
		runDualCase(t, c)
		return
	}
	if c.has("nftables") {
		t.Run("nftables", func(t *testing.T) { runNFTCase(t, c) })
	}
	if !c.has("iptables") {
		return
	}
	res := compileCase(t, c, false)
	var partial *iptplan.Options
	if prev := previousStep(t, c); prev != nil {
		partial = &iptplan.Options{Previous: prev, FullSync: c.fullSync}
	}
	got := emit(t, res, partial)
	testkit.CompareGolden(t, c.file("iptables.rules"), got, *update)

	if again := emit(t, compileCase(t, c, true), partial); !bytes.Equal(again, got) {
		t.Errorf("documents in reverse order give other bytes:\n%s", lineDiff("forward", got, "reversed", again))
	}
	if exp, err := os.ReadFile(filepath.Join(c.dir, "upstream.iptables")); err == nil {
		compareUpstream(t, c, got, exp)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "flows.yaml")); err == nil {
		runFlows(t, c, res)
	}
	runVerify(t, res)
}

// previousStep: step N of a multi-step case runs against step N-1's complete payload.
func previousStep(t *testing.T, c goldenCase) *iptsyntax.Ruleset {
	base := filepath.Base(c.dir)
	n, ok := strings.CutPrefix(base, "step-")
	if !ok || n == "01" {
		return nil
	}
	var num int
	for _, ch := range n {
		num = num*10 + int(ch-'0')
	}
	prevDir := filepath.Join(filepath.Dir(c.dir), "step-"+twoDigits(num-1))
	prevCase := goldenCase{dir: prevDir, upstream: c.upstream, release: c.release}
	full := emit(t, compileCase(t, prevCase, false), nil)
	rs, err := iptsyntax.ParseBytes(prevDir, full)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func twoDigits(n int) string {
	if n < 10 {
		return "0" + string(rune('0'+n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// compileCase loads input.yaml and config.yaml (documents reversed when asked) and
// compiles. Upstream cases are resolved without allocation: kube-proxy's tests feed
// objects that never passed an API server.
func compileCase(t *testing.T, c goldenCase, reverse bool) *pipeline.Result {
	t.Helper()
	return compileCaseMode(t, c, reverse, "")
}

// compileCaseMode is compileCase in a mode ("" for the configuration's).
func compileCaseMode(t *testing.T, c goldenCase, reverse bool, mode compiler.Mode) *pipeline.Result {
	t.Helper()
	l := &load.Loader{}
	for _, name := range []string{"input.yaml", "config.yaml"} {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			if name == "config.yaml" {
				continue
			}
			t.Fatal(err)
		}
		docs := splitDocuments(data)
		if reverse {
			for i, j := 0, len(docs)-1; i < j; i, j = i+1, j-1 {
				docs[i], docs[j] = docs[j], docs[i]
			}
		}
		for _, d := range docs {
			l.Bytes(name, d)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("loading: %v", err)
	}
	return testkit.CompileCluster(t, &l.Cluster, pipeline.Settings{NoAllocate: c.upstream != "", Mode: mode, Release: c.release})
}

func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// emit writes the map's iptables payload (--noflush), or with partial set, the partial
// sync against partial.Previous.
func emit(t *testing.T, res *pipeline.Result, partial *iptplan.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	err := iptrules.Write(&b, res.Map, iptrules.Options{Format: iptrules.NoFlush})
	if partial != nil {
		b.Reset()
		err = iptplan.Write(&b, res.Map, *partial)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// compareUpstream compares with upstream's expected text as upstream does: both sides
// sorted by its sortIPTablesRules, then byte for byte. Upstream's fake proxier
// hard-codes the mark as 0x4000 where kube-proxy on a node writes 0x00004000.
func compareUpstream(t *testing.T, c goldenCase, got, exp []byte) {
	t.Helper()
	ours := strings.ReplaceAll(string(got), "0x00004000", "0x4000")
	if len(c.chain) == 2 {
		// upstream.iptables holds just the chain's expected rule lines.
		a, err := upstreamtest.ChainRules(ours, c.chain[0], c.chain[1])
		if err != nil {
			t.Fatalf("chain %v: %v", c.chain, err)
		}
		var b []string
		for _, l := range strings.Split(string(exp), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				b = append(b, l)
			}
		}
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("chain %v differs from upstream (%s):\n%s", c.chain, c.upstream,
				lineDiff("upstream", []byte(strings.Join(b, "\n")+"\n"), "svcgen", []byte(strings.Join(a, "\n")+"\n")))
		}
		return
	}
	a, err := upstreamtest.SortIPTablesRules(ours)
	if err != nil {
		t.Fatalf("sorting ours: %v", err)
	}
	b, err := upstreamtest.SortIPTablesRules(string(exp))
	if err != nil {
		t.Fatalf("sorting upstream.iptables: %v", err)
	}
	if a != b {
		t.Errorf("differs from upstream (%s), both sorted as upstream sorts:\n%s", c.upstream, lineDiff("upstream", []byte(b), "svcgen", []byte(a)))
	}
}

func lineDiff(aName string, a []byte, bName string, b []byte) string {
	return string(diff.Diff(aName, a, bName, b))
}
