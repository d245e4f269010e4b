package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/svcgen/svcgen/ir"
)

// Source gives the service map to apply: the one function boundary between --watch and
// the compiler. changed lists the input files the watcher saw change since the last
// call (nil when unknown, as on the first call and on every interval). svcgen apply
// gives pipeline.Watch, which keeps the compiled state and recompiles only what the
// changed files touch (it finds them itself), and passes on which Services that
// touched as the hint (nil when it does not know); a full recompile works the same way.
type Source interface {
	ServiceMap(ctx context.Context, changed []string) (*ir.ServiceMap, *Hint, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, changed []string) (*ir.ServiceMap, *Hint, error)

func (f SourceFunc) ServiceMap(ctx context.Context, changed []string) (*ir.ServiceMap, *Hint, error) {
	return f(ctx, changed)
}

// Watch keeps a node's rules in step with its manifests: it syncs when an input file
// changes and on every interval (then reading the kernel again, so rules changed by
// hand are put back; with the Applier's Generation, only when nf_tables' ruleset
// generation moved since the rules it holds were exact), logs each sync with its
// duration, and serves /healthz and /metrics.
type Watch struct {
	Applier  *Applier
	Source   Source
	Paths    []string // the input files and folders to watch
	Interval time.Duration
	// Listen is the address of /healthz and /metrics ("" serves nothing).
	Listen string
	Log    *slog.Logger
	// Ready, if set, is called with the served address once it listens.
	Ready func(addr string)
	// AllowEmpty: see SyncOptions.
	AllowEmpty bool
	// Settle is how long a changed input must stay unchanged before it is read
	// (default DefaultSettle): editors and slow writers write a file in steps, and a
	// half-written file must not be loaded.
	Settle time.Duration

	metrics *metrics
	mu      sync.Mutex
	lastOK  time.Time
	lastErr error
}

type metrics struct {
	reg        *prometheus.Registry
	duration   *prometheus.HistogramVec
	rules      prometheus.Gauge
	rulesTotal prometheus.Counter
	lastOK     prometheus.Gauge
	failures   prometheus.Counter
	conntrack  prometheus.Counter
	skipped    prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcgen_sync_duration_seconds",
			Help:    "Time one sync took: compile, read, plan, load, conntrack.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"reason", "result"}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcgen_sync_rules_written",
			Help: "Rules written by the last sync that loaded anything.",
		}),
		rulesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcgen_rules_written_total",
			Help: "Rules written by every sync.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcgen_last_sync_success_timestamp_seconds",
			Help: "Unix time of the last successful sync.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcgen_sync_failures_total",
			Help: "Syncs that failed (the kernel keeps the rules it had).",
		}),
		conntrack: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcgen_conntrack_entries_flushed_total",
			Help: "Stale UDP conntrack entries deleted.",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svcgen_kernel_reads_skipped_total",
			Help: "Syncs that did not read the kernel's rules because nf_tables' ruleset generation had not moved.",
		}),
	}
	m.reg.MustRegister(m.duration, m.rules, m.rulesTotal, m.lastOK, m.failures, m.conntrack, m.skipped)
	return m
}

// DefaultSettle is Watch.Settle's default.
const DefaultSettle = time.Second

// Run syncs until ctx ends. It returns an error only when it cannot start (the listen
// address, the file watcher); a failed sync is logged, counted and tried again.
func (w *Watch) Run(ctx context.Context) error {
	w.metrics = newMetrics()
	if w.Listen != "" {
		srv, err := w.serve()
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching the inputs: %w", err)
	}
	defer fw.Close()
	for _, p := range watchDirs(w.Paths) {
		if err := fw.Add(p); err != nil {
			return fmt.Errorf("watching %s: %w", p, err)
		}
	}
	w.sync(ctx, "start", nil)
	tick := time.NewTicker(w.Interval)
	defer tick.Stop()
	quiet := w.Settle
	if quiet <= 0 {
		quiet = DefaultSettle
	}
	var changed []string
	var settle <-chan time.Time // editors write a file in several steps: wait for quiet
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			// A pending change stays pending: the source does not read a file
			// that has not settled, and the change's own sync comes when it has.
			w.sync(ctx, "interval", nil)
		case ev := <-fw.Events:
			if !w.isInput(ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					fw.Add(ev.Name)
				}
			}
			changed = append(changed, ev.Name)
			settle = time.After(quiet)
		case <-settle:
			if wait := unsettled(changed, quiet, time.Now()); wait > 0 {
				settle = time.After(wait) // written to within the period: not done yet
				continue
			}
			w.sync(ctx, "change", changed)
			changed, settle = nil, nil
		case err := <-fw.Errors:
			w.Log.Warn("file watcher", "err", err)
		}
	}
}

