package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/ruleview"
)

type diffFlags struct {
	inputFlags
	live bool
}

func newDiff(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff OLD NEW | --live NEW | --live -f PATH...",
		Short: "Show the unified diff between two rulesets, with each hashed chain's Service",
		Long: `diff prints the unified diff between two rulesets of one mode (files written by
compile, or the kernel's dump such as iptables-save; - for stdin), or between the rules
in the kernel of this network namespace (--live) and a rules file or the rules the
manifests compile to (-f). The files' format tells their mode (iptables-save or
restore input, an nft script or listing, ipvs mode's script); -m need not be given.

Rulesets are compared chain by chain in one fixed order, rule by rule by meaning: the
same rule spelled as iptables-save spells it and as kube-proxy writes it is no
difference. Every hashed chain name carries the service port it belongs to, read from
the rules' own comments (and from the manifests, with -f):
  -A KUBE-SERVICES ... -j KUBE-SVC-XPGD46QRK7WJZT7O (ns1/svc1:p80)
  :KUBE-SEP-SXIVWICOYRO3J4NJ (ns1/svc1:p80 -> 10.180.0.1:80) -
With --live only what kube-proxy owns is compared (its chains and its jumps from the
built-in chains). The exit status is 0 when they are the same, 3 when they differ, 1
when a ruleset or the manifests cannot be read, 2 for a usage mistake.`,
		Example: `  svcgen diff before.rules after.rules
  ip netns exec node1 svcgen diff --live -f manifests/
  svcgen compile -f manifests/ | svcgen diff --live -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), f, args, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.live, "live", false, "compare the kernel's rules (this network namespace) with NEW or the manifests")
	return cmd
}

func runDiff(ctx context.Context, f *diffFlags, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	withInputs := len(f.files) > 0
	switch {
	case f.live && withInputs && len(args) == 0:
	case f.live && !withInputs && len(args) == 1:
	case !f.live && !withInputs && len(args) == 2:
	default:
		return usagef("diff takes OLD NEW, --live NEW, or --live with -f manifests")
	}
	if err := stdinOnce(args...); err != nil {
		return err
	}
	files, err := readRuleFiles(args, stdin)
	if err != nil {
		return err
	}
	if err := f.modeOfFiles(files); err != nil {
		return err
	}
	var sm *ir.ServiceMap
	mode, family := compiler.Mode(f.mode), model.IPv4
	if withInputs {
		res, err := f.compileInputs(stdin, stderr, nil)
		if err != nil {
			return err
		}
		sm, mode, family = res.Map, res.Mode, res.Map.Family
	} else if err := checkMode(f.mode); err != nil {
		return err
	}
	if mode == "" {
		mode = compiler.IPTables
	}
	m, err := lookupMode(mode)
	if err != nil {
		return err
	}
	backend := m.Backend(family, 30*time.Second)
	var oldName, newName string
	var old, new apply.State
	switch {
	case f.live:
		oldName = "kernel"
		if old, err = backend.Read(ctx); err != nil {
			return err
		}
		if sm != nil {
			newName = "manifests"
			new, err = backend.Want(sm)
		} else {
			newName = files[0].name
			new, err = files[0].parse(backend)
		}
	default:
		oldName, newName = files[0].name, files[1].name
		if old, err = files[0].parse(backend); err == nil {
			new, err = files[1].parse(backend)
		}
	}
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	v := apply.ViewOptions{Map: sm, All: !f.live}
	nv := v
	nv.Installed = f.live
	d := ruleview.Unified(oldName, old.View(v), newName, new.View(nv))
	if _, err := stdout.Write(d); err != nil {
		return err
	}
	if d != nil {
		return &exitError{code: exitDiffers}
	}
	return nil
}

// checkMode checks --mode ("" leaves the choice to the configuration).
func checkMode(mode string) error {
	if mode == "" {
		return nil
	}
	if _, err := modes.Lookup(mode); err != nil {
		return usagef("--mode: %v", err)
	}
	return nil
}

// lookupMode is the registry's entry for a mode the inputs chose.
func lookupMode(mode compiler.Mode) (modes.Mode, error) {
	m, err := modes.Lookup(string(mode))
	if err != nil {
		return modes.Mode{}, &pipeline.InputError{Err: err}
	}
	return m, nil
}

// ruleFile is a rules file named on the command line, read, and the mode whose rules
// it holds.
type ruleFile struct {
	name string
	data []byte
	mode modes.Mode
}

// readRuleFiles reads rules files ("-" is stdin) and tells each one's mode.
func readRuleFiles(paths []string, stdin io.Reader) ([]ruleFile, error) {
	files := make([]ruleFile, len(paths))
	for i, p := range paths {
		name, data, err := readInput(p, stdin)
		if err != nil {
			return nil, &pipeline.InputError{Err: err}
		}
		m, err := modes.Detect(data)
		if err != nil {
			return nil, &pipeline.InputError{Err: fmt.Errorf("%s: %w", name, err)}
		}
		files[i] = ruleFile{name: name, data: data, mode: m}
	}
	return files, nil
}

func (r ruleFile) parse(b apply.Backend) (apply.State, error) { return b.Parse(r.name, r.data) }

// modeOfFiles takes the mode from the rules files when -m does not name one, and
// refuses files of different modes, or of another mode than -m names.
func (f *inputFlags) modeOfFiles(files []ruleFile) error {
	if len(files) == 0 {
		return nil
	}
	first := files[0]
	for _, r := range files[1:] {
		if r.mode.Name != first.mode.Name {
			return &pipeline.InputError{Err: fmt.Errorf("%s holds %s rules and %s %s rules: they cannot be compared", first.name, first.mode.Name, r.name, r.mode.Name)}
		}
	}
	switch {
	case f.mode == "":
		f.mode = first.mode.Name
	case f.mode != first.mode.Name:
		return usagef("--mode %s, but %s holds %s rules", f.mode, first.name, first.mode.Name)
	}
	return nil
}
