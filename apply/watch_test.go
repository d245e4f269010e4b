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

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
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
	pw, res, err := pipeline.NewWatch(pipeline.Inputs{Files: []string{dir}}, pipeline.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	pw.Settle = settle
	current := res.Map
	backend, fake := fakeBackend(t, otherTool, 0)
	w := &Watch{
		Applier: &Applier{Backend: backend}, Paths: []string{dir}, Interval: interval, Settle: settle,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Source: SourceFunc(func(context.Context, []string) (*ir.ServiceMap, *Hint, error) {
			up, err := pw.Refresh()
			if err != nil || up == nil {
				return current, nil, err
			}
			current = up.Maps[0]
			return current, nil, nil
		}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, fake
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

// syncLog is a concurrency-safe buffer for a Watch's log.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
	var log syncLog
	w := &Watch{
		Applier: &Applier{Backend: backend}, Paths: []string{dir}, Interval: time.Hour,
		Log: slog.New(slog.NewTextHandler(&log, nil)),
		Source: SourceFunc(func(context.Context, []string) (*ir.ServiceMap, *Hint, error) {
			time.Sleep(50 * time.Millisecond)
			return res.Map, nil, nil
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
