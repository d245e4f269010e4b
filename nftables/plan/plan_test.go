package plan

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/internal/nfttest"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/release"
	"sigs.k8s.io/knftables"
)

// whole is the whole script of a service map.
func whole(t *testing.T, sm *ir.ServiceMap) []byte {
	t.Helper()
	return nfttest.Text(t, func(w io.Writer) error { return rules.Write(w, sm, rules.Options{}) })
}

// write is the sync of a service map against opts.Previous.
func write(t *testing.T, sm *ir.ServiceMap, opts Options) []byte {
	t.Helper()
	return nfttest.Text(t, func(w io.Writer) error { return Write(w, sm, opts) })
}

// parse reads script text.
func parse(t *testing.T, text []byte) *syntax.Ruleset {
	t.Helper()
	rs, err := syntax.ParseBytes("before", text)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// dump is a state as knftables' Fake.Dump prints it, sorted as upstream's tests sort
// (set and map elements have no order).
func dump(t *testing.T, st *syntax.State) string {
	t.Helper()
	return upstreamtest.SortNFTablesTransaction(string(nfttest.Text(t, func(w io.Writer) error { return syntax.WriteState(w, st) })))
}

// applyScript runs script text on top of an earlier state (see syntax.Parse, which
// refuses what nft refuses) and returns the table it leaves.
func applyScript(t *testing.T, before []byte, script []byte) *syntax.State {
	t.Helper()
	rs, err := syntax.ParseBytes("script", append(append([]byte(nil), before...), script...))
	if err != nil {
		t.Fatalf("the script does not apply: %v", err)
	}
	return rs.Tables[knftables.IPv4Family]
}

// checkLeaves applies script on top of before and checks that it leaves exactly sm's
// table; what names the script in the message.
func checkLeaves(t *testing.T, what string, before, script []byte, sm *ir.ServiceMap) {
	t.Helper()
	if d, w := dump(t, applyScript(t, before, script)), dump(t, rules.Build(sm)); d != w {
		t.Errorf("%s leaves:\n%s\nwant the table it describes:\n%s", what, d, w)
	}
}

// (The chains these partial syncs name are v1.35's: an endpoint chain per endpoint.)
func TestPartialSync(t *testing.T) {
	before := whole(t, nfttest.ExamplesFor(t, "1.35"))
	prev := parse(t, before)
	t.Run("nothing changed writes nothing", func(t *testing.T) {
		if out := write(t, nfttest.ExamplesFor(t, "1.35"), Options{Previous: prev}); len(out) != 0 {
			t.Errorf("partial sync without changes wrote:\n%s", out)
		}
	})
	t.Run("an endpoint leaves", func(t *testing.T) {
		// hello-2 no longer matches the selector of both hello Services.
		sm := nfttest.ExamplesFor(t, "1.35", [2]string{"name: hello-2\n  namespace: default\n  labels:\n    app: hello", "name: hello-2\n  namespace: default\n  labels:\n    app: other"})
		out := write(t, sm, Options{Previous: prev})
		text := string(out)
		for _, want := range []string{
			"flush chain ip kube-proxy service-2E7DC2X4-default/hello-service/tcp/http\n",
			"numgen random mod 1 vmap",
			"delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("partial sync lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "shop/cart") || strings.Contains(text, "add table") {
			t.Errorf("partial sync rewrote what did not change:\n%s", text)
		}
		checkLeaves(t, "previous + partial sync", before, out, sm)
	})
	t.Run("a Service leaves and elements follow", func(t *testing.T) {
		sm := nfttest.ExamplesFor(t, "1.35", [2]string{"name: hello-service2\n", "name: hello-service3\n"})
		out := write(t, sm, Options{Previous: prev})
		text := string(out)
		for _, want := range []string{"delete element ip kube-proxy service-ips {", "delete chain ip kube-proxy service-7TLBIAYF-default/hello-service2/tcp/http\n", "add element ip kube-proxy service-ips {"} {
			if !strings.Contains(text, want) {
				t.Errorf("partial sync lacks %q:\n%s", want, text)
			}
		}
		checkLeaves(t, "previous + partial sync", before, out, sm)
	})
	t.Run("a fixed change rewrites the table", func(t *testing.T) {
		sm := nfttest.ExamplesFor(t, "1.35", [2]string{"198.19.0.0/16", "198.18.0.0/15"})
		out := write(t, sm, Options{Previous: prev})
		if !bytes.HasPrefix(nfttest.Body(out), []byte("add table ip kube-proxy")) || !bytes.Contains(out, []byte("\ndelete table ip kube-proxy\n")) {
			t.Errorf("a changed ServiceCIDR should rewrite the whole table, got:\n%s", out)
		}
	})
}

// TestMinimalPartialSync: --minimal leaves exactly the table the kube-proxy-shaped
// partial sync leaves (and the whole script), writes no more than it, and leaves out
// the chains of a changed Service whose rules are the same.
func TestMinimalPartialSync(t *testing.T) {
	before := whole(t, nfttest.ExamplesFor(t, "1.35"))
	prev := parse(t, before)
	for _, tc := range []struct {
		name  string
		edits [][2]string
		// has and lacks are lines the minimal partial must and must not have.
		has, lacks []string
	}{
		{name: "nothing changed"},
		{
			name:  "an endpoint moves",
			edits: [][2]string{{"198.18.2.12", "198.18.2.13"}},
			has: []string{
				"flush chain ip kube-proxy service-2E7DC2X4-default/hello-service/tcp/http\n",
				"add chain ip kube-proxy endpoint-", // the moved endpoint's new chain: added, not flushed
				"delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n",
			},
			lacks: []string{
				// The endpoint that stayed: its chain's rules are the same.
				"kube-proxy endpoint-4L34TH6B-default/hello-service/tcp/http__198.18.1.11/8080",
				"add chain ip kube-proxy service-", "flush chain ip kube-proxy endpoint-VI4V7AED",
				"element",
			},
		},
		{
			name:  "an endpoint leaves",
			edits: [][2]string{{"name: hello-2\n  namespace: default\n  labels:\n    app: hello", "name: hello-2\n  namespace: default\n  labels:\n    app: other"}},
			has:   []string{"numgen random mod 1 vmap", "delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n"},
			lacks: []string{"kube-proxy endpoint-4L34TH6B-default/hello-service/tcp/http__198.18.1.11/8080", "add chain ip kube-proxy endpoint-"},
		},
		{
			name:  "a Service renamed",
			edits: [][2]string{{"name: hello-service2\n", "name: hello-service3\n"}},
			has:   []string{"delete element ip kube-proxy service-ips {", "add element ip kube-proxy service-ips {", "delete chain ip kube-proxy service-7TLBIAYF-default/hello-service2/tcp/http\n"},
			lacks: []string{"default/hello-service/", "shop/cart"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := nfttest.ExamplesFor(t, "1.35", tc.edits...)
			kp := write(t, sm, Options{Previous: prev})
			minimal := write(t, sm, Options{Previous: prev, Minimal: true})
			want := dump(t, rules.Build(sm))
			if got := dump(t, applyScript(t, before, minimal)); got != want {
				t.Errorf("previous + minimal partial:\n%s\nwant the whole new table:\n%s\nthe partial was:\n%s", got, want, minimal)
			}
			if got := dump(t, applyScript(t, before, kp)); got != want {
				t.Errorf("previous + kube-proxy's partial:\n%s\nwant:\n%s", got, want)
			}
			if len(minimal) > len(kp) || len(tc.edits) > 0 && len(minimal) >= len(kp) || len(tc.edits) == 0 && len(minimal) != 0 {
				t.Errorf("minimal partial of %d bytes, kube-proxy's of %d:\n%s", len(minimal), len(kp), minimal)
			}
			for _, s := range tc.has {
				if !bytes.Contains(minimal, []byte(s)) {
					t.Errorf("minimal partial lacks %q:\n%s", s, minimal)
				}
			}
			for _, s := range tc.lacks {
				if bytes.Contains(minimal, []byte(s)) {
					t.Errorf("minimal partial has %q:\n%s", s, minimal)
				}
			}
		})
	}
}

// uniqueLines drops repeated lines of a sorted dump: a set that is given one element
// twice (two Services' ports on one ClusterIP) holds it once. Element comments are left
// out: a partial sync, as kube-proxy's element storage, keeps an element whose key and
// value stay when only its comment (the Service port) changes.
func uniqueLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "add element ") {
			lines[i] = elementComment.ReplaceAllString(l, "")
		}
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n")
}

