package main

import (
	"context"
	"fmt"
	"io"
	"strings"
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
	// Each argument is a file, or the PREFIX of the PREFIX.v4 and PREFIX.v6 files
	// compile -o PREFIX writes for a dual-stack run.
	sides := make([][]ruleFile, len(args))
	var all []ruleFile
	for i, a := range args {
		files, err := readRuleFiles(rulesPaths(a), stdin)
		if err != nil {
			return err
		}
		sides[i], all = files, append(all, files...)
	}
	if err := f.modeOfFiles(all); err != nil {
		return err
	}
	var maps []*ir.ServiceMap
	mode := compiler.Mode(f.mode)
	if withInputs {
		f.onNode = true // withInputs is --live -f
		res, err := f.compileInputs(stdin, stderr, nil)
		if err != nil {
			return err
		}
		maps, mode = res.Maps, res.Mode
		m, err := lookupMode(mode)
		if err != nil {
			return err
		}
		// The kernel's families are those the host supports, as for apply.
		if maps, _, err = onHost(ctx, res, m, 30*time.Second, stderr); err != nil {
			return err
		}
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
	p := &ruleParser{mode: m, states: map[parseKey]apply.State{}}
	// The families compared: the manifests', else every family the files hold.
	var families []model.IPFamily
	for _, sm := range maps {
		families = append(families, sm.Family)
	}
	if maps == nil {
		if families, err = p.families(all); err != nil {
			return &pipeline.InputError{Err: err}
		}
	}
	var out []byte
	for _, fam := range families {
		d, err := diffFamily(ctx, f, p, fam, mapOf(maps, fam), sides, stderr)
		if err != nil {
			return err
		}
		if len(families) > 1 && d != nil {
			// Say which family each difference belongs to, in the file names of
			// the diff's header.
			d = labelHeader(d, " ("+string(fam)+")")
		}
		out = append(out, d...)
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	if out != nil {
		return &exitError{code: exitDiffers}
	}
	return nil
}

// diffFamily is the unified diff of one family: the kernel's rules (--live) or the
// first file, against the manifests' map sm (nil without -f) or the other file.
func diffFamily(ctx context.Context, f *diffFlags, p *ruleParser, fam model.IPFamily, sm *ir.ServiceMap, sides [][]ruleFile, stderr io.Writer) ([]byte, error) {
	backend := p.mode.Backend(fam, 30*time.Second)
	var oldName, newName string
	var old, new apply.State
	var err error
	switch {
	case f.live:
		oldName = "kernel"
		if old, err = backend.Read(ctx); err != nil {
			return nil, err
		}
		if sm != nil {
			newName = "manifests"
			new, err = backend.Want(sm)
		} else {
			newName, new, err = p.side(sides[0], fam)
		}
	default:
		if oldName, old, err = p.side(sides[0], fam); err == nil {
			newName, new, err = p.side(sides[1], fam)
		}
	}
	if err != nil {
		return nil, &pipeline.InputError{Err: err}
	}
	v := apply.ViewOptions{Map: sm, All: !f.live}
	nv := v
	nv.Installed = f.live
	ov := old.View(v)
	if f.live && len(sides) == 0 && passedOver(sm, ov, "diff", stderr) {
		return nil, nil
	}
	return ruleview.Unified(oldName, ov, newName, new.View(nv)), nil
}

// labelHeader adds label to the three lines of a unified diff's header ("diff OLD
// NEW", "--- OLD", "+++ NEW").
func labelHeader(d []byte, label string) []byte {
	var b strings.Builder
	for i, l := range strings.SplitAfter(string(d), "\n") {
		if i < 3 && (strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ")) {
			l = strings.TrimSuffix(l, "\n") + label + "\n"
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// mapOf is the service map of a family among maps, nil when there is none.
func mapOf(maps []*ir.ServiceMap, fam model.IPFamily) *ir.ServiceMap {
	for _, sm := range maps {
		if sm.Family == fam {
			return sm
		}
	}
	return nil
}

// ruleParser parses rules files for diff with one mode's backends, each file once per
// family.
type ruleParser struct {
	mode   modes.Mode
	states map[parseKey]apply.State
}

type parseKey struct {
	name   string
	family model.IPFamily
}

// parse is a file's rules of a family.
func (p *ruleParser) parse(r ruleFile, fam model.IPFamily) (apply.State, error) {
	k := parseKey{r.name, fam}
	if st, ok := p.states[k]; ok {
		return st, nil
	}
	st, err := r.parse(p.mode.Backend(fam, 0))
	if err != nil {
		return nil, err
	}
	p.states[k] = st
	return st, nil
}

// holds reports whether a file holds rules of a family: a PREFIX.v4 or PREFIX.v6
// file those of its suffix; an nftables file the families it has a table of; any
// other file IPv4's (one iptables or ipvs file is read as one family, as before).
func (p *ruleParser) holds(r ruleFile, fam model.IPFamily) (bool, error) {
	for _, f := range model.Families {
		if strings.HasSuffix(r.name, "."+f.Suffix()) {
			return f == fam, nil
		}
	}
	if !p.mode.OneScript() {
		return fam == model.IPv4, nil
	}
	st, err := p.parse(r, fam)
	if err != nil {
		return false, err
	}
	return len(st.View(apply.ViewOptions{All: true}).Sections) > 0, nil
}

// families lists the families any of the files holds, in model.Families' order
// (IPv4 when they hold none).
func (p *ruleParser) families(files []ruleFile) ([]model.IPFamily, error) {
	var out []model.IPFamily
	for _, fam := range model.Families {
		for _, r := range files {
			ok, err := p.holds(r, fam)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, fam)
				break
			}
		}
	}
	if len(out) == 0 {
		out = []model.IPFamily{model.IPv4}
	}
	return out, nil
}

// side is one side's rules of a family: its file of the family; an nftables file
// without the family's table has none of its rules. A side of another mode without a
// file of the family (PREFIX.v4 against PREFIX.v4 and PREFIX.v6) is an error.
func (p *ruleParser) side(files []ruleFile, fam model.IPFamily) (string, apply.State, error) {
	for _, r := range files {
		ok, err := p.holds(r, fam)
		if err != nil {
			return "", nil, err
		}
		if ok {
			st, err := p.parse(r, fam)
			return r.name, st, err
		}
	}
	if p.mode.OneScript() {
		st, err := p.parse(files[0], fam) // a table of the other family only
		return files[0].name, st, err
	}
	return "", nil, fmt.Errorf("%s holds no %s rules, and the other side does (compile -o PREFIX writes PREFIX.%s)", files[0].name, fam, fam.Suffix())
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
