package apply

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
)

// otherTool is another program's rules, which every load must leave alone.
const otherTool = "*nat\n:PREROUTING ACCEPT [0:0]\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\n-A OTHER -d 198.18.9.9/32 -j RETURN\nCOMMIT\n"

func fakeBackend(t *testing.T, text string, maxChains int) (*IPTables, *FakeIPTables) {
	t.Helper()
	fake, err := NewFakeIPTables(text)
	if err != nil {
		t.Fatal(err)
	}
	b := NewIPTables("IPv4", time.Second)
	b.Tool, b.MaxChains = fake, maxChains
	return b, fake
}

// holds fails the test unless the fake holds exactly sm's rules (with kube-proxy's
// jumps) beside the other tool's.
func holds(t *testing.T, what string, fake *FakeIPTables, sm *ir.ServiceMap) {
	t.Helper()
	got, err := iptsyntax.ParseBytes("fake", []byte(fake.Text()))
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&IPTables{}).Want(sm)
	if err != nil {
		t.Fatal(err)
	}
	v := ViewOptions{Map: sm}
	if d := ruleview.Unified("want", want.View(v), "fake", (&ipState{rs: got}).View(v)); d != nil {
		t.Errorf("%s: the kernel holds other rules:\n%s", what, d)
	}
	if !strings.Contains(fake.Text(), "-A OTHER -d 198.18.9.9/32 -j RETURN") {
		t.Errorf("%s: the other tool's rule is gone", what)
	}
}

// Loads through the fake kernel: a cold load, a change, nothing to do; each leaves
// exactly the map's rules, and the other tool's stay.
func TestIPTablesLoadFake(t *testing.T) {
	a, b := testkit.GenMap(t, 40, 3, 1), testkit.GenMap(t, 40, 3, 2)
	backend, fake := fakeBackend(t, otherTool, 50)
	ap := &Applier{Backend: backend}
	ctx := context.Background()
	for _, step := range []struct {
		name string
		sm   *ir.ServiceMap
	}{{"cold", a}, {"a to b", b}, {"b again", b}} {
		res, err := ap.Sync(ctx, step.sm, SyncOptions{Reread: true})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.name == "b again" && res.Changed {
			t.Errorf("b again: a sync with nothing to do loaded %s", res.Summary.Text)
		}
		holds(t, step.name, fake, step.sm)
	}
	if fake.Restores < 2 {
		t.Errorf("%d restores", fake.Restores)
	}
}

