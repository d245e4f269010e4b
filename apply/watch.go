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

// Source gives the service maps to apply, one per IP family of the run: the one
// function boundary between --watch and the compiler. changed lists the input files
// the watcher saw change since the last call (nil when unknown, as on the first call
// and on every interval). svcgen apply gives pipeline.Watch, which keeps the compiled
// state and recompiles only what the changed files touch (it finds them itself), and
// passes on which Services that touched as each family's hint (nil when it does not
// know); a full recompile works the same way. The families never change during a
// watch (pipeline.Watch refuses a change of families).
type Source interface {
	ServiceMaps(ctx context.Context, changed []string) ([]Update, error)
}

// Update is one family's service map, and what an incremental compiler knows of it.
type Update struct {
	Map  *ir.ServiceMap
	Hint *Hint
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, changed []string) ([]Update, error)

func (f SourceFunc) ServiceMaps(ctx context.Context, changed []string) ([]Update, error) {
	return f(ctx, changed)
}

// Watch keeps a node's rules in step with its manifests: it syncs when an input file
// changes and on every interval (then reading the kernel again, so rules changed by
// hand are put back; with the Applier's Generation, only when nf_tables' ruleset
// generation moved since the rules it holds were exact), logs each sync with its
// duration, and serves /healthz and /metrics. A dual-stack run keeps both families in
// step: each sync applies every family's map with that family's Applier (each with its
// own remembered state and generation), and logs and counts each family on its own.
type Watch struct {
	// Appliers are one per IP family of the run, in the order of the Source's maps, as
	// kube-proxy runs one proxier per family.
	Appliers []*Applier
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

// metrics are labelled with the family ("IPv4", "IPv6") each sync was of; the time of
// the last successful sync is the last at which every family succeeded.
type metrics struct {
	reg        *prometheus.Registry
	duration   *prometheus.HistogramVec
	rules      *prometheus.GaugeVec
	rulesTotal *prometheus.CounterVec
	lastOK     prometheus.Gauge
	failures   *prometheus.CounterVec
	conntrack  *prometheus.CounterVec
	skipped    *prometheus.CounterVec
}

func newMetrics() *metrics {
	family := []string{"family"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcgen_sync_duration_seconds",
			Help:    "Time one family's sync took: read, plan, load, conntrack (and the compile, with the first family's).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"family", "reason", "result"}),
		rules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "svcgen_sync_rules_written",
			Help: "Rules written by the last sync that loaded anything.",
		}, family),
		rulesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcgen_rules_written_total",
			Help: "Rules written by every sync.",
		}, family),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svcgen_last_sync_success_timestamp_seconds",
			Help: "Unix time of the last successful sync.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcgen_sync_failures_total",
			Help: "Syncs that failed (the kernel keeps the rules it had).",
		}, family),
		conntrack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcgen_conntrack_entries_flushed_total",
			Help: "Stale UDP conntrack entries deleted.",
		}, family),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcgen_kernel_reads_skipped_total",
			Help: "Syncs that did not read the kernel's rules because nf_tables' ruleset generation had not moved.",
		}, family),
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

// sync runs one compile and applies each family's map, with logging and metrics.
// The sync succeeds when every family's does; /healthz reports the first failure.
// When the inputs cannot be compiled (a file that does not parse), the last good maps
// are loaded still, so that drift is repaired, and the inputs' error is the sync's:
// /healthz reports it until the inputs are mended.
func (w *Watch) sync(ctx context.Context, reason string, changed []string) {
	start := time.Now() // the compile, which serves every family, counts with the first
	ups, srcErr := w.Source.ServiceMaps(ctx, changed)
	compiled := time.Since(start)
	if len(ups) != len(w.Appliers) {
		// No map to load (the first compile failed), or not one per family.
		err := srcErr
		if err == nil {
			err = fmt.Errorf("the inputs gave %d IP families, and the watch keeps %d", len(ups), len(w.Appliers))
		}
		w.record("", reason, time.Since(start), compiled, nil, err)
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		return
	}
	services := 0
	for _, up := range ups {
		services += len(up.Map.Services)
	}
	var firstErr error
	for i, up := range ups {
		if srcErr != nil {
			up.Hint = nil
		}
		if i > 0 {
			start, compiled = time.Now(), 0
		}
		res, err := w.Appliers[i].Sync(ctx, up.Map, SyncOptions{Reread: reason != "change", Hint: up.Hint,
			AllowEmpty: w.AllowEmpty, OtherFamilyHasServices: len(ups) > 1 && services > len(up.Map.Services)})
		if err == nil && srcErr != nil {
			err = fmt.Errorf("the inputs cannot be compiled, so the rules of the last good ones stay: %w", srcErr)
		}
		if err != nil && len(ups) > 1 {
			err = fmt.Errorf("%s: %w", up.Map.Family, err)
		}
		w.record(string(up.Map.Family), reason, time.Since(start), compiled, res, err)
		w.Appliers[i].Share(w.Appliers) // the other families stay exact

		if firstErr == nil {
			firstErr = err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if firstErr != nil {
		w.lastErr = firstErr
		return
	}
	w.lastOK, w.lastErr = time.Now(), nil
	w.metrics.lastOK.Set(float64(w.lastOK.UnixNano()) / 1e9)
}

// record logs and counts one family's sync.
func (w *Watch) record(family, reason string, took, compiled time.Duration, res *Result, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	result := "ok"
	if err != nil {
		result = "error"
		w.metrics.failures.WithLabelValues(family).Inc()
		w.Log.Error("sync failed", "family", family, "reason", reason, "took", took.Round(time.Microsecond), "err", err)
	} else {
		if res.Changed {
			w.metrics.rules.WithLabelValues(family).Set(float64(res.Summary.Rules))
		}
		w.metrics.rulesTotal.WithLabelValues(family).Add(float64(res.Summary.Rules))
		w.metrics.conntrack.WithLabelValues(family).Add(float64(res.ConntrackFlushed))
		read := any(res.Steps.Read.Round(time.Microsecond))
		if res.ReadSkipped {
			w.metrics.skipped.WithLabelValues(family).Inc()
			read = "skipped" // the nf_tables generation had not moved
		}
		// took is compile (the Source: reading changed inputs, recompiling; with the
		// first family only), then the Applier's read, plan, load and conntrack, and
		// the lock's wait.
		attrs := []any{"family", family, "reason", reason, "took", took.Round(time.Microsecond), "changed", res.Changed,
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
	w.metrics.duration.WithLabelValues(family, reason, result).Observe(took.Seconds())
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
