// Package pipeline runs the stages every svcgen command shares: read the inputs, resolve
// the cluster, compile the service map of one node. It reads files; the stages it
// calls do not.
package pipeline

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// Inputs name what to read.
type Inputs struct {
	Files   []string // files, folders or "-" for stdin
	Config  string   // a KubeProxyConfiguration file (-c)
	Dialect load.Dialect
	Reader  load.Reader // how manifests are read: see load.Reader
	Strict  bool        // typos are errors: see load.Loader.Strict
	Stdin   io.Reader
}

// loader is an empty Loader that reads as in says.
func (in Inputs) loader() *load.Loader {
	return &load.Loader{Dialect: in.Dialect, Reader: in.Reader, Strict: in.Strict}
}

// UsesStdin reports whether an input is "-".
func (in Inputs) UsesStdin() bool {
	for _, f := range append(append([]string{}, in.Files...), in.Config) {
		if f == "-" {
			return true
		}
	}
	return false
}

// Settings are the control-plane and compile options.
type Settings struct {
	Node          string
	Mode          compiler.Mode // empty: the configuration's mode, else iptables
	ServiceCIDRs  []netip.Prefix
	NodePortRange compiler.PortRange
	LockFile      string
	// Families: --ip-family (nil: the NodeEnvironment's, else the input's; see
	// compiler.Families).
	Families []model.IPFamily
	// Host are this host's families, for the commands that work on the node (see
	// compiler.Options); nil for those that do not.
	Host []model.IPFamily
	// NoAllocate: see compiler.ResolveOptions (kube-proxy's own test inputs).
	NoAllocate bool
	// Nodes and PodCIDRs: --nodes and --pod-cidr (see compiler.ResolveOptions).
	Nodes    int
	PodCIDRs []netip.Prefix
	// Release and Gates: --kube-proxy-version and --feature-gates (see
	// compiler.Options).
	Release release.Release
	Gates   map[string]bool
}

// Result is what a run produced.
type Result struct {
	Cluster  *model.Cluster
	Resolved *compiler.Resolved
	// Maps are the service maps of the run's IP families, in model.Families' order;
	// Map is the first (the only one of a single-family run).
	Maps     []*ir.ServiceMap
	Map      *ir.ServiceMap
	Mode     compiler.Mode
	Warnings []*model.Problem
	// InputWarnings are the files of folders the loader passed over, and why.
	InputWarnings []error
	// Read counts the objects of each input, read and passed over.
	Read *load.Tally
	// Lock is the lock file's new content; nil when no lock file was asked for.
	Lock []byte
}

// KeepMaps lets the clusters go, for a command that needs only the service maps from
// here on, and collects them at once. The clusters are most of the live heap (at
// 50,000 Services 130 of 210 MB, the maps the rest); left to the collector's pace,
// the next cycle comes only when the heap has doubled from its last live size, so
// the rules written or read after it would grow the heap into fresh pages instead of
// the clusters' memory (page faults are dear: BENCHMARKS.md, "The machine"). The one
// collection marks the maps alone.
func (r *Result) KeepMaps() {
	r.Cluster, r.Resolved = nil, nil
	runtime.GC()
}

// MapOf is the service map of a family, nil when the run has none of it.
func (r *Result) MapOf(f model.IPFamily) *ir.ServiceMap {
	for _, sm := range r.Maps {
		if sm.Family == f {
			return sm
		}
	}
	return nil
}

// ErrNoInput is a run given no manifests: a usage mistake, not an input error.
var ErrNoInput = errors.New("no input: give manifests with -f FILE, -f FOLDER or -f - (stdin)")

// ErrInput marks errors in the user's input (exit status 1).
var ErrInput = errors.New("input error")

// InputError wraps a problem with the inputs.
type InputError struct{ Err error }

func (e *InputError) Error() string   { return e.Err.Error() }
func (e *InputError) Unwrap() error   { return e.Err }
func (e *InputError) Is(t error) bool { return t == ErrInput }

