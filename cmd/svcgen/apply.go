package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/ir"
)

type applyFlags struct {
	inputFlags
	dryRun     bool
	full       bool
	watch      bool
	interval   time.Duration
	listen     string
	wait       time.Duration
	applyLock  string
	allowEmpty bool
	settle     time.Duration
}

func newApply(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply -f PATH... [flags]",
		Short: "Load the rules into this network namespace, changing only what differs",
		Long: `apply compiles the manifests as compile does and loads the rules into the kernel of
the network namespace it runs in.

iptables mode reads the kernel's tables (iptables-save), then loads only the difference
with iptables-restore --noflush: service chains that changed are rewritten, chains no
Service uses are deleted, KUBE-SERVICES and the other fixed chains only when their rules
changed, kube-proxy's jumps from the built-in chains added where missing (never twice).
Chains and rules of other software in the same tables are left alone. A large load (a
cold node) is cut into blocks of at most 500 chains, because iptables-nft's cost grows
much faster than linearly with the chains of one block. If the kernel refuses a rule,
apply puts back what it had loaded, names the rule and the Service it came from, and
exits 1. Stale UDP conntrack entries (to endpoints that are gone) are deleted.

nftables mode (-m nftables) loads kube-proxy's table only: what changed in one nft
transaction, or a whole new table (in stages when it is large and not there yet).
ipvs mode (-m ipvs) sets kube-ipvs0's addresses, the sets, virtual and real servers
one by one through netlink (open connections to what stays are kept) and the
companion chains, undoing every step if a later one fails; it first checks that the
kernel has IPVS.

Two applies in one network namespace wait for each other (a lock file, at most --wait);
the xtables lock is waited for at most --wait as well.

A dual-stack run loads both families (iptables and ip6tables; both nftables tables),
of those this host supports as kube-proxy checks them: a family left out (no
ip6tables, IPv6 disabled) is a warning.

--watch keeps the rules (of every family) in step: it syncs when an input file changes and every
--interval (then reading the kernel again, so rules changed by hand are put back), logs
each sync with its duration, and serves /healthz and Prometheus /metrics on --listen.
Rules that live in nf_tables (nftables mode, and iptables mode on iptables-nft) are
read again only when nf_tables' ruleset generation moved since svcgen last knew them
exactly (another program committed something): an interval with nothing changed
costs one netlink request instead of a read of the whole ruleset (log: read=skipped).
iptables-legacy and ipvs keep no generation and are read on every interval.`,
		Example: `  ip netns exec node1 svcgen apply -f examples/
  svcgen apply -f manifests/ --dry-run          # the unified diff it would load
  svcgen apply -f manifests/ --full             # rewrite every chain
  svcgen apply -f manifests/ -m nftables        # kube-proxy's nftables table
  svcgen apply -f manifests/ -c kube-proxy.yaml --watch --interval 30s --listen 127.0.0.1:10249`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runApply(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the unified diff that would be loaded, and change nothing")
	fl.BoolVar(&f.full, "full", false, "rewrite every chain, not only the ones that differ")
	fl.BoolVar(&f.allowEmpty, "allow-empty", false, "load even an input with no Service, or one that shares no Service with the rules on the node (both would delete every Service's rules)")
	fl.BoolVar(&f.watch, "watch", false, "keep syncing: on input changes and every --interval")
	fl.DurationVar(&f.interval, "interval", 30*time.Second, "with --watch: re-read the inputs and the kernel this often")
	fl.DurationVar(&f.settle, "settle", apply.DefaultSettle, "with --watch: read a changed input only once it has stayed unchanged this long")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:10249", "with --watch: address of /healthz and /metrics (\"\" for none)")
	fl.DurationVar(&f.wait, "wait", 30*time.Second, "wait at most this long for another apply and for the xtables lock")
	fl.StringVar(&f.applyLock, "apply-lock", "", "lock file that serialises applies (default /run/svcgen/apply-net-<netns inode>.lock)")
	return cmd
}

func runApply(ctx context.Context, f *applyFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	check := func(in pipeline.Inputs) error {
		if f.watch && (in.UsesStdin() || f.dryRun) {
			return usagef("--watch reads its inputs again and again: give files or folders, not -, and no --dry-run")
		}
		if f.interval <= 0 {
			return usagef("--interval must be positive")
		}
		return nil
	}
	unlock, err := f.holdLock()
	if err != nil {
		return err
	}
	defer unlock()
	var res *pipeline.Result
	var watch *pipeline.Watch
	f.onNode = true
	if f.watch {
		watch, res, err = f.watchInputs(stdin, stderr, check)
	} else {
		res, err = f.compileInputs(stdin, stderr, check)
	}
	if err != nil {
		return err
	}
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return err
	}
	lockPath := f.applyLock
	if lockPath == "" {
		lockPath = apply.DefaultLockPath()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// The families this host supports, as kube-proxy checks them; one applier per
	// family, as kube-proxy runs one proxier per family.
	maps, backends, err := onHost(ctx, res, mode, f.wait, stderr)
	if err != nil {
		return err
	}
	appliers := make([]*apply.Applier, len(maps))
	for i := range maps {
		appliers[i] = &apply.Applier{
			Backend:   backends[i],
			Lock:      &apply.Lock{Path: lockPath, Wait: f.wait},
			Conntrack: apply.NetlinkConntrack{},
			Log:       slog.New(slog.NewTextHandler(stderr, nil)),
			// Skip reading rules that live in nf_tables while its generation stands still.
			Generation: apply.NFTablesGeneration,
		}
	}
	if f.watch {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		paths := f.files
		if f.config != "" {
			paths = append(paths, f.config)
		}
		if f.lock != "" {
			if err := writeLock(f.lock, res.Lock); err != nil {
				return err
			}
		}
		unlock() // --watch reads the lock file once, at the start
		watch.Settle = f.settle
		current := make([]apply.Update, len(maps))
		for i, sm := range maps {
			current[i] = apply.Update{Map: sm}
		}
		w := &apply.Watch{
			Appliers: appliers, Paths: paths, Interval: f.interval, Listen: f.listen, Log: appliers[0].Log, AllowEmpty: f.allowEmpty,
			Settle: f.settle,
			// The one boundary to the compiler: pipeline.Watch keeps the compiled
			// state and recompiles only the Services a changed file touches, and
			// never changes the run's families.
			Source: apply.SourceFunc(func(context.Context, []string) ([]apply.Update, error) {
				up, err := watch.Refresh()
				if err != nil || up == nil {
					for i := range current {
						current[i].Hint = nil // the maps the appliers loaded last
					}
					return current, err
				}
				printProblems(stderr, up.Warnings)
				for i := range current {
					fam := current[i].Map.Family // the host's families, never changed
					current[i] = apply.Update{Map: mapOf(up.Maps, fam)}
					if up.Changed != nil {
						current[i].Hint = &apply.Hint{Since: mapOf(up.Prevs, fam), Changed: up.Changed}
					}
				}
				return current, nil
			}),
		}
		return w.Run(ctx)
	}
	services := 0
	for _, sm := range maps {
		services += len(sm.Services)
	}
	opts := make([]apply.SyncOptions, len(maps))
	for i, sm := range maps {
		// A family without Services on a dual-stack node is no sign of a wrong input
		// when the other family has some (IPv4-only Services on a dual-stack node),
		// unless the node has rules of that family that the sync would delete.
		opts[i] = apply.SyncOptions{
			Full:                   f.full,
			DryRun:                 f.dryRun,
			AllowEmpty:             f.allowEmpty,
			OtherFamilyHasServices: len(maps) > 1 && services > len(sm.Services),
			Reread:                 true, // after a Check, only if nf_tables' generation moved
		}
	}
	// Every family passes the empty-input guard before any is loaded: a family
	// refused leaves the other one as it was.
	for i, sm := range maps {
		if len(maps) == 1 {
			break // Sync checks it
		}
		if err := appliers[i].Check(ctx, sm, opts[i]); err != nil {
			return fmt.Errorf("%s: %w", appliers[i].Backend.Name(), err)
		}
	}
	for i, sm := range maps {
		if err := syncFamily(ctx, appliers[i], sm, opts[i], stdout, stderr); err != nil {
			if len(maps) > 1 {
				return fmt.Errorf("%s: %w", appliers[i].Backend.Name(), err)
			}
			return err
		}
		appliers[i].Share(appliers) // the next family need not read again
	}
	if f.lock != "" && !f.dryRun {
		return writeLock(f.lock, res.Lock)
	}
	return nil
}

// syncFamily applies one family's service map and reports what it did.
func syncFamily(ctx context.Context, a *apply.Applier, sm *ir.ServiceMap, opts apply.SyncOptions, stdout, stderr io.Writer) error {
	backend := a.Backend
	out, err := a.Sync(ctx, sm, opts)
	if err != nil {
		return err
	}
	if opts.DryRun {
		stdout.Write(out.Diff)
		if !out.Changed {
			fmt.Fprintf(stderr, "%s: no changes\n", backend.Name())
		}
		return nil
	}
	msg := "no changes"
	if out.Changed {
		msg = out.Summary.Text
	}
	fmt.Fprintf(stderr, "%s: %s (%v)\n", backend.Name(), msg, out.Took.Round(time.Millisecond))
	if out.ConntrackFlushed > 0 {
		fmt.Fprintf(stderr, "conntrack: %s deleted\n", textutil.Count(out.ConntrackFlushed, "stale UDP entry", "stale UDP entries"))
	}
	return nil
}
