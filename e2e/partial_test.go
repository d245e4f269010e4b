package e2e

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// step is a cluster state: the examples with some documents changed.
type step struct {
	name  string
	extra string // manifests added to the examples
	drop  string // a Service (namespace/name) left out
}

var partialSteps = []step{
	{name: "examples"},
	{name: "new service", extra: svcWithEndpoints("extra", "198.19.1.1", 8080, "198.18.1.31", "198.18.2.32")},
	{name: "endpoint removed", extra: svcWithEndpoints("extra", "198.19.1.1", 8080, "198.18.1.31")},
	{name: "endpoint changed", extra: svcWithEndpoints("extra", "198.19.1.1", 8080, "198.18.1.33")},
	{name: "service deleted"},
	{name: "node port service deleted", drop: "default/hello-service2"},
	{name: "back to examples"},
}

// compileStep writes a step's --noflush payload, or with partial set, the partial sync
// against partial.Previous.
func compileStep(t *testing.T, s step, partial *iptplan.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	err := iptrules.Write(&b, mapStep(t, s), iptrules.Options{Format: iptrules.NoFlush})
	if partial != nil {
		b.Reset()
		err = iptplan.Write(&b, mapStep(t, s), *partial)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mapStep(t *testing.T, s step) *ir.ServiceMap {
	t.Helper()
	return mapStepMode(t, s, "")
}

// mapStepMode compiles a step for one proxy mode.
func mapStepMode(t *testing.T, s step, mode compiler.Mode) *ir.ServiceMap {
	t.Helper()
	l := &load.Loader{}
	for _, p := range []string{"../examples"} {
		l.Path(p, nil)
	}
	if s.extra != "" {
		l.Bytes("extra.yaml", []byte(s.extra))
	}
	if s.drop != "" {
		kept := l.Cluster.Services[:0]
		for _, svc := range l.Cluster.Services {
			if svc.Key() != s.drop {
				kept = append(kept, svc)
			}
		}
		l.Cluster.Services = kept
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return testkit.CompileCluster(t, &l.Cluster, pipeline.Settings{Mode: mode}).Map
}

// changesStep is apply --watch's restore from one step to the next: against the rules
// on the node and the map they were loaded from, naming every Service of either map
// as changed (a superset of what changed, as Options.Changed allows), or with all
// set, a full sync.
func changesStep(t *testing.T, prev, next step, rules *iptsyntax.Ruleset, all bool) []byte {
	t.Helper()
	pm, nm := mapStep(t, prev), mapStep(t, next)
	opts := iptplan.Options{Previous: rules, PreviousMap: pm, Minimal: true}
	if all {
		opts.FullSync, opts.Minimal = true, false
	} else {
		seen := map[string]bool{}
		for _, m := range []*ir.ServiceMap{pm, nm} {
			for _, s := range m.Services {
				seen[s.Key()] = true
			}
		}
		opts.Changed = []string{}
		for k := range seen {
			opts.Changed = append(opts.Changed, k)
		}
		sort.Strings(opts.Changed)
	}
	var b bytes.Buffer
	if err := iptplan.Write(&b, nm, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPartialRestoreMatchesFullLoad: after each change, the previous state plus the
// partial restore (kube-proxy's shape and --minimal) leaves the node exactly as a
// fresh full load of the new state does, as iptables-save reports it. Rules from another
// tool in the same tables survive.
func TestPartialRestoreMatchesFullLoad(t *testing.T) {
	l := netlab.New(t)
	node, fresh := l.NS("node"), l.NS("fresh")
	l.Counters(node, iptrules.Counters...)
	l.Counters(fresh, iptrules.Counters...)
	other := []byte("*nat\n:OTHER-TOOL - [0:0]\n-A OTHER-TOOL -d 198.18.9.9/32 -j RETURN\n-A PREROUTING -j OTHER-TOOL\nCOMMIT\n")
	if err := l.Feed(node, other, "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	for i, s := range partialSteps {
		full := compileStep(t, s, nil)
		if i == 0 {
			mustRestore(t, l, node, full)
			continue
		}
		// The node's state before this step, to start each variant from it.
		saved := []byte(l.In(node, "iptables-save"))
		prev, err := iptsyntax.ParseBytes("iptables-save", saved)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Feed(fresh, full, "iptables-restore"); err != nil {
			t.Fatal(err)
		}
		mustRestore(t, l, fresh, other)
		want := saveOf(t, l, fresh)
		for _, variant := range []string{"partial", "minimal", "changes", "resync"} {
			minimal := variant == "minimal"
			if err := l.Feed(node, saved, "iptables-restore"); err != nil {
				t.Fatal(err)
			}
			var partial []byte
			switch variant {
			case "changes", "resync":
				partial = changesStep(t, partialSteps[i-1], s, prev, variant == "resync")
			default:
				partial = compileStep(t, s, &iptplan.Options{Previous: prev, Minimal: minimal})
			}
			mustRestore(t, l, node, partial)
			if got := saveOf(t, l, node); got != want {
				t.Errorf("step %q (%s): partial restore leaves\n%s\nwant\n%s\npartial was:\n%s", s.name, variant, got, want, partial)
			}
			if minimal && bytes.Contains(partial, []byte(":KUBE-POSTROUTING")) {
				t.Errorf("step %q: --minimal rewrote KUBE-POSTROUTING, which never changes", s.name)
			}
		}
	}
}

func mustRestore(t *testing.T, l *netlab.Lab, ns string, data []byte) {
	t.Helper()
	if err := l.Feed(ns, data, "iptables-restore", "--noflush"); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
}

// saveOf is the node's nat and filter state as canonical rule keys, chain by chain.
func saveOf(t *testing.T, l *netlab.Lab, ns string) string {
	t.Helper()
	rs, err := iptsyntax.ParseBytes("iptables-save", []byte(l.In(ns, "iptables-save")))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, tb := range rs.Tables {
		if tb.Name != "nat" && tb.Name != "filter" {
			continue
		}
		for _, c := range tb.Chains {
			lines = append(lines, fmt.Sprintf("%s :%s", tb.Name, c.Name))
			for i, r := range c.Rules {
				lines = append(lines, fmt.Sprintf("%s %s %03d %s", tb.Name, c.Name, i, iptsyntax.RuleKey(r.Args)))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestNFTPartialMatchesWhole is TestPartialRestoreMatchesFullLoad for nftables mode:
// after each change, the table on the node (as the kernel lists it) plus the partial
// sync, kube-proxy's shape and --minimal, leaves exactly the objects a fresh load of
// the whole script leaves, as "nft list table" prints them (the kernel lists chains in
// the order they were made, so the listings are compared object by object, sorted).
// Another program's table stays.
func TestNFTPartialMatchesWhole(t *testing.T) {
	l := netlab.New(t)
	node, fresh := l.NS("nftnode"), l.NS("nftfresh")
	other := []byte("table ip other-tool {\n chain c {\n  type filter hook input priority 10 ;\n  ip saddr 198.18.7.7 accept\n }\n}\n")
	if err := l.Feed(node, other, "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	otherTable := l.In(node, "nft", "list", "table", "ip", "other-tool")
	var saved string // the node's table before the step, as nft lists it
	for i, s := range partialSteps {
		sm := mapStepMode(t, s, compiler.NFTables)
		var whole bytes.Buffer
		if err := nftrules.Write(&whole, sm, nftrules.Options{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := l.Feed(node, whole.Bytes(), "nft", "-f", "-"); err != nil {
				t.Fatal(err)
			}
			saved = l.In(node, "nft", "list", "table", "ip", "kube-proxy")
			continue
		}
		l.In(fresh, "nft", "flush", "ruleset")
		if err := l.Feed(fresh, whole.Bytes(), "nft", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		want := nftObjects(t, l.In(fresh, "nft", "list", "table", "ip", "kube-proxy"))
		prev, err := nftsyntax.ParseBytes("nft list table", []byte(saved))
		if err != nil {
			t.Fatal(err)
		}
		for _, minimal := range []bool{false, true} {
			// Start each variant from the table as it was before the step.
			reset := append([]byte("add table ip kube-proxy\ndelete table ip kube-proxy\n"), saved...)
			if err := l.Feed(node, reset, "nft", "-f", "-"); err != nil {
				t.Fatal(err)
			}
			var partial bytes.Buffer
			if err := nftplan.Write(&partial, sm, nftplan.Options{Previous: prev, Minimal: minimal}); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(partial.Bytes(), []byte("delete table")) {
				t.Errorf("step %q (minimal %v): a whole table, want a partial sync", s.name, minimal)
			}
			if err := l.Feed(node, partial.Bytes(), "nft", "-f", "-"); err != nil {
				t.Fatalf("step %q (minimal %v): %v\n%s", s.name, minimal, err, partial.Bytes())
			}
			if got := nftObjects(t, l.In(node, "nft", "list", "table", "ip", "kube-proxy")); got != want {
				t.Errorf("step %q (minimal %v): previous table + partial sync leaves\n%s\nwant\n%s\npartial was:\n%s", s.name, minimal, lineDiff(want, got), want, partial.Bytes())
			}
			listed, err := nftsyntax.ParseBytes("nft list table", []byte(l.In(node, "nft", "list", "table", "ip", "kube-proxy")))
			if err != nil {
				t.Fatal(err)
			}
			if !nftplan.Equivalent(listed.Tables[knftables.IPv4Family], nftrules.Build(sm)) {
				t.Errorf("step %q (minimal %v): the table reads back unlike the step's", s.name, minimal)
			}
		}
		saved = l.In(node, "nft", "list", "table", "ip", "kube-proxy")
	}
	if got := l.In(node, "nft", "list", "table", "ip", "other-tool"); got != otherTable {
		t.Errorf("the other program's table changed:\n%s\nwant\n%s", got, otherTable)
	}
}

// nftObjects is an "nft list table" listing as the sorted "add" lines of its objects.
func nftObjects(t *testing.T, listing string) string {
	t.Helper()
	rs, err := nftsyntax.ParseBytes("nft list table", []byte(listing))
	if err != nil {
		t.Fatalf("%v\n%s", err, listing)
	}
	var b bytes.Buffer
	for _, st := range rs.Tables {
		if err := nftsyntax.WriteState(&b, st); err != nil {
			t.Fatal(err)
		}
	}
	return upstreamtest.SortNFTablesTransaction(b.String())
}