// Load reads every input into one cluster. Every problem is reported, all at once:
// the inputs that could not be read, and every document's.
func Load(in Inputs) (*load.Loader, error) {
	l := in.loader()
	files := in.Files
	if len(files) == 0 {
		return nil, ErrNoInput
	}
	for _, f := range files {
		l.Path(f, in.Stdin)
	}
	if in.Config != "" {
		before := len(l.Cluster.Configs)
		l.Path(in.Config, in.Stdin)
		if len(l.Cluster.Configs) == before && l.Err() == nil {
			return nil, &InputError{fmt.Errorf("%s: no KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) in this file", in.Config)}
		}
	}
	if err := l.Err(); err != nil {
		return nil, &InputError{err}
	}
	return l, nil
}

// Run loads, resolves and compiles.
func Run(in Inputs, s Settings) (*Result, error) {
	l, err := Load(in)
	if err != nil {
		return nil, err
	}
	res, err := Compile(&l.Cluster, l.Warnings.List(), in.Dialect == load.MiniK8s, s)
	if err != nil {
		return nil, err
	}
	// A copy of the tally, not a pointer into l: the Result outlives the loaded
	// cluster (a command lets it go once compiled), and a pointer to a field keeps
	// the whole Loader, and every object it read, alive (about 150 MB at 50,000
	// Services) while the rules are written.
	tally := l.Tally
	res.InputWarnings, res.Read = l.InputWarnings, &tally
	return res, nil
}

// Compile resolves and compiles a loaded cluster.
func Compile(cluster *model.Cluster, warnings []*model.Problem, miniK8s bool, s Settings) (*Result, error) {
	ropts, opts, err := options(cluster, miniK8s, s)
	if err != nil {
		return nil, err
	}
	resolved, err := compiler.Resolve(cluster, ropts)
	if err != nil {
		return nil, &InputError{err}
	}
	maps, err := compiler.CompileAll(resolved.Cluster, opts)
	if err != nil {
		return nil, &InputError{err}
	}
	return result(cluster, resolved, maps, opts.Mode, append(warnings, resolved.Warnings...), s), nil
}

// options turns the settings into the compiler's: the lock file is read, and the
// mode comes from the settings, else the configuration, else iptables.
func options(cluster *model.Cluster, miniK8s bool, s Settings) (compiler.ResolveOptions, compiler.Options, error) {
	var lock *compiler.Lock
	if s.LockFile != "" {
		var err error
		if lock, err = readLock(s.LockFile); err != nil {
			return compiler.ResolveOptions{}, compiler.Options{}, &InputError{err}
		}
	}
	ropts := compiler.ResolveOptions{
		ServiceCIDRs:  s.ServiceCIDRs,
		NodePortRange: s.NodePortRange,
		Lock:          lock,
		NoAllocate:    s.NoAllocate,
		MiniK8s:       miniK8s,
		Nodes:         s.Nodes,
		PodCIDRs:      s.PodCIDRs,
		Node:          s.Node,
	}
	mode := s.Mode
	if mode == "" && len(cluster.Configs) > 0 {
		mode = compiler.Mode(cluster.Configs[0].Mode)
	}
	if mode == "" {
		mode = compiler.IPTables
	}
	return ropts, compiler.Options{Node: s.Node, Mode: mode, Families: s.Families, Host: s.Host, Release: s.Release, Gates: s.Gates}, nil
}

func result(cluster *model.Cluster, resolved *compiler.Resolved, maps []*ir.ServiceMap, mode compiler.Mode, warnings []*model.Problem, s Settings) *Result {
	res := &Result{Cluster: cluster, Resolved: resolved, Maps: maps, Map: maps[0], Mode: mode, Warnings: warnings}
	if s.LockFile != "" {
		res.Lock = resolved.Lock.Marshal()
	}
	return res
}

func readLock(path string) (*compiler.Lock, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // the first run creates it
	}
	if err != nil {
		return nil, err
	}
	return compiler.ParseLock(path, data)
}
