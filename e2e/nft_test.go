package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

func nftScript(t *testing.T, res *pipeline.Result, opts nftrules.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := nftrules.Write(&b, res.Map, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// listTable reads the kube-proxy table of a family back from the kernel.
func listTable(t *testing.T, l *netlab.Lab, ns string, family knftables.Family) (string, *nftsyntax.State) {
	t.Helper()
	out := l.In(ns, "nft", "list", "table", string(family), "kube-proxy")
	rs, err := nftsyntax.ParseBytes("nft list table", []byte(out))
	if err != nil {
		t.Fatalf("reading the listing back: %v\n%s", err, out)
	}
	return out, rs.Tables[family]
}

// TestNFTablesExamples loads the compiled examples into a node namespace with nft -f
// and checks with real connections, as TestIPTablesExamples does for iptables. Loading
// the script twice leaves the same table; the listing reads back as the table svcgen
// wrote; the staged script and a partial sync leave the same table as the whole one.
func TestNFTablesExamples(t *testing.T) {
	netlab.Require(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is not installed: %v", err)
	}
	res := testkit.CompileFiles(t, pipeline.Settings{Mode: compiler.NFTables}, "../examples")
	script := nftScript(t, res, nftrules.Options{})
	want := nftrules.Build(res.Map)
	l := netlab.New(t)
	c := buildCluster(l, res.Map)
	if err := l.Feed(c.node, script, "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	first, listed := listTable(t, l, c.node, knftables.IPv4Family)
	if err := l.Feed(c.node, script, "nft", "-f", "-"); err != nil {
		t.Fatalf("loading the script a second time: %v", err)
	}
	if second, _ := listTable(t, l, c.node, knftables.IPv4Family); second != first {
		t.Errorf("loading the script twice changed the table:\n%s", lineDiff(first, second))
	}
	if !nftplan.Equivalent(listed, want) {
		t.Errorf("the kernel's table reads back unlike the one svcgen wrote:\n%s", first)
	}
	checkExamples(t, c)

	t.Run("staged load leaves the same table", func(t *testing.T) {
		staged := nftScript(t, res, nftrules.Options{Stages: true})
		if err := l.Feed(c.node, staged, "sh", "-s"); err != nil {
			t.Fatal(err)
		}
		if _, got := listTable(t, l, c.node, knftables.IPv4Family); !nftplan.Equivalent(got, want) {
			t.Errorf("the staged script leaves another table")
		}
	})
	t.Run("partial sync leaves the whole new table", func(t *testing.T) {
		dir := editedExamples(t, "name: hello-service2\n", "name: hello-service3\n")
		next := testkit.CompileFiles(t, pipeline.Settings{Mode: compiler.NFTables}, dir)
		listing, _ := listTable(t, l, c.node, knftables.IPv4Family)
		prev, err := nftsyntax.ParseBytes("listing", []byte(listing))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := nftplan.Write(&b, next.Map, nftplan.Options{Previous: prev}); err != nil {
			t.Fatal(err)
		}
		partial := b.Bytes()
		if bytes.Contains(partial, []byte("delete table")) || len(partial) == 0 {
			t.Fatalf("want a partial sync, got:\n%s", partial)
		}
		if err := l.Feed(c.node, partial, "nft", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, partial)
		}
		if _, got := listTable(t, l, c.node, knftables.IPv4Family); !nftplan.Equivalent(got, nftrules.Build(next.Map)) {
			t.Errorf("previous table + partial sync differs from the new whole table")
		}
	})
}

// editedExamples copies ../examples with one replacement in cluster.yaml.
func editedExamples(t *testing.T, old, new string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"cluster.yaml", "list.yaml"} {
		data, err := os.ReadFile(filepath.Join("../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "cluster.yaml" {
			if !bytes.Contains(data, []byte(old)) {
				t.Fatalf("examples changed: %q not found", old)
			}
			data = bytes.Replace(data, []byte(old), []byte(new), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}

// TestNFTablesGoldenLoad loads every golden case's nftables.nft into a namespace with
// the real nft, so the kernel checks each one, and reads the table back: it must be
// the table the script describes. The steps of a multi-step case load in order, each
// on top of the one before; a case with a "previous:" file loads that first. A case's
// nftables-minimal.nft (--minimal) is loaded over the same table in a namespace of its
// own and must leave the table the kube-proxy-shaped partial sync leaves.
func TestNFTablesGoldenLoad(t *testing.T) {
	netlab.Require(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is not installed: %v", err)
	}
	paths, err := filepath.Glob("../golden/*/nftables.nft")
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := filepath.Glob("../golden/*/step-*/nftables.nft")
	paths = append(paths, steps...)
	sort.Strings(paths)
	if len(paths) < 40 {
		t.Fatalf("found only %d golden nftables.nft files", len(paths))
	}
	l := netlab.New(t)
	ns, minns := l.NS("golden"), l.NS("goldenmin")
	var before []byte // the script text the namespace's table came from
	for _, p := range paths {
		dir := filepath.Dir(p)
		script, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(dir), "step-") || filepath.Base(dir) == "step-01" {
			l.In(ns, "nft", "flush", "ruleset")
			before = nil
			if prev := previousFile(t, dir); prev != nil {
				if err := l.Feed(ns, prev, "nft", "-f", "-"); err != nil {
					t.Fatalf("%s: previous table: %v", dir, err)
				}
				before = prev
			}
		}
		if minimal, err := os.ReadFile(filepath.Join(dir, "nftables-minimal.nft")); err == nil {
			loadMinimal(t, l, minns, p, before, minimal)
		}
		if err := l.Feed(ns, script, "nft", "-f", "-"); err != nil {
			t.Errorf("%s: nft -f refused it: %v", p, err)
			continue
		}
		before = append(before, script...)
		rs, err := nftsyntax.ParseBytes(p, before)
		if err != nil {
			t.Fatal(err)
		}
		for family, want := range rs.Tables {
			if _, got := listTable(t, l, ns, family); !nftplan.Equivalent(got, want) {
				t.Errorf("%s: the kernel's %s table reads back unlike the script's", p, family)
			}
		}
	}
}

// loadMinimal loads the script text before (the table a step starts from), then a
// minimal partial sync, into an empty namespace; the table the kernel lists must be
// the one the step's kube-proxy-shaped partial sync (nftables.nft) leaves.
func loadMinimal(t *testing.T, l *netlab.Lab, ns, path string, before, minimal []byte) {
	t.Helper()
	script, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l.In(ns, "nft", "flush", "ruleset")
	if err := l.Feed(ns, before, "nft", "-f", "-"); err != nil {
		t.Fatalf("%s: the table before: %v", path, err)
	}
	if len(minimal) > 0 {
		if err := l.Feed(ns, minimal, "nft", "-f", "-"); err != nil {
			t.Errorf("%s: nft -f refused the minimal partial: %v\n%s", path, err, minimal)
			return
		}
	}
	rs, err := nftsyntax.ParseBytes(path, append(append([]byte(nil), before...), script...))
	if err != nil {
		t.Fatal(err)
	}
	for family, want := range rs.Tables {
		if _, got := listTable(t, l, ns, family); !nftplan.Equivalent(got, want) {
			t.Errorf("%s: the minimal partial leaves another %s table than the partial sync", path, family)
		}
	}
}

// previousFile is the table a golden case starts from (README "previous: FILE"), with
// the node's mark text.
func previousFile(t *testing.T, dir string) []byte {
	readme, _ := os.ReadFile(filepath.Join(dir, "README"))
	for _, line := range strings.Split(string(readme), "\n") {
		if name, ok := strings.CutPrefix(line, "previous:"); ok {
			data, err := os.ReadFile(filepath.Join(dir, strings.TrimSpace(name)))
			if err != nil {
				t.Fatal(err)
			}
			return []byte(strings.ReplaceAll(string(data), "0x4000", "0x00004000"))
		}
	}
	return nil
}