var elementComment = regexp.MustCompile(` comment "[^"]*"`)

// TestMinimalPartialRandom: from every random cluster to the next, both partial syncs
// (the whole script when the fixed part differs) leave the next cluster's table, in
// every release's layout.
func TestMinimalPartialRandom(t *testing.T) {
	for _, r := range release.All() {
		t.Run(r.String(), func(t *testing.T) { partialRandom(t, r.String()) })
	}
}

func partialRandom(t *testing.T, version string) {
	partial := 0
	check := func(what string, before []byte, sm *ir.ServiceMap) {
		prev := parse(t, before)
		want := uniqueLines(dump(t, rules.Build(sm)))
		for _, minimal := range []bool{false, true} {
			out := write(t, sm, Options{Previous: prev, Minimal: minimal})
			if !bytes.Contains(out, []byte("delete table")) && minimal {
				partial++
			}
			if got := uniqueLines(dump(t, applyScript(t, before, out))); got != want {
				t.Errorf("%s, minimal %v: the partial leaves\n%s\nwant\n%s", what, minimal, got, want)
			}
		}
	}
	var before []byte
	for seed := uint64(1); seed <= 40; seed++ {
		sm := nfttest.CompileFor(t, version, string(randcluster.Generate(seed, randcluster.Options{IPv6: false})))
		if before != nil {
			check(fmt.Sprintf("seed %d after %d", seed, seed-1), before, sm)
		}
		before = whole(t, sm)
		// The same cluster, a Service in three gone and an endpoint moved in every
		// second: the fixed part stays, so this is always a partial sync.
		check(fmt.Sprintf("seed %d, edited", seed), before, testkit.Without(sm, 3, 2))
	}
	if partial < 40 {
		t.Errorf("only %d of the transitions were partial syncs; the test covers too little", partial)
	}
}

