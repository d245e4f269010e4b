package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/modes"
)

func newCleanup(stdout, stderr io.Writer) *cobra.Command {
	var dryRun bool
	var wait time.Duration
	var lockPath string
	cmd := &cobra.Command{
		Use:   "cleanup [--dry-run]",
		Short: "Remove every rule and chain svcgen or kube-proxy made, and nothing else",
		Long: `cleanup removes from this network namespace what svcgen or kube-proxy made in any
mode: in the iptables and ip6tables filter, nat and mangle tables the KUBE-* chains
(iptables and ipvs mode, older KUBE-XLB- chains included) and the rules of the built-in
chains that jump to them. KUBE-FIREWALL goes only when it holds nothing but kube-proxy's
localhost rule (otherwise it is kubelet's). Other chains and rules stay as they are; a
chain of other software that jumps into kube-proxy's chains stops cleanup with an error,
before anything is changed. Large tables are cleaned in blocks, as apply loads them.`,
		Example: `  ip netns exec node1 svcgen cleanup
  svcgen cleanup --dry-run      # the unified diff of what would go`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if lockPath == "" {
				lockPath = apply.DefaultLockPath()
			}
			for _, b := range cleanable(ctx, modes.Cleaners(wait), stderr) {
				res, err := apply.Cleanup(ctx, b, &apply.Lock{Path: lockPath, Wait: wait}, dryRun)
				if err != nil {
					return fmt.Errorf("%s: %w", b.Name(), err)
				}
				if dryRun {
					stdout.Write(res.Diff)
					continue
				}
				msg := "nothing to remove"
				if res.Changed {
					msg = res.Summary.Text
				}
				fmt.Fprintf(stderr, "%s: %s (%v)\n", b.Name(), msg, res.Took.Round(time.Millisecond))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&dryRun, "dry-run", false, "print the unified diff of what would be removed, and change nothing")
	fl.DurationVar(&wait, "wait", 30*time.Second, "wait at most this long for an apply in progress and for the xtables lock")
	fl.StringVar(&lockPath, "apply-lock", "", "the lock file apply uses (default /run/svcgen/apply-net-<netns inode>.lock)")
	return cmd
}
