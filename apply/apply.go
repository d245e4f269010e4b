// Package apply loads compiled rules into the kernel of the network namespace it runs
// in: one Backend per proxy mode behind one small interface, and an Applier that
// drives any of them the same way (serialised by a lock file, only the difference
// loaded, rolled back on failure, stale UDP conntrack entries flushed, state kept in
// memory between syncs for --watch).
package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/ruleview"
)

// Cleaner removes what svcgen or kube-proxy made with one mode, and nothing else.
type Cleaner interface {
	// Name is the mode ("iptables").
	Name() string
	// Read returns the kernel's rules of this mode now.
	Read(ctx context.Context) (State, error)
	// Cleanup plans the removal; Load carries it out.
	Cleanup(from State) (Plan, error)
	// Load carries out a plan and returns the kernel's state after it (an empty plan
	// changes nothing, and still gives the state to remember). When it fails,
	// it puts back what it had changed, so the kernel is as the plan found it, and the
	// error names the rule the kernel refused and the Service it came from.
	Load(ctx context.Context, p Plan) (State, error)
}

// Backend is one proxy mode's way into the kernel.
type Backend interface {
	Cleaner
	// Plan works out what loading sm over the state from takes. It does no I/O and
	// does not change from.
	Plan(sm *ir.ServiceMap, from State, opts PlanOptions) (Plan, error)
	// Want is the state of a node that holds exactly sm's rules.
	Want(sm *ir.ServiceMap) (State, error)
	// Parse reads a rules file of this mode: compile's output or the kernel's dump.
	Parse(name string, data []byte) (State, error)
}

// State is the rules of one mode: as the kernel has them, as a load left them, or as
// a file holds them.
type State interface {
	// View shows the state for diff and audit.
	View(opts ViewOptions) *ruleview.View
}

// ViewOptions choose what a view shows.
type ViewOptions struct {
	// Map names hashed objects the rules' own comments do not (may be nil).
	Map *ir.ServiceMap
	// All shows everything, not only what kube-proxy owns (for two rule files).
	All bool
	// Installed shows a rules file as a node that loaded it holds it (for iptables,
	// with kube-proxy's jumps from the built-in chains, which a --noflush file lacks).
	Installed bool
}

// PlanOptions choose what a plan does.
type PlanOptions struct {
	// Full rewrites every chain, not only the ones that changed.
	Full bool
	// Hint, when set, says which Services may differ from the map the compiler gave
	// before.
	Hint *Hint
}

// Hint is what an incremental compiler (compiler.Session) knows of a new service map:
// only the Services Changed names ("namespace/name") may differ from the map Since;
// every other Service is the same. A backend whose state was loaded from Since looks
// at those Services only (the iptables and nftables backends; ipvs compares states),
// so a one-endpoint change costs the same at any cluster size.
type Hint struct {
	Since   *ir.ServiceMap
	Changed []string
}

// Plan is a change ready to load.
type Plan interface {
	// Empty: there is nothing to change.
	Empty() bool
	// After is the state the plan leaves (it may copy the state the plan started from).
	After() State
	// Summary says what the plan writes, for logs and metrics.
	Summary() Summary
}

// Summary counts what a plan writes.
type Summary struct {
	Chains, Rules, Deleted int // chains written, rules written, rules and chains deleted
	Text                   string
}

// Applier drives a backend: lock, read, plan, load, flush conntrack.
type Applier struct {
	Backend Backend
	// Lock serialises applies on this network namespace.
	Lock *Lock
	// Conntrack flushes stale UDP entries after a load (nil: not done).
	Conntrack Conntrack
	Log       *slog.Logger
	// Generation reads nf_tables' ruleset generation id (NFTablesGeneration; nil: not
	// used). With it, a backend whose rules live in nf_tables is not read again while
	// the generation has not moved since the state the applier holds was exact (see
	// generation.go).
	Generation Generation

	state State // what the last sync left in the kernel; nil before the first
	// loaded lists the Services ("namespace/name") of the map state was loaded from,
	// for wouldEmpty's check against a state held in memory (nil: not known).
	loaded map[string]bool
	// gen is the generation at which state is exactly the kernel's, when exact.
	gen   uint32
	exact bool
	// tracked caches whether the backend's rules live in nf_tables (nil: not asked).
	tracked *bool
	// moved is the generation move of the last sync's load, when the load's own
	// commits account for all of it (movedOK; see ownMove).
	moved   [2]uint32
	movedOK bool
	// testHookAfterLoad runs between a load and the generation read after it.
	testHookAfterLoad func()
}

