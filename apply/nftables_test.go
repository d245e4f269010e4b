package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/release"
	"github.com/svcgen/svcgen/ruleview"
	"sigs.k8s.io/knftables"
)

// nftTx writes operations as one transaction, with the commit mark when marked.
func nftTx(t *testing.T, marked bool, ops ...nftsyntax.Op) nftplan.Tx {
	t.Helper()
	var b bytes.Buffer
	w := nftsyntax.NewWriter(&b, knftables.IPv4Family)
	w.Ops(ops)
	if marked {
		w.CommitMark()
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return nftplan.Tx{Text: b.Bytes(), Counts: w.Counts()}
}

// The summary of an nftables plan counts in the noun's form that the number takes, and
// leaves out the commit mark that ends each transaction.
func TestNFTablesSummaryText(t *testing.T) {
	chain := func(name string) *knftables.Chain { return &knftables.Chain{Name: name} }
	elem := &knftables.Element{Map: "m", Key: []string{"1"}, Value: []string{"drop"}}
	for _, tc := range []struct {
		txs  []nftplan.Tx
		want string
	}{
		{[]nftplan.Tx{nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("a")}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: &knftables.Rule{Chain: "a", Rule: "accept"}}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: elem})},
			"1 chain, 1 rule, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
		{[]nftplan.Tx{nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("a")}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("b")}, nftsyntax.Op{Verb: nftsyntax.Flush, Obj: chain("a")}), nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Delete, Obj: chain("c")})},
			"2 chains, 0 rules, 0 elements added; 1 flushed; 1 deleted; in 2 transactions"},
		{[]nftplan.Tx{nftTx(t, true, nftsyntax.Op{Verb: nftsyntax.Add, Obj: elem})},
			"0 chains, 0 rules, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
	} {
		p := &nftPlan{txs: tc.txs}
		if got := p.Summary().Text; got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
		if c := p.Commits(); c.N != len(tc.txs) {
			t.Errorf("%q: %d commits, want %d", tc.want, c.N, len(tc.txs))
		}
	}
}

// fakeApplier is an Applier of the nftables backend over a fake kernel, with the
// generation checks, counting the reads.
func fakeApplier(stageAbove int) (*Applier, *counting, *FakeNFT) {
	fake := NewFakeNFT()
	c := &counting{Backend: &NFTables{StageAbove: stageAbove, Kernel: fake}}
	return &Applier{Backend: c, Generation: fake.Generation}, c, fake
}

// loadedFake is a fake kernel an applier has loaded sm1's table into, and the map
// with one endpoint moved, sm2.
func loadedFake(t *testing.T) (a *Applier, c *counting, fake *FakeNFT, sm1, sm2 *ir.ServiceMap) {
	t.Helper()
	return loadedFakeFor(t, "")
}

