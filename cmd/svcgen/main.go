// Command svcgen compiles Kubernetes Services into the rules kube-proxy would program
// on a node, and works with those rules on a node: apply, diff, trace, verify, audit.
//
// Exit status: 0 done; 1 the input is wrong (every error on stderr, one a line);
// 2 usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/internal/pipeline"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitInput = 1
	exitUsage = 2
)

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

func (e *exitError) Error() string { return e.err.Error() }

// run is main without os.Exit, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, ee.err)
		}
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "svcgen: %v\n", err)
		fmt.Fprintln(stderr, "Run 'svcgen --help' for usage.")
		return exitUsage
	case errors.Is(err, pipeline.ErrInput):
		fmt.Fprintln(stderr, err)
		return exitInput
	default:
		fmt.Fprintf(stderr, "svcgen: %v\n", err)
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
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newCompile(stdin, stdout, stderr), newGen(stdout))
	root.AddCommand(newTrace(stdin, stdout, stderr), newVerify(stdin, stdout, stderr), newGraph(stdin, stdout, stderr))
	root.AddCommand(newApply(stdin, stdout, stderr), newDiff(stdin, stdout, stderr), newAudit(stdin, stdout, stderr), newCleanup(stdout, stderr))
	root.AddCommand(newResolve(stdin, stdout, stderr))
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// printWarnings writes warnings, one a line.
func printWarnings(stderr io.Writer, warnings []error) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
}
