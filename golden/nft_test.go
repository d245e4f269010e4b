package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	"github.com/svcgen/svcgen/ir"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/trace"
)

// runNFTCase compiles a case in nftables mode and compares nftables.nft. A step of a
// multi-step case, or a case whose README names a "previous:" file, is compiled with
// --previous; the table it leaves is that previous table with the output applied.
// That table is compared with upstream.nft as upstream compares, and traced through
// flows.yaml in cases that are nftables only.
func runNFTCase(t *testing.T, c goldenCase) {
	res := compileCaseMode(t, c, false, compiler.NFTables)
	before := nftBefore(t, c)
	var opts nftplan.Options
	if before != nil {
		prev, err := nftsyntax.ParseBytes("previous", before)
		if err != nil {
			t.Fatal(err)
		}
		opts.Previous = prev
	}
	got := emitNFT(t, res.Map, opts)
	testkit.CompareGolden(t, c.file("nftables.nft"), got, *update)
	if again := emitNFT(t, compileCaseMode(t, c, true, compiler.NFTables).Map, opts); !bytes.Equal(again, got) {
		t.Errorf("documents in reverse order give other bytes:\n%s", lineDiff("forward", got, "reversed", again))
	}
	table := nftTable(t, res.Map, append(append([]byte(nil), before...), got...))
	if before != nil {
		checkMinimalNFT(t, c, res, opts, before, table)
	}
	if exp, err := os.ReadFile(filepath.Join(c.dir, "upstream.nft")); err == nil {
		compareUpstreamNFT(t, c, table, exp)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "flows.yaml")); err == nil && !c.has("iptables") {
		runNFTFlows(t, c, res, table)
	}
	if want, ok := readmeValue(c, "operations:"); ok {
		n, err := strconv.Atoi(want)
		if err != nil {
			t.Fatalf("README operations: %v", err)
		}
		if ops := countOps(got); ops != n {
			t.Errorf("%d operations, upstream's partial sync has %d (%s):\n%s", ops, n, c.upstream, got)
		}
	}
}

// checkMinimalNFT compiles a case that has a table before it with --minimal as well:
// nftables-minimal.nft, which must leave the same table as the kube-proxy-shaped
// partial sync (and so match upstream's dump), with no more operations.
func checkMinimalNFT(t *testing.T, c goldenCase, res *pipeline.Result, opts nftplan.Options, before []byte, table *nftsyntax.State) {
	t.Helper()
	opts.Minimal = true
	minimal := emitNFT(t, res.Map, opts)
	testkit.CompareGolden(t, c.file("nftables-minimal.nft"), minimal, *update)
	left := nftTable(t, res.Map, append(append([]byte(nil), before...), minimal...))
	var a, b bytes.Buffer
	if err := nftsyntax.WriteState(&a, left); err != nil {
		t.Fatal(err)
	}
	if err := nftsyntax.WriteState(&b, table); err != nil {
		t.Fatal(err)
	}
	if x, y := upstreamtest.SortNFTablesTransaction(a.String()), upstreamtest.SortNFTablesTransaction(b.String()); x != y {
		t.Errorf("--minimal leaves another table than the kube-proxy-shaped partial sync:\n%s", lineDiff("partial", []byte(y+"\n"), "minimal", []byte(x+"\n")))
	}
	if countOps(minimal) > countOps(emitNFT(t, res.Map, nftplan.Options{Previous: opts.Previous})) {
		t.Errorf("--minimal writes more operations than the kube-proxy-shaped partial sync:\n%s", minimal)
	}
}

// nftBefore is the table on the node before the case: the previous step's whole
// script, or the README's "previous:" file (upstream's fake writes the mark as 0x4000;
// the node's is 0x00004000).
func nftBefore(t *testing.T, c goldenCase) []byte {
	if name, ok := readmeValue(c, "previous:"); ok {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.ReplaceAll(string(data), "0x4000", "0x00004000"))
	}
	base := filepath.Base(c.dir)
	n, ok := strings.CutPrefix(base, "step-")
	if !ok || n == "01" {
		return nil
	}
	num, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("step folder %s: %v", base, err)
	}
	prev := goldenCase{dir: filepath.Join(filepath.Dir(c.dir), "step-"+twoDigits(num-1)), upstream: c.upstream, release: c.release}
	return emitNFT(t, compileCaseMode(t, prev, false, compiler.NFTables).Map, nftplan.Options{})
}

// readmeValue is the rest of the README line that starts with key.
func readmeValue(c goldenCase, key string) (string, bool) {
	readme, _ := os.ReadFile(filepath.Join(c.dir, "README"))
	for _, line := range strings.Split(string(readme), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// emitNFT writes sm's table, or with opts.Previous the sync against it.
func emitNFT(t *testing.T, sm *ir.ServiceMap, opts nftplan.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	write := func() error { return nftrules.Write(&b, sm, nftrules.Options{}) }
	if opts.Previous != nil {
		write = func() error { return nftplan.Write(&b, sm, opts) }
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// nftTable applies script text (through knftables' Fake, which refuses a reference
// to a missing object) and returns the table of the service map's family it leaves.
func nftTable(t *testing.T, sm *ir.ServiceMap, script []byte) *nftsyntax.State {
	t.Helper()
	rs, err := nftsyntax.ParseBytes("script", script)
	if err != nil {
		t.Fatalf("the script does not apply: %v", err)
	}
	for _, st := range rs.Tables {
		return st
	}
	t.Fatal("the script leaves no table")
	return nil
}

// countOps counts the operations of a script: its lines that are not blank or comments.
func countOps(script []byte) int {
	n := 0
	for _, l := range strings.Split(string(script), "\n") {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			n++
		}
	}
	return n
}

// compareUpstreamNFT compares a table with upstream's expected dump as upstream does:
// both as knftables' Fake.Dump prints them, sorted by sortNFTablesTransaction. The mark
// is 0x4000 in upstream's fake and 0x00004000 on a node.
func compareUpstreamNFT(t *testing.T, c goldenCase, table *nftsyntax.State, exp []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := nftsyntax.WriteState(&b, table); err != nil {
		t.Fatal(err)
	}
	ours := upstreamtest.SortNFTablesTransaction(strings.ReplaceAll(b.String(), "0x00004000", "0x4000"))
	theirs := upstreamtest.SortNFTablesTransaction(string(exp))
	if ours != theirs {
		t.Errorf("differs from upstream (%s), both sorted as upstream sorts:\n%s", c.upstream, lineDiff("upstream", []byte(theirs+"\n"), "svcgen", []byte(ours+"\n")))
	}
}

// runNFTFlows traces each flow of flows.yaml through the table and compares as
// runFlows does for iptables.
func runNFTFlows(t *testing.T, c goldenCase, res *pipeline.Result, table *nftsyntax.State) {
	tr, err := trace.NewNFT(table, hostOf(res))
	if err != nil {
		t.Fatal(err)
	}
	checkFlows(t, c, compiler.NFTables, res, tr.Trace)
}