// loadedFakeFor is loadedFake for a kube-proxy release ("" for the newest).
func loadedFakeFor(t *testing.T, version string) (a *Applier, c *counting, fake *FakeNFT, sm1, sm2 *ir.ServiceMap) {
	t.Helper()
	a, c, fake = fakeApplier(DefaultStageAbove)
	sm1 = genMapFor(t, compiler.NFTables, version, "10.1.0.1", "10.1.0.2")
	sm2 = genMapFor(t, compiler.NFTables, version, "10.1.0.1", "10.1.0.3")
	if _, err := a.Sync(context.Background(), sm1, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	return a, c, fake, sm1, sm2
}

// holdsTable checks that the fake kernel holds exactly sm's table.
func holdsTable(t *testing.T, fake *FakeNFT, sm *ir.ServiceMap, what string) {
	t.Helper()
	if got := fake.Table(knftables.IPv4Family); got == nil || !nftplan.Equivalent(got, nftrules.Build(sm)) {
		t.Errorf("%s: the kernel does not hold the service map's table", what)
	}
}

// demoChain is demo/web's chain of a kind ("service-", "endpoint-") whose name
// holds part, in sm's table.
func demoChain(t *testing.T, sm *ir.ServiceMap, kind, part string) string {
	t.Helper()
	for name := range nftrules.Build(sm).Chains {
		if strings.HasPrefix(name, kind) && strings.Contains(name, "demo/web/") && strings.Contains(name, part) {
			return name
		}
	}
	t.Fatalf("no %s chain of demo/web with %q", kind, part)
	return ""
}

// The nftables backend over a fake kernel: the first sync loads the whole table in one
// transaction with the commit mark, and Read lists it back as loaded; an endpoint
// moved is one minimal transaction; nothing changed writes nothing; a dry run changes
// nothing and shows the diff.
func TestNFTablesLoadAndRead(t *testing.T) {
	ctx := context.Background()
	a, c, fake, sm1, sm2 := loadedFake(t)
	holdsTable(t, fake, sm1, "first sync")
	if len(fake.Scripts) != 1 || !bytes.HasSuffix(fake.Scripts[0], []byte("add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n")) {
		t.Fatalf("first sync: %d scripts, want one ending with the commit mark", len(fake.Scripts))
	}
	read, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := c.Want(sm1)
	if drift := ruleview.Audit(want.View(ViewOptions{}), read.View(ViewOptions{})); len(drift) != 0 {
		t.Errorf("the table read back drifts from the one loaded: %+v", drift)
	}
	dry, err := a.Sync(ctx, sm2, SyncOptions{DryRun: true})
	if err != nil || len(dry.Diff) == 0 || len(fake.Scripts) != 1 {
		t.Errorf("dry run: %v, %d bytes of diff, %d scripts run; want a diff and no load", err, len(dry.Diff), len(fake.Scripts))
	}
	res, err := a.Sync(ctx, sm2, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holdsTable(t, fake, sm2, "an endpoint moved")
	if last := fake.Scripts[len(fake.Scripts)-1]; len(fake.Scripts) != 2 || bytes.Contains(last, []byte("table")) || res.Summary.Deleted != 1 {
		t.Errorf("an endpoint moved: %s (%d scripts), want one partial transaction:\n%s", res.Summary.Text, len(fake.Scripts), last)
	}
	if res, err := a.Sync(ctx, sm2, SyncOptions{Reread: true}); err != nil || res.Changed || len(fake.Scripts) != 2 {
		t.Errorf("nothing changed: %v, changed %v, %d scripts", err, res.Changed, len(fake.Scripts))
	}
}

// A transaction the kernel refuses midway changes nothing, and the error names the
// line and the Service it is for. Here another program deleted an endpoint's chain
// behind the applier's back, so the plan made from the state in memory flushes and
// deletes a chain that is gone; the next sync reads the kernel and repairs the table.
// (v1.35: the layout with a chain per endpoint.)
func TestNFTablesRefusedLoad(t *testing.T) {
	ctx := context.Background()
	a, _, fake, sm1, sm2 := loadedFakeFor(t, "1.35")
	gone := demoChain(t, sm1, "endpoint-", "10.1.0.2")
	svc := demoChain(t, sm1, "service-", "")
	if err := fake.Run(ctx, []byte("flush chain ip kube-proxy "+svc+"\ndelete chain ip kube-proxy "+gone+"\n")); err != nil {
		t.Fatal(err)
	}
	before := fake.Table(knftables.IPv4Family)
	_, err := a.Sync(ctx, sm2, SyncOptions{})
	var le *LoadError
	if !errors.As(err, &le) || le.Rule != "flush chain ip kube-proxy "+gone || le.Service != "demo/web:http" || le.Rollback != nil {
		t.Fatalf("the refused load: %v (%+v); want the flush of the stale %s named", err, le, gone)
	}
	if !strings.Contains(err.Error(), "No such file or directory") || !strings.HasSuffix(err.Error(), "the previous rules are in place") {
		t.Errorf("error: %v", err)
	}
	if after := fake.Table(knftables.IPv4Family); after != before {
		t.Errorf("the refused transaction changed the kernel's table")
	}
	if _, err := a.Sync(ctx, sm2, SyncOptions{}); err != nil {
		t.Fatalf("the sync after: %v", err)
	}
	holdsTable(t, fake, sm2, "the sync after a refused load")
}

// A large table on a node without one loads in five transactions; when the kernel
// refuses one, the table the stages before built is deleted (it was not there), and
// when that fails too the error says so.
func TestNFTablesStagedLoad(t *testing.T) {
	ctx := context.Background()
	sm := genMap(t, compiler.NFTables, "10.1.0.1", "10.1.0.2")
	a, _, fake := fakeApplier(10)
	res, err := a.Sync(ctx, sm, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holdsTable(t, fake, sm, "staged")
	if g, _ := fake.Generation(); len(fake.Scripts) != 5 || g != 5 || !strings.HasSuffix(res.Summary.Text, "in 5 transactions") {
		t.Errorf("staged: %d scripts, generation %d, %s; want 5 and 5", len(fake.Scripts), g, res.Summary.Text)
	}
	for _, rollbackFails := range []bool{false, true} {
		a, _, fake := fakeApplier(10)
		fake.Refuse = func(script []byte) error {
			if n := len(fake.Scripts); n == 3 || n == 4 && rollbackFails {
				return fmt.Errorf("nft: refused (script %d)", n)
			}
			return nil
		}
		_, err := a.Sync(ctx, sm, SyncOptions{})
		var le *LoadError
		if !errors.As(err, &le) || (le.Rollback != nil) != rollbackFails {
			t.Fatalf("rollback fails %v: %v", rollbackFails, err)
		}
		if left := fake.Table(knftables.IPv4Family); (left != nil) != rollbackFails || len(fake.Scripts) != 4 {
			t.Errorf("rollback fails %v: a table is left %v after %d scripts", rollbackFails, left != nil, len(fake.Scripts))
		}
		if last := string(fake.Scripts[3]); last != "delete table ip kube-proxy\n" {
			t.Errorf("the rollback ran %q", last)
		}
	}
}

// The drift checks of generation.go over the fake kernel: an interval with nothing
// changed does not read; another program's change to kube-proxy's table is read and
// repaired; a load that only adds elements is known to be all that committed.
func TestNFTablesSkipReadWhileGenerationStands(t *testing.T) {
	ctx := context.Background()
	a, c, fake := fakeApplier(DefaultStageAbove)
	sm := genMap(t, compiler.NFTables, "10.1.0.1", "10.1.0.2")
	idle := compileWithEndpoints(t, idleService+genCluster, compiler.NFTables, "", "10.1.0.1", "10.1.0.2")
	sync := func(what string, sm *ir.ServiceMap, wantRead, wantChanged bool) {
		t.Helper()
		before := c.reads
		res, err := a.Sync(ctx, sm, SyncOptions{Reread: true})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if read := c.reads > before; read != wantRead || res.Changed != wantChanged {
			t.Errorf("%s: read %v, changed %v; want %v, %v", what, read, res.Changed, wantRead, wantChanged)
		}
		holdsTable(t, fake, sm, what)
	}
	sync("first sync", sm, true, true)
	sync("nothing changed", sm, false, false)
	if err := fake.Run(ctx, []byte("flush chain ip kube-proxy "+demoChain(t, sm, "external-", "")+"\n")); err != nil {
		t.Fatal(err)
	}
	sync("after another program's change", sm, true, true)
	sync("after the repair", sm, false, false)
	sync("a Service without endpoints added", idle, false, true)
	sync("after adding it", idle, false, false)
}

// Cleanup deletes kube-proxy's table of its family and nothing else; without nft, the
// state is empty and a plan says nft is missing.
func TestNFTablesCleanupAndNoNFT(t *testing.T) {
	ctx := context.Background()
	a, _, fake := fakeApplier(DefaultStageAbove)
	if _, err := a.Sync(ctx, genMap(t, compiler.NFTables, "10.1.0.1"), SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fake.Run(ctx, []byte("add table ip6 kube-proxy\nadd chain ip6 kube-proxy services\n")); err != nil {
		t.Fatal(err)
	}
	res, err := Cleanup(ctx, &NFTables{Kernel: fake}, nil, false)
	if err != nil || res.Summary.Deleted != 1 || fake.Table(knftables.IPv4Family) != nil || fake.Table(knftables.IPv6Family) == nil {
		t.Errorf("cleanup: %v, %+v; want the ip table deleted and the ip6 one kept", err, res)
	}
	fake.Missing = true
	b := &NFTables{Kernel: fake}
	st, err := b.Read(ctx)
	if err != nil || st.(*nftState).table() != nil {
		t.Errorf("without nft: read %v, %v; want an empty state", st, err)
	}
	if _, err := b.Plan(genMap(t, compiler.NFTables), st, PlanOptions{}); !errors.Is(err, ErrNoKernelSupport) {
		t.Errorf("without nft: plan %v", err)
	}
}

// The fake kernel: a refused script changes nothing and is reported as nft reports it
// (the line, which refusedLine finds); a script that changes nothing does not move
// the generation; a table lists as nft lists it and reads back.
func TestFakeNFT(t *testing.T) {
	ctx := context.Background()
	fake := NewFakeNFT()
	script := "add table ip kube-proxy\nadd chain ip kube-proxy a\nadd rule ip kube-proxy a jump b\n"
	err := fake.Run(ctx, []byte(script))
	if line, _ := refusedLine([]byte(script), err); line != "add rule ip kube-proxy a jump b" || fake.Table(knftables.IPv4Family) != nil {
		t.Errorf("refused: %v (line %q); want the rule's line and no table", err, line)
	}
	if g, _ := fake.Generation(); g != 0 {
		t.Errorf("a refused script moved the generation to %d", g)
	}
	for i, want := range []uint32{1, 1, 2} {
		text := []string{"add table ip kube-proxy\nadd chain ip kube-proxy a\n", "add chain ip kube-proxy a\n", "add rule ip kube-proxy a accept\n"}[i]
		if err := fake.Run(ctx, []byte(text)); err != nil {
			t.Fatal(err)
		}
		if g, _ := fake.Generation(); g != want {
			t.Errorf("after %q: generation %d, want %d", text, g, want)
		}
	}
	listed, err := fake.List(ctx, knftables.IPv4Family)
	if err != nil || !bytes.HasPrefix(listed, []byte("table ip kube-proxy {\n")) {
		t.Fatalf("listing: %v\n%s", err, listed)
	}
	rs, err := nftsyntax.ParseBytes("listing", listed)
	if err != nil || !nftplan.Equivalent(rs.Tables[knftables.IPv4Family], fake.Table(knftables.IPv4Family)) {
		t.Errorf("the listing reads back as another table (%v):\n%s", err, listed)
	}
	if none, err := fake.List(ctx, knftables.IPv6Family); none != nil || err != nil {
		t.Errorf("no ip6 table: %q, %v", none, err)
	}
}

// A sync from a state loaded from a map plans from the changed Services only
// (nftplan.Since): those a hint from that map names, else those that differ between
// the maps (a hint from another map is not believed: here it names none). It loads the
// very transaction the whole comparison plans from the table held (nftplan.Partial),
// and the kernel holds the new map's table. Random clusters of every layout, changed
// as compiler.Session changes them (Services gone and back, endpoints moved).
// Removing a Service of several ports deletes its cluster IP once (the kernel
// refuses a second delete of an element in one transaction).
func TestNFTablesHint(t *testing.T) {
	ctx := context.Background()
	for _, version := range []string{"1.34", "1.35", "1.36", "1.37"} {
		for seed := uint64(1); seed <= 6; seed++ {
			sm := compileRandom(t, version, seed)
			steps := []*ir.ServiceMap{testkit.Without(sm, 3, 2), sm, testkit.Without(sm, 2, 3), testkit.Without(sm, 5, 1), sm}
			a, _, fake := fakeApplier(DefaultStageAbove)
			if _, err := a.Sync(ctx, sm, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			prev := sm
			for i, next := range steps {
				what := fmt.Sprintf("v%s seed %d step %d", version, seed, i)
				hint := &Hint{Since: prev, Changed: changedServices(prev, next)}
				switch i {
				case 2:
					hint = nil
				case 3:
					hint = &Hint{Since: steps[0]} // stale: not the map the state was loaded from
				}
				want, err := nftplan.Partial(nftrules.NewTable(next), nftplan.Options{Previous: nftsyntax.Of(nftrules.Build(prev)), Minimal: true}).Transactions(nftplan.Load{MarkCommits: true})
				if err != nil || len(want) > 1 {
					t.Fatalf("%s: the whole plan: %d transactions, %v", what, len(want), err)
				}
				st, scripts := a.state.(*nftState), len(fake.Scripts)
				if _, err := a.Sync(ctx, next, SyncOptions{Hint: hint, AllowEmpty: true}); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if len(fake.Scripts) != scripts+len(want) || len(want) == 1 && !bytes.Equal(fake.Scripts[scripts], want[0].Text) {
					t.Errorf("%s: the sync loaded\n%s\nthe whole plan is\n%v", what, fake.Scripts[scripts:], want)
				}
				holdsTable(t, fake, next, what)
				// Since moves the key counts on.
				if after := a.state.(*nftState); after.keys == nil || st.keys != nil {
					t.Errorf("%s: key counts %v after, %v before; want them moved on", what, after.keys != nil, st.keys != nil)
				}
				prev = next
			}
		}
	}
}

// compileRandom compiles a random cluster for nftables mode.
func compileRandom(t *testing.T, version string, seed uint64) *ir.ServiceMap {
	t.Helper()
	r, err := release.Parse(version)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Compile(t, "random.yaml", string(randcluster.Generate(seed, randcluster.Options{})), pipeline.Settings{Mode: compiler.NFTables, Release: r}).Map
}

// changedServices names the Services that differ between two maps (as pointers, as
// compiler.Session keeps the others).
func changedServices(a, b *ir.ServiceMap) []string {
	was := map[string]*ir.Service{}
	for _, s := range a.Services {
		was[s.Key()] = s
	}
	var out []string
	for _, s := range b.Services {
		if was[s.Key()] != s {
			out = append(out, s.Key())
		}
		delete(was, s.Key())
	}
	for key := range was {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}