// SyncOptions choose what one sync does.
type SyncOptions struct {
	Full bool
	// DryRun plans and reports the unified diff, and changes nothing.
	DryRun bool
	// Reread reads the kernel's state even when the applier remembers the last one,
	// so drift (rules changed by hand) is repaired; with a Generation, not while
	// nf_tables' generation shows that nothing has changed (see generation.go).
	Reread bool
	// Hint is passed to the plan (see PlanOptions).
	Hint *Hint
	// AllowEmpty lets a sync leave the node without any Service's rules: a map with no
	// Service, or one that shares no Service with the rules on the node. Without it
	// such a sync is refused (ErrWouldEmpty): it is what an empty or wrong input
	// (a failed kubectl in a pipe, a typo in a kind) looks like.
	AllowEmpty bool
	// OtherFamilyHasServices: sm is one family of a dual-stack run whose other family
	// has Services (IPv4-only Services on a dual-stack node), so a map of this family
	// with no Service is no sign of a wrong input by itself. It is still refused when
	// the node has Services' rules of this family, which the sync would delete.
	OtherFamilyHasServices bool
}

// ErrWouldEmpty is a sync refused because it would remove every Service's rules.
var ErrWouldEmpty = errors.New("refused")

// Result is what one sync did.
type Result struct {
	Summary Summary
	// Diff is the unified diff the plan makes to kube-proxy's part of the rules
	// (always for a dry run, otherwise nil).
	Diff []byte
	// Changed: something was (or, on a dry run, would be) loaded.
	Changed bool
	// ConntrackFlushed counts the stale UDP conntrack entries deleted.
	ConntrackFlushed int
	Took             time.Duration
	// Steps is where the time went.
	Steps Steps
	// ReadSkipped: the kernel was not read because its ruleset generation had not
	// moved since the state the applier holds was exact.
	ReadSkipped bool
}

// Steps are the durations of a sync's steps (zero for a step it skipped).
type Steps struct {
	Read, Plan, Load, Conntrack time.Duration
}