// ../syntax/testdata/examples-<release>.list is "nft list ruleset" of a namespace where
// the script of ../../examples for that release was loaded (nft 1.0.6). Read back, it
// is the table svcgen wants: a partial sync against it writes nothing, and so does
// --minimal.
func TestListingNeedsNoSync(t *testing.T) {
	for _, v := range []string{"1.35", "1.37"} {
		data, err := os.ReadFile("../syntax/testdata/examples-" + v + ".list")
		if err != nil {
			t.Fatal(err)
		}
		sm := nfttest.ExamplesFor(t, v)
		for _, minimal := range []bool{false, true} {
			if out := write(t, sm, Options{Previous: parse(t, data), Minimal: minimal}); len(out) != 0 {
				t.Errorf("%s, minimal %v: the listing differs from the table svcgen wants; partial sync:\n%s", v, minimal, out)
			}
		}
		if !Equivalent(parse(t, data).Tables[knftables.IPv4Family], rules.Build(sm)) {
			t.Errorf("%s: the listing is not Equivalent to the table svcgen wants", v)
		}
	}
}

// Transactions are what compile writes: the whole script, the stages of the table, or
// the partial sync; with MarkCommits each ends with the commit mark, which makes it
// sure to change the ruleset, and a partial sync with nothing to do is no transaction.
// Staging is for a node without the table only.
func TestTransactions(t *testing.T) {
	const mark = "add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n"
	check := func(what string, txs []Tx, err error, marked bool, want ...[]byte) {
		t.Helper()
		if err != nil || len(txs) != len(want) {
			t.Fatalf("%s: %d transactions, %v; want %d", what, len(txs), err, len(want))
		}
		for i, tx := range txs {
			w := string(nfttest.Body(want[i]))
			if marked {
				w += mark
			}
			if string(tx.Text) != w {
				t.Errorf("%s, transaction %d:\n%s\nwant:\n%s", what, i+1, tx.Text, w)
			}
			if tx.Counts.Marked != marked || marked && !tx.Counts.Sure() {
				t.Errorf("%s, transaction %d: counts %+v, sure %v; want marked %v", what, i+1, tx.Counts, tx.Counts.Sure(), marked)
			}
		}
	}
	sm := nfttest.Examples(t)
	table := rules.NewTable(sm)
	all := whole(t, sm)
	txs, err := Partial(table, Options{}).Transactions(Load{MarkCommits: true})
	check("whole", txs, err, true, all)
	var stages [][]byte
	for _, stage := range table.Stages() {
		var b bytes.Buffer
		w := syntax.NewWriter(&b, knftables.IPv4Family)
		stage(w)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		stages = append(stages, b.Bytes())
	}
	txs, err = Partial(table, Options{}).Transactions(Load{StageAbove: 10, MarkCommits: true})
	check("staged", txs, err, true, stages...)
	txs, err = Partial(table, Options{}).Transactions(Load{StageAbove: 10})
	check("staged, unmarked", txs, err, false, stages...)
	prev := parse(t, all)
	moved := nfttest.Examples(t, [2]string{"198.18.2.12", "198.18.2.13"})
	for _, minimal := range []bool{false, true} {
		opts := Options{Previous: prev, Minimal: minimal}
		txs, err = Partial(rules.NewTable(moved), opts).Transactions(Load{StageAbove: 10, MarkCommits: true})
		check(fmt.Sprintf("partial (minimal %v)", minimal), txs, err, true, write(t, moved, opts))
	}
	if txs, err = Partial(table, Options{Previous: prev}).Transactions(Load{StageAbove: 10, MarkCommits: true}); err != nil || len(txs) != 0 {
		t.Errorf("nothing changed: %d transactions, %v; want none", len(txs), err)
	}
	// A fixed change replaces the table on the node in one transaction, staged or not.
	cidr := nfttest.Examples(t, [2]string{"198.19.0.0/16", "198.18.0.0/15"})
	c := Partial(rules.NewTable(cidr), Options{Previous: prev})
	if txs, err = c.Transactions(Load{StageAbove: 10, MarkCommits: true}); !c.Full || err != nil || len(txs) != 1 {
		t.Errorf("a fixed change: full %v, %d transactions, %v; want one whole table", c.Full, len(txs), err)
	}
}
