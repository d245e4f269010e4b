package pipeline

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/model"
)

// Watch is Run for `svcgen apply --watch`: it loads and compiles the inputs once and
// keeps the result, and each Refresh reads again only the files that changed since
// (by size, time and content) and recompiles only what they touch (see
// compiler.Session). A change to EndpointSlices, Endpoints or Pods alone recompiles
// just their Services, in milliseconds on a 10,000-Service cluster; the returned
// update names them, so a restore against the rules loaded from up.Prev looks at them
// alone:
//
//	w, res, err := pipeline.NewWatch(in, settings)   // res as Run returns it
//	...
//	up, err := w.Refresh()                            // on every tick
//	if err == nil && up != nil {
//		for i, sm := range up.Maps { // one per family
//			err = iptables.Write(out, sm, iptables.Options{Previous: loaded[i],
//				PreviousMap: up.Prevs[i], Changed: up.Changed, Minimal: true})
//		}
//	}
//
// A Watch reads files, so it lives here and not in the compiler; it is not safe for
// concurrent use.
type Watch struct {
	// Settle: a file changed less than this long ago is not read yet; its last good
	// version stays (an editor or a slow writer is not done with it).
	Settle time.Duration

	in       Inputs
	settings Settings
	mode     compiler.Mode
	session  *compiler.Session
	files    map[string]*watchedFile
}

type watchedFile struct {
	size    int64
	modTime time.Time
	sum     [sha256.Size]byte
	objects *model.Cluster
	read    *load.Tally
}

// WatchUpdate is what changed in one Refresh.
type WatchUpdate struct {
	// Prevs and Maps are the service maps before and after, one per family of the
	// run (a Refresh never changes the families: see Refresh).
	Prevs, Maps []*ir.ServiceMap
	// Changed lists the Services ("namespace/name") whose rules may differ, sorted;
	// nil when any rule may differ (a Service, Node or configuration changed).
	Changed []string
	// Files lists the inputs read again, sorted.
	Files    []string
	Warnings []*model.Problem
}

// NewWatch loads and compiles the inputs, as Run does. Stdin cannot be watched.
func NewWatch(in Inputs, s Settings) (*Watch, *Result, error) {
	if in.UsesStdin() {
		return nil, nil, &InputError{errors.New("--watch reads its inputs again and again: give files or folders, not stdin")}
	}
	w := &Watch{in: in, settings: s, files: map[string]*watchedFile{}}
	cluster := &model.Cluster{}
	var warnings []*model.Problem
	read := &load.Tally{}
	paths, passed, err := w.paths()
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		f, warns, err := w.read(p)
		if err != nil {
			return nil, nil, err
		}
		w.files[p] = f
		warnings = append(warnings, warns...)
		cluster.Append(f.objects)
		read.Merge(f.read)
	}
	ropts, opts, err := options(cluster, in.Dialect == load.MiniK8s, s)
	if err != nil {
		return nil, nil, err
	}
	sess, up, err := compiler.NewSession(cluster, ropts, opts)
	if err != nil {
		return nil, nil, &InputError{err}
	}
	w.session, w.mode = sess, opts.Mode
	res := result(cluster, sess.Resolved(), up.Maps, opts.Mode, append(warnings, up.Warnings...), s)
	res.InputWarnings, res.Read = passed, read
	return w, res, nil
}

// Refresh reads the inputs that changed and recompiles. It returns nil when nothing
// changed. On an error (a changed file is wrong) the Watch keeps its last good state
// and the next Refresh tries again.
func (w *Watch) Refresh() (*WatchUpdate, error) {
	paths, _, err := w.paths()
	if err != nil {
		return nil, err
	}
	removed, added := &model.Cluster{}, &model.Cluster{}
	next := map[string]*watchedFile{}
	var files []string
	var warnings []*model.Problem
	for _, p := range paths {
		old := w.files[p]
		if w.unsettled(p) {
			if old != nil {
				next[p] = old
			}
			continue
		}
		f, warns, err := w.reread(p, old)
		if err != nil {
			return nil, err
		}
		next[p] = f
		if f == old {
			continue
		}
		files = append(files, p)
		warnings = append(warnings, warns...)
		if old != nil {
			removed.Append(old.objects)
		}
		added.Append(f.objects)
	}
	for p, old := range w.files {
		if next[p] == nil {
			files = append(files, p)
			removed.Append(old.objects)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	sort.Strings(files)
	prev := w.session.Maps()
	up, err := w.session.Apply(compiler.Change{Removed: removed, Added: added})
	if err != nil {
		return nil, &InputError{err}
	}

	w.files = next
	changed := up.Changed
	if up.All {
		changed = nil
	}
	return &WatchUpdate{Prevs: prev, Maps: up.Maps, Changed: changed, Files: files, Warnings: append(warnings, up.Warnings...)}, nil
}

// paths lists the input files now: folders are walked again, so new files count.
// What the folders hold that is not read is passed, with why.
func (w *Watch) paths() (out []string, passed []error, err error) {
	for _, p := range append(append([]string{}, w.in.Files...), w.in.Config) {
		if p == "" {
			continue
		}
		files, skipped, err := load.Files(p)
		if err != nil {
			return nil, nil, &InputError{err}
		}
		out, passed = append(out, files...), append(passed, skipped...)
	}
	sort.Strings(out)
	return out, passed, nil
}

// unsettled reports a file changed within the settle period.
func (w *Watch) unsettled(path string) bool {
	if w.Settle <= 0 {
		return false
	}
	info, err := os.Stat(path)
	return err == nil && time.Since(info.ModTime()) < w.Settle
}

// reread returns old when the file did not change.
func (w *Watch) reread(path string, old *watchedFile) (*watchedFile, []*model.Problem, error) {
	if old != nil {
		if info, err := os.Stat(path); err == nil && info.Size() == old.size && info.ModTime().Equal(old.modTime) {
			return old, nil, nil
		}
	}
	f, warns, err := w.read(path)
	if err != nil {
		return nil, nil, err
	}
	if old != nil && f.sum == old.sum {
		old.size, old.modTime = f.size, f.modTime
		return old, nil, nil
	}
	return f, warns, nil
}

// read loads one file on its own.
func (w *Watch) read(path string) (*watchedFile, []*model.Problem, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, &InputError{err}
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, nil, &InputError{err}
	}
	if !info.Mode().IsRegular() {
		return nil, nil, &InputError{fmt.Errorf("%s: not a regular file: --watch reads its inputs again and again", path)}
	}
	// One byte more than the loader takes: it says the file is too large.
	data, err := io.ReadAll(io.LimitReader(fh, load.DefaultMaxInput+1))
	if err != nil {
		return nil, nil, &InputError{err}
	}
	l := w.in.loader()
	l.Bytes(path, data)
	if err := l.Err(); err != nil {
		return nil, nil, &InputError{err}
	}
	if path == w.in.Config && len(l.Cluster.Configs) == 0 {
		return nil, nil, &InputError{fmt.Errorf("%s: no KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) in this file", path)}
	}
	f := &watchedFile{size: info.Size(), modTime: info.ModTime(), sum: sha256.Sum256(data), objects: &l.Cluster, read: &l.Tally}
	return f, l.Warnings.List(), nil
}