// Rules that count with nfacct (the NodeEnvironment default) load once apply has made
// the counters, as kube-proxy makes them; the fake refuses a rule naming a missing one.
func TestIPTablesMakesCounters(t *testing.T) {
	res := testkit.Compile(t, "counted.yaml", `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: NodePort, clusterIP: 10.96.0.10, ports: [{port: 80, nodePort: 30080}]}
`, pipeline.Settings{})
	backend, fake := fakeBackend(t, otherTool, 50)
	var rules strings.Builder
	if err := iptrules.Write(&rules, res.Map, iptrules.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules.String(), "--nfacct-name ct_state_invalid_dropped_pkts") {
		t.Fatal("the rules name no counter: the case tests nothing")
	}
	if _, err := (&Applier{Backend: backend}).Sync(context.Background(), res.Map, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range iptrules.Counters {
		if !fake.Counters[c] {
			t.Errorf("counter %s was not made", c)
		}
	}
	holds(t, "counted", fake, res.Map)

	bare, _ := fakeBackend(t, "", 50)
	bare.Tool.(*FakeIPTables).Counters = nil
	st, _ := bare.Read(context.Background())
	plan, err := bare.Plan(res.Map, st, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Tool.Restore(context.Background(), plan.(*ipPlan).payload); err == nil || !strings.Contains(err.Error(), "ct_state_invalid_dropped_pkts") {
		t.Errorf("the fake loaded rules naming a counter it lacks: %v", err)
	}
}

// A restore the kernel refuses midway: the blocks before the failing one are rolled
// back, so the node holds what it held before the sync, and the error names the rule
// and its Service. A failure in the first block needs no rollback.
func TestIPTablesLoadFailsMidway(t *testing.T) {
	a, b := testkit.GenMap(t, 40, 3, 1), testkit.GenMap(t, 40, 3, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		line func(payload []byte) int // the line to fail
	}{
		{"first block", func(p []byte) int { return 2 }},
		{"a later block", func(p []byte) int { return iptsyntax.Blocks(p)[2] - 1 }},
	} {
		backend, fake := fakeBackend(t, otherTool, 50)
		ap := &Applier{Backend: backend}
		if _, err := ap.Sync(ctx, a, SyncOptions{}); err != nil {
			t.Fatal(err)
		}
		before := fake.Text()
		st, err := backend.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := backend.Plan(b, st, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		payload := plan.(*ipPlan).payload
		if n := len(iptsyntax.Blocks(payload)); n < 3 {
			t.Fatalf("%s: %d blocks; the test needs a staged restore", tc.name, n)
		}
		fake.FailLine = tc.line(payload)
		_, err = ap.Sync(ctx, b, SyncOptions{Reread: true})
		var le *LoadError
		if !errors.As(err, &le) {
			t.Fatalf("%s: error %v, want a *LoadError", tc.name, err)
		}
		if le.Rollback != nil {
			t.Errorf("%s: rollback failed: %v", tc.name, le.Rollback)
		}
		if le.Rule != iptsyntax.Line(payload, fake.Failed) {
			t.Errorf("%s: the error names %q, want line %d %q", tc.name, le.Rule, fake.Failed, iptsyntax.Line(payload, fake.Failed))
		}
		if le.Service == "" && strings.Contains(le.Rule, "KUBE-S") {
			t.Errorf("%s: %q names no Service", tc.name, le.Rule)
		}
		if got := fake.Text(); got != before {
			t.Errorf("%s: after the failed load the kernel differs from before it:\n%s", tc.name, lineDiff(before, got))
		}
		// The next sync reads the kernel again and converges.
		if _, err := ap.Sync(ctx, b, SyncOptions{}); err != nil {
			t.Fatal(err)
		}
		holds(t, tc.name+", then again", fake, b)
	}
}

// The fake refuses what the kernel refuses at commit: a jump to a chain the table does
// not have, also one just deleted; the block changes nothing.
func TestFakeIPTablesRefuses(t *testing.T) {
	fake, err := NewFakeIPTables(otherTool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, payload := range []string{
		"*nat\n:KUBE-A - [0:0]\n-A KUBE-A -j KUBE-MISSING\nCOMMIT\n",
		"*nat\n:OTHER - [0:0]\n-X OTHER\nCOMMIT\n", // PREROUTING still jumps to it
	} {
		err := fake.Restore(ctx, []byte(payload))
		if err == nil || iptsyntax.FailedLine(err.Error()) == 0 {
			t.Errorf("%q: %v, want a failed line", payload, err)
		}
		if got := fake.Text(); !strings.Contains(got, "-A OTHER -d 198.18.9.9/32 -j RETURN") || strings.Contains(got, "KUBE-A") {
			t.Errorf("%q: a refused block changed the tables:\n%s", payload, got)
		}
	}
	// Blocks before a refused one stay; the ones after it are not run.
	err = fake.Restore(ctx, []byte("*filter\n:KUBE-OK - [0:0]\nCOMMIT\n*nat\n-A PREROUTING -j KUBE-NONE\nCOMMIT\n*filter\n:KUBE-LATER - [0:0]\nCOMMIT\n"))
	if err == nil || !strings.Contains(fake.Text(), ":KUBE-OK") || strings.Contains(fake.Text(), "KUBE-LATER") {
		t.Errorf("block by block: %v\n%s", err, fake.Text())
	}
	// The jumps a complete ruleset carries name chains it declares.
	if err := fake.Restore(ctx, []byte(iptrulesJumpsOnly)); err != nil {
		t.Errorf("kube-proxy's jumps with their chains: %v", err)
	}
}

// iptrulesJumpsOnly declares kube-proxy's fixed nat chains and inserts their jumps.
var iptrulesJumpsOnly = func() string {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range iptrules.NatFixedChains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, r := range iptsyntax.JumpRules("nat") {
		b.WriteString(r.Text() + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}()

func lineDiff(a, b string) string {
	return string(diff.Diff("before", []byte(a), "after", []byte(b)))
}

// A sync that would delete every Service's rules is refused unless allowed: an input
// with no Service (a failed kubectl in a pipe), or one that shares no Service with the
// node's rules (the wrong cluster). Nothing is loaded.
func TestRefusesToEmptyTheNode(t *testing.T) {
	a := testkit.GenMap(t, 5, 2, 1)
	empty := *a
	empty.Services = nil
	other := testkit.Compile(t, "other.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: elsewhere, namespace: other}\nspec: {clusterIP: 10.96.99.1, ports: [{port: 80}]}\n", pipeline.Settings{}).Map
	backend, fake := fakeBackend(t, otherTool, 0)
	ap := &Applier{Backend: backend}
	ctx := context.Background()
	// An empty input on an empty node is refused too: nothing says the input is right.
	if _, err := ap.Sync(ctx, &empty, SyncOptions{}); !errors.Is(err, ErrWouldEmpty) {
		t.Errorf("empty input: %v", err)
	}
	if _, err := ap.Sync(ctx, a, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	before := fake.Text()
	for name, sm := range map[string]*ir.ServiceMap{"no Service": &empty, "no Service of the node's": other} {
		_, err := ap.Sync(ctx, sm, SyncOptions{Reread: true})
		if !errors.Is(err, ErrWouldEmpty) || !strings.Contains(err.Error(), "--allow-empty") {
			t.Errorf("%s: %v, want a refusal that names --allow-empty", name, err)
		}
		if fake.Text() != before {
			t.Errorf("%s: the refused sync changed the node", name)
		}
	}
	// The same from the state held in memory (as apply --watch syncs a change), where
	// a map sharing a Service with the one loaded passes without a look at the rules.
	for name, sm := range map[string]*ir.ServiceMap{"no Service": &empty, "no Service of the node's": other} {
		if _, err := ap.Sync(ctx, sm, SyncOptions{}); !errors.Is(err, ErrWouldEmpty) {
			t.Errorf("%s, state in memory: %v, want a refusal", name, err)
		}
	}
	fewer := *a
	fewer.Services = a.Services[:1]
	if _, err := ap.Sync(ctx, &fewer, SyncOptions{}); err != nil {
		t.Fatalf("a map with one of the node's Services, state in memory: %v", err)
	}
	if _, err := ap.Sync(ctx, &empty, SyncOptions{Reread: true, AllowEmpty: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fake.Text(), "KUBE-SVC-") {
		t.Error("--allow-empty kept Service chains")
	}
}

// One family of a dual-stack run with no Service of its own: loaded when the node has
// no Services' rules of that family (IPv4-only Services on a dual-stack node), refused
// when it has some, which the sync would delete, unless allowed.
func TestRefusesToEmptyOneFamily(t *testing.T) {
	res := testkit.Compile(t, "dual.yaml", dualInput(nil, []string{"a"}, []string{"b"}), pipeline.Settings{})
	v6 := res.MapOf(model.IPv6)
	empty := *v6
	empty.Services = nil
	ctx := context.Background()
	newApplier := func() (*Applier, *FakeIPTables) {
		backend, fake := fakeBackend(t, otherTool, 0)
		backend.IPv6 = true
		return &Applier{Backend: backend}, fake
	}

	// A node without IPv6 Services' rules: kube-proxy's fixed chains are loaded.
	ap, fake := newApplier()
	if _, err := ap.Sync(ctx, &empty, SyncOptions{}); !errors.Is(err, ErrWouldEmpty) {
		t.Errorf("an empty single-family input: %v, want refused", err)
	}
	if _, err := ap.Sync(ctx, &empty, SyncOptions{OtherFamilyHasServices: true}); err != nil {
		t.Fatalf("no IPv6 Service on a node without IPv6 rules: %v", err)
	}
	if !strings.Contains(fake.Text(), ":KUBE-SERVICES") {
		t.Error("the fixed chains were not loaded")
	}

	// A node with IPv6 Services' rules: refused, nothing changed; --allow-empty loads.
	ap, fake = newApplier()
	if _, err := ap.Sync(ctx, v6, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	before := fake.Text()
	_, err := ap.Sync(ctx, &empty, SyncOptions{Reread: true, OtherFamilyHasServices: true})
	if !errors.Is(err, ErrWouldEmpty) || !strings.Contains(err.Error(), "the input has no IPv6 Service and the node has IPv6 rules for 1 Services") {
		t.Errorf("emptying the IPv6 rules: %v, want refused", err)
	}
	if fake.Text() != before {
		t.Error("the refused sync changed the node")
	}
	if _, err := ap.Sync(ctx, &empty, SyncOptions{Reread: true, OtherFamilyHasServices: true, AllowEmpty: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fake.Text(), "KUBE-SVC-") {
		t.Error("--allow-empty kept Service chains")
	}
}
