package apply

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/model"
)

func services(names ...string) string {
	var b strings.Builder
	for i, n := range names {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: ns}\nspec: {clusterIP: 10.96.0.%d, ports: [{port: 80}]}\n", n, 10+i)
	}
	return b.String()
}

// watchOver runs a Watch of dir over a fake kernel, compiling through pipeline.Watch
// as apply --watch does, until the test ends.
func watchOver(t *testing.T, dir string, settle, interval time.Duration) (*Watch, *FakeIPTables) {
	t.Helper()
	w, fakes := watchFamilies(t, dir, settle, interval, io.Discard)
	return w, fakes[0]
}

// watchFamilies is watchOver for a run of one or two families: one fake kernel (and
// backend) per family of the inputs, as apply --watch makes one applier per family.
func watchFamilies(t *testing.T, dir string, settle, interval time.Duration, log io.Writer) (*Watch, []*FakeIPTables) {
	t.Helper()
	pw, res, err := pipeline.NewWatch(pipeline.Inputs{Files: []string{dir}}, pipeline.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	pw.Settle = settle
	current := make([]Update, len(res.Maps))
	var appliers []*Applier
	var fakes []*FakeIPTables
	for i, sm := range res.Maps {
		current[i] = Update{Map: sm}
		backend, fake := fakeBackend(t, otherTool, 0)
		backend.IPv6 = sm.Family == model.IPv6
		appliers = append(appliers, &Applier{Backend: backend})
		fakes = append(fakes, fake)
	}
	w := &Watch{
		Appliers: appliers, Paths: []string{dir}, Interval: interval, Settle: settle,
		Log: slog.New(slog.NewTextHandler(log, nil)),
		Source: SourceFunc(func(context.Context, []string) ([]Update, error) {
			up, err := pw.Refresh()
			if err != nil || up == nil {
				return current, err
			}
			for i, sm := range up.Maps {
				current[i] = Update{Map: sm}
			}
			return current, nil
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, fakes
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func hasService(fake *FakeIPTables, name string) bool {
	return strings.Contains(fake.Text(), `--comment "ns/`+name+` `)
}

// A file written slowly, in steps with pauses shorter than the settle period, is read
// once it is whole: its Services never leave the node meanwhile, though interval syncs
// run. (Before, a 200 ms pause, or any interval, was enough to load the half-written
// file and delete what it had not reached.)
func TestWatchWaitsForWholeFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	must(t, os.WriteFile(file, []byte(services("a", "b", "c")), 0o644))
	// The settle period is far above the 200 ms pauses, so that a loaded machine's
	// late wake-ups cannot stretch a pause past it.
	// Interval syncs run all the while, and read no unsettled file either.
	_, fake := watchOver(t, dir, 3*time.Second, 50*time.Millisecond)
	eventually(t, "the first sync", func() bool { return hasService(fake, "c") })

	// Each step leaves a file that parses, with fewer Services than the one before:
	// only waiting for the file to settle keeps them.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	for i, name := range []string{"a", "b", "c", "d"} {
		_, err := f.WriteString(strings.Replace(services(name), "10.96.0.10", fmt.Sprintf("10.96.0.%d", 10+i), 1))
		must(t, err)
		for start := time.Now(); time.Since(start) < 200*time.Millisecond; time.Sleep(20 * time.Millisecond) {
			if !hasService(fake, "b") || !hasService(fake, "c") {
				t.Fatalf("step %d: a Service left the node while its file was being written", i)
			}
		}
	}
	must(t, f.Close())
	eventually(t, "the whole file", func() bool { return hasService(fake, "d") })
}

// A file that does not parse keeps the last good rules, /healthz says why, and a
// write-then-rename (as editors and sync tools write) is read.
func TestWatchKeepsLastGoodRules(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	must(t, os.WriteFile(file, []byte(services("a", "b")), 0o644))
	w, fake := watchOver(t, dir, 50*time.Millisecond, time.Hour)
	eventually(t, "the first sync", func() bool { return hasService(fake, "b") && w.healthy() == nil })
	before := fake.Text()

	must(t, os.WriteFile(file, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: [\n"), 0o644))
	eventually(t, "/healthz reporting the bad file", func() bool {
		err := w.healthy()
		return err != nil && strings.Contains(err.Error(), "svc.yaml")
	})
	if fake.Text() != before {
		t.Error("a file that does not parse changed the rules")
	}

	tmp := filepath.Join(dir, ".svc.yaml.new")
	must(t, os.WriteFile(tmp, []byte(services("a", "b", "e")), 0o644))
	must(t, os.Rename(tmp, file))
	eventually(t, "the renamed file", func() bool { return hasService(fake, "e") && w.healthy() == nil })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dualInput is a dual-stack cluster: a ServiceCIDR of each family, the dual Services
// (RequireDualStack) and the single-family ones of each family.
func dualInput(dual, v4, v6 []string) string {
	var b strings.Builder
	b.WriteString("apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\nspec: {cidrs: [10.96.0.0/24, \"fd00:198:19::/112\"]}\n")
	for _, g := range []struct {
		names []string
		spec  string
	}{{dual, "ipFamilyPolicy: RequireDualStack"}, {v4, "ipFamilies: [IPv4]"}, {v6, "ipFamilies: [IPv6]"}} {
		for _, n := range g.names {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: ns}\nspec: {%s, ports: [{port: 80}]}\n", n, g.spec)
		}
	}
	return b.String()
}

// syncBuffer is a log that the watch writes and the test reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// counterOf is a family's value of a counter of the watch's metrics.
func counterOf(t *testing.T, w *Watch, name, family string) float64 {
	t.Helper()
	mfs, err := w.metrics.reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "family" && l.GetValue() == family {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// One watch keeps both families of a dual-stack node in step: each family's rules go
// to its own kernel (iptables, ip6tables), a change reaches the family it is of, drift
// in one family is repaired, and logs and metrics name the family. An input that
// would empty one family's rules on the node is refused for that family (as the
// single-family guard refuses), while the other family's change is loaded.
func TestWatchDualStack(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	must(t, os.WriteFile(file, []byte(dualInput([]string{"a"}, nil, []string{"b"})), 0o644))
	var log syncBuffer
	w, fakes := watchFamilies(t, dir, 50*time.Millisecond, 100*time.Millisecond, &log)
	if len(fakes) != 2 || !w.Appliers[1].Backend.(*IPTables).IPv6 {
		t.Fatalf("a dual-stack input gave %d families", len(fakes))
	}
	v4, v6 := fakes[0], fakes[1]
	eventually(t, "the first sync", func() bool { return hasService(v4, "a") && hasService(v6, "a") && hasService(v6, "b") })
	if hasService(v4, "b") || strings.Contains(v4.Text(), "fd00:") || strings.Contains(v6.Text(), "10.96.") {
		t.Fatalf("a family holds the other's rules:\nIPv4:\n%s\nIPv6:\n%s", v4.Text(), v6.Text())
	}

	// A new IPv6 Service reaches ip6tables only.
	before4 := v4.Text()
	must(t, os.WriteFile(file, []byte(dualInput([]string{"a"}, nil, []string{"b", "c"})), 0o644))
	eventually(t, "the new IPv6 Service", func() bool { return hasService(v6, "c") })
	if v4.Text() != before4 {
		t.Error("an IPv6 Service changed the IPv4 rules")
	}

	// Drift in one family (a chain flushed by hand) is repaired at the next interval.
	want6 := v6.Text()
	must(t, v6.Restore(context.Background(), []byte("*nat\n-F KUBE-SERVICES\nCOMMIT\n")))
	if v6.Text() == want6 {
		t.Fatal("the flush changed nothing")
	}
	eventually(t, "the IPv6 repair", func() bool { return v6.Text() == want6 })
	eventually(t, "the log of the repair", func() bool {
		return strings.Contains(log.String(), "family=IPv6 reason=interval") && strings.Contains(log.String(), "drift=repaired")
	})
	if !strings.Contains(log.String(), "family=IPv4 reason=start") {
		t.Errorf("the sync log does not name the family:\n%s", log.String())
	}

	// An input with no IPv6 Service left would delete every IPv6 Service's rules: the
	// IPv6 sync is refused and says so; the IPv4 change is loaded.
	must(t, os.WriteFile(file, []byte(dualInput(nil, []string{"a", "d"}, nil)), 0o644))
	eventually(t, "the IPv4 change", func() bool { return hasService(v4, "d") })
	eventually(t, "/healthz reporting the refused IPv6 sync", func() bool {
		err := w.healthy()
		return err != nil && strings.Contains(err.Error(), "IPv6: refused: the input has no IPv6 Service and the node has IPv6 rules for 3 Services")
	})
	if v6.Text() != want6 {
		t.Error("the refused IPv6 sync changed the IPv6 rules")
	}
	if counterOf(t, w, "svcgen_sync_failures_total", "IPv6") == 0 || counterOf(t, w, "svcgen_sync_failures_total", "IPv4") != 0 {
		t.Errorf("failures by family: IPv4 %v, IPv6 %v", counterOf(t, w, "svcgen_sync_failures_total", "IPv4"), counterOf(t, w, "svcgen_sync_failures_total", "IPv6"))
	}
}

// Both families' rules in one nf_tables (one network namespace): a family's own load
// moves the generation, and the other family, whose tables it did not touch, stays
// exact, so the interval after a sync that loaded both reads neither. A commit by
// another program makes both read.
func TestWatchDualStackGeneration(t *testing.T) {
	maps := func(v6 ...string) []Update {
		res := testkit.Compile(t, "dual.yaml", dualInput([]string{"a"}, nil, v6), pipeline.Settings{Mode: compiler.NFTables})
		var ups []Update
		for _, sm := range res.Maps {
			ups = append(ups, Update{Map: sm})
		}
		return ups
	}
	current := maps("b")
	fake := NewFakeNFT()
	var counts []*counting
	var appliers []*Applier
	for _, fam := range model.Families {
		c := &counting{Backend: &NFTables{IPv6: fam == model.IPv6, StageAbove: DefaultStageAbove, Kernel: fake}}
		counts = append(counts, c)
		appliers = append(appliers, &Applier{Backend: c, Generation: fake.Generation})
	}
	w := &Watch{Appliers: appliers, Interval: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Source: SourceFunc(func(context.Context, []string) ([]Update, error) { return current, nil })}
	w.metrics = newMetrics()
	ctx := context.Background()
	reads := func() [2]int { return [2]int{counts[0].reads, counts[1].reads} }
	interval := func(what string, want [2]int) {
		t.Helper()
		before := reads()
		w.sync(ctx, "interval", nil)
		if err := w.healthy(); err != nil {
			t.Fatal(err)
		}
		if got := reads(); got[0]-before[0] != want[0] || got[1]-before[1] != want[1] {
			t.Errorf("%s: the interval read IPv4 %d times and IPv6 %d times, want %v", what, got[0]-before[0], got[1]-before[1], want)
		}
	}
	w.sync(ctx, "start", nil)
	if fake.Table("ip") == nil || fake.Table("ip6") == nil {
		t.Fatal("the first sync did not load both tables")
	}
	interval("after the first sync", [2]int{0, 0})
	interval("again", [2]int{0, 0})

	// A change of both families (a dual-stack Service added) loads both; then no reads.
	res := testkit.Compile(t, "dual.yaml", dualInput([]string{"a", "d"}, nil, []string{"b"}), pipeline.Settings{Mode: compiler.NFTables})
	current = []Update{{Map: res.Maps[0]}, {Map: res.Maps[1]}}
	w.sync(ctx, "change", nil)
	interval("after a change of both families", [2]int{0, 0})

	// Another program's commit (a chain added and deleted again): both read, once.
	if err := fake.Run(ctx, []byte("add chain ip kube-proxy other\ndelete chain ip kube-proxy other\n")); err != nil {
		t.Fatal(err)
	}
	interval("after another program's commit", [2]int{1, 1})
	interval("and then", [2]int{0, 0})
}

// Each sync's log line says how long the Source (reading and compiling the inputs)
// took beside the kernel's steps, so a sync's time can be accounted for: a Source
// that takes 50 ms shows as compile of at least 50 ms, within took.
func TestWatchLogsCompileTime(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.yaml")
	must(t, os.WriteFile(file, []byte(services("a")), 0o644))
	_, res, err := pipeline.NewWatch(pipeline.Inputs{Files: []string{dir}}, pipeline.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	backend, _ := fakeBackend(t, otherTool, 0)
	var log syncBuffer
	w := &Watch{
		Appliers: []*Applier{{Backend: backend}}, Paths: []string{dir}, Interval: time.Hour,
		Log: slog.New(slog.NewTextHandler(&log, nil)),
		Source: SourceFunc(func(context.Context, []string) ([]Update, error) {
			time.Sleep(50 * time.Millisecond)
			return []Update{{Map: res.Map}}, nil
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the first sync", func() bool { return strings.Contains(log.String(), "reason=start") })
	line := log.String()
	field := func(name string) time.Duration {
		m := regexp.MustCompile(` ` + name + `=(\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no %s= in the sync's log line: %s", name, line)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("%s=%s: %v", name, m[1], err)
		}
		return d
	}
	compile, took := field("compile"), field("took")
	if compile < 50*time.Millisecond || compile > took {
		t.Errorf("compile=%v took=%v: want compile >= 50ms and <= took", compile, took)
	}
	field("conntrack")
}
