package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/verify"
)

type verifyFlags struct {
	inputFlags
	differences bool
}

func newVerify(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &verifyFlags{}
	cmd := &cobra.Command{
		Use:   "verify -f PATH... [flags]",
		Short: "Check that every mode's rules implement the service map",
		Long: `verify compiles the manifests in every mode svcgen can trace and checks that each
mode's rules implement the same service map. For every frontend of every Service
(cluster IP, node port on each address that takes node ports, localhost included,
external IP, load-balancer IP, health-check node port) it sends probes from every kind
of source the rules tell apart (another host, a pod on this node, a pod on another
node, the node itself, an endpoint reaching its own Service, a source that
loadBalancerSourceRanges allow), traces each through the rules, and compares with what
the service map says: the same endpoints with the same probabilities, the same session
affinity, the same masquerade decision, or the same verdict.

Modes may differ only where upstream kube-proxy's modes differ on purpose; --differences
lists those, each with its reason. Each disagreement is printed with its Service, and
verify exits with status 1.`,
		Example: `  svcgen verify -f examples/
  kubectl get svc,endpointslices,nodes -A -o yaml | svcgen verify -f - --node worker-1
  svcgen verify --differences`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("mode").Usage = "check only this mode (default: every mode svcgen can trace: " + modeList() + ")"
	cmd.Flags().BoolVar(&f.differences, "differences", false, "list the documented differences between modes and exit")
	return cmd
}

func modeList() string {
	var s []string
	for _, m := range verify.Modes() {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

func runVerify(f *verifyFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.differences {
		return writeDifferences(stdout)
	}
	res, err := f.compileInputs(stdin, stderr, nil)
	if err != nil {
		return err
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(verifyMemoryLimit(len(res.Map.Services))))
	var modes []compiler.Mode
	if f.mode != "" { // checked by compileInputs
		modes = []compiler.Mode{compiler.Mode(f.mode)}
	}
	report, err := verify.Run(res.Resolved.Cluster, verify.Options{Node: f.node, Modes: modes, Release: res.Map.Target.Release, Gates: res.Map.Target.Gates, Families: ir.FamiliesOf(res.Maps)})
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	if err := report.Write(stdout); err != nil {
		return err
	}
	if !report.OK() {
		return &exitError{code: exitInput, err: errors.New("")}
	}
	return nil
}

func writeDifferences(w io.Writer) error {
	var b strings.Builder
	for _, m := range verify.Modes() {
		ds := verify.DifferencesOf(m)
		fmt.Fprintf(&b, "%s: %d documented difference(s) from the service map\n", m, len(ds))
		for _, d := range ds {
			fmt.Fprintf(&b, "- %s\n", d.Name)
			for _, l := range wrap(d.Reason, 86) {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// verifyMemoryLimit is the soft memory limit verify runs under: 27 KiB a Service,
// at least 270 MiB (GOMEMLIMIT, when set, wins). While tracing 10,000 Services the
// heap holds 140 to 170 MB and the garbage collector let it grow to twice that (400
// MB of RSS); under the limit it stays near 270 MB for a few percent more CPU
// (BENCHMARKS.md, issue 16). The limit grows with the cluster, so a larger one is
// not held to a heap it cannot fit in.
func verifyMemoryLimit(services int) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1) // the environment's
	}
	return max(270<<20, int64(services)*(27<<10))
}