// Sync makes the kernel hold sm's rules.
func (a *Applier) Sync(ctx context.Context, sm *ir.ServiceMap, opts SyncOptions) (*Result, error) {
	start := time.Now()
	if a.Lock != nil {
		release, err := a.Lock.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	var steps Steps
	step := func(d *time.Duration) func() {
		t := time.Now()
		return func() { *d = time.Since(t) }
	}
	a.movedOK = false
	from := a.state
	skipped, read := false, false
	switch {
	case from != nil && !opts.Reread && !opts.DryRun:
		// Between intervals the state in memory is trusted, as before (a change the
		// generation shows is read at the next interval).
	case from != nil && !opts.DryRun && a.unchanged():
		skipped = true // nothing has committed to nf_tables since the state was exact
	default:
		var err error
		read = true
		done := step(&steps.Read)
		from, err = a.read(ctx)
		done()
		if err != nil {
			return nil, fmt.Errorf("reading the kernel's %s rules: %w", a.Backend.Name(), err)
		}
	}
	if !opts.AllowEmpty {
		loaded := a.loaded // the Services of the state this applier loaded, held in memory
		if read {
			loaded = nil
		}
		if err := wouldEmpty(sm, from, loaded, opts.OtherFamilyHasServices); err != nil {
			return nil, err
		}
	}
	done := step(&steps.Plan)
	plan, err := a.Backend.Plan(sm, from, PlanOptions{Full: opts.Full, Hint: opts.Hint})
	done()
	if err != nil {
		return nil, err
	}
	res := &Result{Summary: plan.Summary(), Changed: !plan.Empty(), ReadSkipped: skipped}
	if opts.DryRun {
		v := ViewOptions{Map: sm}
		res.Diff = ruleview.Unified("kernel", from.View(v), "after apply", plan.After().View(v))
		res.Took, res.Steps = time.Since(start), steps
		return res, nil
	}
	done = step(&steps.Load)
	after, err := a.load(ctx, plan)
	done()
	if err != nil {
		a.Forget() // read the kernel again next time
		return nil, err
	}
	a.state = after
	a.loaded = make(map[string]bool, len(sm.Services))
	for _, s := range sm.Services {
		if len(s.Ports) > 0 { // a Service without ports has no rules
			a.loaded[s.Key()] = true
		}
	}
	if a.Conntrack != nil {
		done = step(&steps.Conntrack)
		n, err := a.Conntrack.FlushStale(sm)
		done()
		res.ConntrackFlushed = n
		if err != nil {
			return res, fmt.Errorf("rules loaded, but flushing stale UDP conntrack entries failed: %w", err)
		}
	}
	res.Took, res.Steps = time.Since(start), steps
	return res, nil
}

// Check reads the kernel's state as Sync does and refuses, changing nothing, a map the
// empty-input guard refuses (ErrWouldEmpty; see SyncOptions.AllowEmpty). The state is
// remembered: a Sync with Reread that follows reads the kernel again only when nf_tables'
// generation moved since. A dual-stack apply checks every family before it loads any,
// so that a family refused leaves the other family's rules as they were too.
func (a *Applier) Check(ctx context.Context, sm *ir.ServiceMap, opts SyncOptions) error {
	if opts.AllowEmpty {
		return nil
	}
	if a.Lock != nil {
		release, err := a.Lock.Acquire(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	from, err := a.read(ctx)
	if err != nil {
		a.Forget()
		return fmt.Errorf("reading the kernel's %s rules: %w", a.Backend.Name(), err)
	}
	a.state, a.loaded = from, nil
	return wouldEmpty(sm, from, nil, opts.OtherFamilyHasServices)
}

// Forget drops the remembered state: the next sync reads the kernel.
func (a *Applier) Forget() { a.state, a.loaded, a.exact = nil, nil, false }

// trackable reports whether the generation id covers the backend's rules: the applier
// has a Generation to read and the backend's rules live in nf_tables.
func (a *Applier) trackable() bool {
	if a.Generation == nil {
		return false
	}
	if a.tracked == nil {
		t, ok := a.Backend.(generationTracked)
		in := ok && t.InNFTables()
		a.tracked = &in
	}
	return *a.tracked
}

// generation reads the generation id; ok is false when it cannot be used.
func (a *Applier) generation() (g uint32, ok bool) {
	if !a.trackable() {
		return 0, false
	}
	g, err := a.Generation()
	if err != nil {
		if a.Log != nil {
			a.Log.Debug("no nf_tables generation; reading the rules instead", "err", err)
		}
		return 0, false
	}
	return g, true
}

// unchanged reports that the kernel holds exactly the state the applier remembers:
// the state was exact at a generation, and the generation has not moved since.
func (a *Applier) unchanged() bool {
	if !a.exact {
		return false
	}
	g, ok := a.generation()
	return ok && g == a.gen
}

// read reads the kernel's state, and takes it as exact when the generation was the
// same before and after the read (nothing committed while it was read).
func (a *Applier) read(ctx context.Context) (State, error) {
	g0, ok0 := a.generation()
	st, err := a.Backend.Read(ctx)
	if err != nil {
		a.exact = false
		return nil, err
	}
	g1, ok1 := a.generation()
	a.gen, a.exact = g1, ok0 && ok1 && g0 == g1
	return st, nil
}

// load loads a plan, and takes the state after it as exact when the state planned from
// was exact at the generation just before the load, and the load's own transactions,
// each sure to change the ruleset, account for the whole move of the generation
// during it: then no other program committed in between, not even between the end of
// the load and the generation read after it (see generation.go).
func (a *Applier) load(ctx context.Context, plan Plan) (State, error) {
	g0, ok0 := a.generation()
	wasExact := a.exact && ok0 && g0 == a.gen
	a.exact = false
	after, err := a.Backend.Load(ctx, plan)
	if err != nil {
		return nil, err
	}
	if a.testHookAfterLoad != nil {
		a.testHookAfterLoad()
	}
	g1, ok1 := a.generation()
	c, known := plan.(committer)
	if !wasExact || !ok1 || !known {
		return after, nil
	}
	if commits := c.Commits(); commits.Sure && g1-g0 == uint32(commits.N) {
		a.gen, a.exact = g1, true
		a.moved, a.movedOK = [2]uint32{g0, g1}, g0 != g1
	}
	return after, nil
}

// Share tells the appliers of the run's other families (others may include a itself)
// about a's last sync: when its load's own commits account for the whole move of the
// generation, no other program committed meanwhile, and what changed is a's tables
// alone; so an applier whose state was exact before that move is exact after it, and
// its next interval need not read the kernel again. (Both families' rules live in one
// network namespace's nf_tables, in tables of their own.)
func (a *Applier) Share(others []*Applier) {
	if !a.movedOK {
		return
	}
	from, to := a.moved[0], a.moved[1]
	for _, o := range others {
		if o != a && o.exact && o.gen == from {
			o.gen = to
		}
	}
}

// Cleanup removes everything svcgen or kube-proxy made with the backend. With dryRun
// it returns the diff and changes nothing.
func (a *Applier) Cleanup(ctx context.Context, dryRun bool) (*Result, error) {
	a.Forget()
	return Cleanup(ctx, a.Backend, a.Lock, dryRun)
}

// Cleanup removes what one cleaner's mode made, holding the lock (nil: none). With
// dryRun it returns the diff and changes nothing.
func Cleanup(ctx context.Context, c Cleaner, lock *Lock, dryRun bool) (*Result, error) {
	start := time.Now()
	if lock != nil {
		release, err := lock.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	from, err := c.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the kernel's %s rules: %w", c.Name(), err)
	}
	plan, err := c.Cleanup(from)
	if err != nil {
		return nil, err
	}
	res := &Result{Summary: plan.Summary(), Changed: !plan.Empty()}
	if dryRun {
		res.Diff = ruleview.Unified("kernel", from.View(ViewOptions{}), "after cleanup", plan.After().View(ViewOptions{}))
	} else if _, err := c.Load(ctx, plan); err != nil {
		return nil, err
	}
	res.Took = time.Since(start)
	return res, nil
}

// LoadError is a load the kernel refused, after the rollback.
type LoadError struct {
	Mode string
	// Rule is the line the kernel refused ("" when the tool did not say), and
	// Service the service port (and endpoint) it came from.
	Rule, Service string
	Err           error // what the tool said
	// Rollback is the error of putting the kernel back, nil when that worked.
	Rollback error
}

func (e *LoadError) Error() string {
	msg := e.Mode + ": the kernel refused the rules"
	if e.Rule != "" {
		msg += ": " + e.Rule
	}
	if e.Service != "" {
		msg += " (from Service port " + e.Service + ")"
	}
	msg += fmt.Sprintf(": %v", e.Err)
	if e.Rollback != nil {
		return msg + fmt.Sprintf("; putting the previous rules back failed too, so the kernel may hold part of the new rules (run svcgen apply --full again): %v", e.Rollback)
	}
	return msg + "; the previous rules are in place"
}

func (e *LoadError) Unwrap() error { return e.Err }

// ErrNoKernelSupport marks a mode the kernel cannot run.
var ErrNoKernelSupport = errors.New("this kernel cannot run the mode")

// wouldEmpty refuses a map with no Service (unless the run's other family has some:
// otherFamily), and a map that shares no Service with the rules on the node when those
// hold some: kube-proxy never syncs before its informers have synced, and an empty or
// wrong input must not wipe a node, nor one family of a dual-stack node.
func wouldEmpty(sm *ir.ServiceMap, from State, loaded map[string]bool, otherFamily bool) error {
	if len(sm.Services) == 0 && !otherFamily {
		return fmt.Errorf("%w: the input has no Service, so the sync would delete every Service's rules on the node; check the input, or give --allow-empty if that is what you want", ErrWouldEmpty)
	}
	// A state this applier loaded itself and holds in memory has rules for exactly
	// the Services of the map it was loaded from (a Service without ports has none):
	// those, without drawing a view of every rule, which at 10,000 Services costs
	// seconds on every sync, more than the rest of a sync with one change or none.
	have := loaded
	if have == nil {
		have = servicesOf(from.View(ViewOptions{}))
	}
	if len(have) == 0 {
		return nil
	}
	for _, s := range sm.Services {
		if have[s.Key()] {
			return nil
		}
	}
	if len(sm.Services) == 0 {
		return fmt.Errorf("%w: the input has no %s Service and the node has %s rules for %d Services, so the sync would delete every one; check the input, or give --allow-empty", ErrWouldEmpty, sm.Family, sm.Family, len(have))
	}
	return fmt.Errorf("%w: the node has rules for %d Services and the input has none of them, so the sync would replace every one; check the input (the right cluster, namespace, node?), or give --allow-empty", ErrWouldEmpty, len(have))
}

// servicesOf lists the Services ("namespace/name") a view's sections and lines belong
// to, from their owners ("ns/svc:port" or "ns/svc:port -> endpoint").
func servicesOf(v *ruleview.View) map[string]bool {
	out := map[string]bool{}
	add := func(owner string) {
		owner, _, _ = strings.Cut(owner, " ")
		if key, _, _ := strings.Cut(owner, ":"); strings.Contains(key, "/") {
			out[key] = true
		}
	}
	for _, sec := range v.Sections {
		add(sec.Owner)
		for _, l := range sec.Lines {
			add(l.Owner)
		}
	}
	return out
}