// sync runs one compile and apply, with logging and metrics.
func (w *Watch) sync(ctx context.Context, reason string, changed []string) {
	start := time.Now()
	res, compiled, err := w.syncOnce(ctx, reason, changed)
	took := time.Since(start)
	result := "ok"
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		result = "error"
		w.lastErr = err
		w.metrics.failures.Inc()
		w.Log.Error("sync failed", "reason", reason, "took", took.Round(time.Microsecond), "err", err)
	} else {
		w.lastOK, w.lastErr = time.Now(), nil
		w.metrics.lastOK.Set(float64(w.lastOK.UnixNano()) / 1e9)
		if res.Changed {
			w.metrics.rules.Set(float64(res.Summary.Rules))
		}
		w.metrics.rulesTotal.Add(float64(res.Summary.Rules))
		w.metrics.conntrack.Add(float64(res.ConntrackFlushed))
		read := any(res.Steps.Read.Round(time.Microsecond))
		if res.ReadSkipped {
			w.metrics.skipped.Inc()
			read = "skipped" // the nf_tables generation had not moved
		}
		// took is compile (the Source: reading changed inputs, recompiling), then
		// the Applier's read, plan, load and conntrack, and the lock's wait.
		attrs := []any{"reason", reason, "took", took.Round(time.Microsecond), "changed", res.Changed,
			"compile", compiled.Round(time.Microsecond), "read", read, "plan", res.Steps.Plan.Round(time.Microsecond),
			"load", res.Steps.Load.Round(time.Microsecond), "conntrack", res.Steps.Conntrack.Round(time.Microsecond)}
		if res.Changed {
			attrs = append(attrs, "wrote", res.Summary.Text)
			if reason == "interval" {
				attrs = append(attrs, "drift", "repaired")
			}
		}
		if res.ConntrackFlushed > 0 {
			attrs = append(attrs, "conntrack_flushed", res.ConntrackFlushed)
		}
		w.Log.Info("sync", attrs...)
	}
	w.metrics.duration.WithLabelValues(reason, result).Observe(took.Seconds())
}

// syncOnce compiles and loads. When the inputs cannot be compiled (a file that does not
// parse), the last good map is loaded still, so that drift is repaired, and the
// inputs' error is the sync's: /healthz reports it until the inputs are mended. It
// also returns how long the Source took.
func (w *Watch) syncOnce(ctx context.Context, reason string, changed []string) (*Result, time.Duration, error) {
	began := time.Now()
	sm, hint, srcErr := w.Source.ServiceMap(ctx, changed)
	compiled := time.Since(began)
	if sm == nil {
		return nil, compiled, srcErr
	}
	if srcErr != nil {
		hint = nil
	}
	res, err := w.Applier.Sync(ctx, sm, SyncOptions{Reread: reason != "change", Hint: hint, AllowEmpty: w.AllowEmpty})
	if err == nil && srcErr != nil {
		err = fmt.Errorf("the inputs cannot be compiled, so the rules of the last good ones stay: %w", srcErr)
	}
	return res, compiled, err
}

// unsettled is how much longer to wait for the files paths to have gone unchanged for
// quiet at now (0: they have; a file that is gone is settled).
func unsettled(paths []string, quiet time.Duration, now time.Time) time.Duration {
	var wait time.Duration
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if d := fi.ModTime().Add(quiet).Sub(now); d > wait {
			wait = d
		}
	}
	return wait
}

// healthy: the last sync succeeded, within two intervals.
func (w *Watch) healthy() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.lastErr != nil:
		return w.lastErr
	case w.lastOK.IsZero():
		return errors.New("no sync has succeeded yet")
	case time.Since(w.lastOK) > 2*w.Interval+10*time.Second:
		return fmt.Errorf("last successful sync %v ago", time.Since(w.lastOK).Round(time.Second))
	}
	return nil
}

func (w *Watch) serve() (*http.Server, error) {
	ln, err := net.Listen("tcp", w.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(w.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		if err := w.healthy(); err != nil {
			http.Error(rw, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	if w.Ready != nil {
		w.Ready(ln.Addr().String())
	}
	w.Log.Info("serving /healthz and /metrics", "addr", ln.Addr().String())
	return srv, nil
}

// isInput reports a path the compile reads: an input file, or a YAML or JSON file
// (or a new folder) inside an input folder.
func (w *Watch) isInput(path string) bool {
	path = filepath.Clean(path)
	for _, p := range w.Paths {
		p = filepath.Clean(p)
		if p == path {
			return true
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue
		}
		if rel, err := filepath.Rel(p, path); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			return true
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// watchDirs lists the folders to watch: each input folder with its subfolders, and the
// folder of each input file (editors replace files by renaming, which a watch on the
// file itself would lose).
func watchDirs(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			add(filepath.Dir(p))
			continue
		}
		filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				add(path)
			}
			return nil
		})
	}
	return out
}
