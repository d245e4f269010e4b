// Command svcgen compiles Kubernetes Services into the rules kube-proxy would program
// on a node, and works with those rules on a node: apply, diff, trace, verify, audit.
//
// Exit status: 0 done; 1 the input is wrong (every error on stderr, one a line);
// 2 usage; 3 diff and audit found differences.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/modes"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitInput = 1
	exitUsage = 2
	// exitDiffers is diff's and audit's "the rules differ": apart from 1, so that a
	// script can tell drift from rules it could not read.
	exitDiffers = 3
)

// usageArgs makes a check of positional arguments a usage error (exit status 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
}

// noArgs is the check of a command that takes only flags.
var noArgs = usageArgs(func(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments (got %q); manifests go after -f", cmd.Name(), args[0])
	}
	return nil
})

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError carries a chosen exit status with an already printed outcome (audit's
// "drift found" is 1 without being an input error).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// run is main without os.Exit, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if c, _, ferr := root.Find(args); ferr == nil && c == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		// "svcgen cmopile -f x.yaml": the unknown command is the mistake to report,
		// not -f, which is no flag of svcgen alone.
		err = &usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ee *exitError
	var ge *compiler.GateError
	var oe *modes.OptionError
	switch {
	case errors.As(err, &ee):
		if ee.err != nil && ee.err.Error() != "" { // diff's differences are on stdout already
			fmt.Fprintln(stderr, terminalSafe(ee.err.Error()))
		}
		return ee.code
	case errors.As(err, &ue), errors.As(err, &ge), errors.As(err, &oe), errors.Is(err, pipeline.ErrNoInput):
		// ge: --feature-gates, found while compiling; oe: an option the mode lacks
		fmt.Fprintf(stderr, "svcgen: %s\n", terminalSafe(err.Error()))
		fmt.Fprintln(stderr, "Run 'svcgen --help' for usage.")
		return exitUsage
	case errors.Is(err, pipeline.ErrInput):
		fmt.Fprintln(stderr, terminalSafe(err.Error()))
		return exitInput
	default:
		fmt.Fprintf(stderr, "svcgen: %s\n", terminalSafe(err.Error()))
		return exitInput
	}
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "svcgen",
		Short: "Compile Kubernetes Services into kube-proxy's kernel rules",
		Long: `svcgen is an offline, deterministic compiler for Kubernetes Services. It reads
manifests (Service, EndpointSlice, Endpoints, Pod, Node, ServiceCIDR, kind: List and a
KubeProxyConfiguration) and writes exactly the rules kube-proxy would program on a node:
iptables-restore input, an nft -f script, or an ipvs setup script.`,
		Example: `  # Rules for the example cluster, loaded into a fresh network namespace:
  svcgen compile -f examples/ > rules.txt
  ip netns exec demo iptables-restore < rules.txt

  # From a live cluster, for node worker-1:
  kubectl get svc,endpointslices,nodes -A -o yaml | svcgen compile -f - --node worker-1

  # Only what changed since the rules on the node now (kube-proxy's partial sync):
  iptables-save | svcgen compile -f manifests/ --previous - --noflush`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// With Args set, an unknown command reaches usageArgs (exit 2) instead of
		// cobra's own error; svcgen alone prints the help.
		Args: usageArgs(func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q", args[0])
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newCompile(stdin, stdout, stderr), newGen(stdout))
	root.AddCommand(newTrace(stdin, stdout, stderr), newVerify(stdin, stdout, stderr), newGraph(stdin, stdout, stderr), newExplain(stdin, stdout, stderr))
	root.AddCommand(newApply(stdin, stdout, stderr), newDiff(stdin, stdout, stderr), newAudit(stdin, stdout, stderr), newCleanup(stdout, stderr))
	root.AddCommand(newResolve(stdin, stdout, stderr), newVersion(stdout))
	return root
}

// printWarnings writes warnings, one a line.
func printWarnings(stderr io.Writer, warnings []error) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", terminalSafe(w.Error()))
	}
}

// terminalSafe is a message for stderr with every line escaped (textutil.Escape):
// the loader quotes the names it puts in messages, and this is the last guard
// against any text from the input sending the terminal control codes.
func terminalSafe(msg string) string {
	lines := strings.Split(msg, "\n")
	for i, line := range lines {
		lines[i] = textutil.Escape(line)
	}
	return strings.Join(lines, "\n")
}
