package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
)

type auditFlags struct {
	inputFlags
	live  bool
	rules string
}

func newAudit(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &auditFlags{}
	cmd := &cobra.Command{
		Use:   "audit -f PATH... (--live | --rules FILE)",
		Short: "Report, per service port, the rules a node is missing, has extra or has different",
		Long: `audit compiles the manifests and compares the rules they give with the rules of a
node: the kernel of this network namespace (--live) or a dump of it (--rules FILE, such
as iptables-save output; - for stdin). Only what kube-proxy owns is compared: its
chains and its jumps from the built-in chains.

Each service port that drifted gets one line, "missing" (the node has none of its
rules), "extra" (the node has rules for a port the manifests do not have) or
"different", followed by the lines the node lacks (-) and has beyond them (+), hashed
chains named with their Service. kube-proxy's own fixed rules are reported as (node).
The exit status is 0 when the node is in step, 3 when anything drifted, 1 when the
manifests or the rules cannot be read, 2 for a usage mistake.`,
		Example: `  ip netns exec node1 svcgen audit -f manifests/ --live
  ssh node1 iptables-save | svcgen audit -f manifests/ --node node1 --rules -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.live, "live", false, "audit the kernel's rules of this network namespace")
	fl.StringVar(&f.rules, "rules", "", "audit a dump of a node's rules: iptables-save or nft list output, or ipvs mode's script; its format chooses the mode unless -m does (- for stdin)")
	return cmd
}

func runAudit(ctx context.Context, f *auditFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.live == (f.rules != "") {
		return usagef("audit needs one of --live and --rules FILE")
	}
	var dump []ruleFile
	explicit := f.mode != ""
	if !f.live {
		if err := stdinOnce(append(f.files, f.rules, f.config)...); err != nil {
			return err
		}
		var err error
		if dump, err = readRuleFiles(rulesPaths(f.rules), stdin); err != nil {
			return err
		}
		if err := f.modeOfFiles(dump); err != nil {
			return err
		}
	}
	f.onNode = f.live
	res, err := f.compileInputs(stdin, stderr, stdinTaken(f.rules == "-"))
	if err != nil {
		return err
	}
	if c := res.Cluster.Configs; dump != nil && !explicit && len(c) > 0 && c[0].Mode != "" && c[0].Mode != f.mode {
		return &pipeline.InputError{Err: fmt.Errorf("%s holds %s rules, but the KubeProxyConfiguration says mode %s (give -m to choose)", dump[0].name, f.mode, c[0].Mode)}
	}
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return err
	}
	// One backend per family, as kube-proxy runs one proxier per family; on this
	// node, of the families the host supports, as kube-proxy checks them.
	maps, backends := res.Maps, make([]apply.Backend, len(res.Maps))
	for i, sm := range maps {
		backends[i] = mode.Backend(sm.Family, 0)
	}
	if f.live {
		if maps, backends, err = onHost(ctx, res, mode, 0, stderr); err != nil {
			return err
		}
	}
	var drift []ruleview.Drift
	ports := 0
	for i, sm := range maps {
		backend := backends[i]
		want, err := backend.Want(sm)
		if err != nil {
			return err
		}
		var have apply.State
		if f.live {
			have, err = backend.Read(ctx)
		} else {
			have, err = dumpOf(dump, sm.Family).parse(backend)
			if err != nil {
				err = &pipeline.InputError{Err: err}
			}
		}
		if err != nil {
			return err
		}
		v := apply.ViewOptions{Map: sm}
		kernel := have.View(v)
		if f.live && len(maps) > 1 && passedOver(sm, kernel, "audit", stderr) {
			continue
		}
		for _, d := range ruleview.Audit(want.View(v), kernel) {
			if len(maps) > 1 {
				d.Port += " (" + string(sm.Family) + ")"
			}
			drift = append(drift, d)
		}
		for _, svc := range sm.Services {
			ports += len(svc.Ports)
		}
	}
	printDrift(stdout, drift)
	if len(drift) == 0 {
		fmt.Fprintf(stderr, "audit: %s, all in step\n", textutil.Count(ports, "service port", "service ports"))
		return nil
	}
	count := map[ruleview.Kind]int{}
	for _, d := range drift {
		count[d.Kind]++
	}
	return &exitError{code: exitDiffers, err: fmt.Errorf("audit: %d drifted (%d missing, %d extra, %d different) of %s",
		len(drift), count[ruleview.Missing], count[ruleview.Extra], count[ruleview.Different], textutil.Count(ports, "service port", "service ports"))}
}

func printDrift(w io.Writer, drift []ruleview.Drift) {
	var b strings.Builder
	for _, d := range drift {
		fmt.Fprintf(&b, "%-9s %s\n", d.Kind, d.Port)
		for _, l := range d.Missing {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
		for _, l := range d.Extra {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	io.WriteString(w, b.String())
}

// rulesPaths are the files --rules names: the file itself, or, when there is no such
// file, PREFIX.v4 and PREFIX.v6 of them that exist (what compile -o PREFIX writes for
// a dual-stack run in iptables and ipvs modes).
func rulesPaths(p string) []string {
	if _, err := os.Stat(p); p == "-" || err == nil {
		return []string{p}
	}
	var out []string
	for _, fam := range model.Families {
		if _, err := os.Stat(p + "." + fam.Suffix()); err == nil {
			out = append(out, p+"."+fam.Suffix())
		}
	}
	if len(out) == 0 {
		return []string{p}
	}
	return out
}

// dumpOf is the rules file of a family: the PREFIX.v4 or PREFIX.v6 one, else the one
// file (an nftables file holds both families' tables).
func dumpOf(files []ruleFile, f model.IPFamily) ruleFile {
	for _, r := range files {
		if strings.HasSuffix(r.name, "."+f.Suffix()) {
			return r
		}
	}
	return files[0]
}
