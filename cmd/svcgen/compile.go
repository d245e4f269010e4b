package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/fileutil"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/release"
)

// inputFlags are the flags every command that reads manifests shares.
type inputFlags struct {
	files         []string
	config        string
	mode          string
	node          string
	lock          string
	serviceCIDR   []string
	nodePortRange string
	dialect       string
	release       string
	gates         map[string]string
	nodes         int
	podCIDR       []string
	ipFamily      string
	readFlags     // --strict, -q, -v: see inputs.go
	// onNode is set by the commands that program or read this node's kernel (apply,
	// audit --live, diff --live): their runs take the host's families, both, as
	// kube-proxy does on a host that supports both; onHost then leaves out what the
	// host lacks.
	onNode bool
}

func (f *inputFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "manifests: a file, a folder (read recursively) or - for stdin; repeatable")
	fl.StringVarP(&f.config, "config", "c", "", "a KubeProxyConfiguration file")
	fl.StringVarP(&f.mode, "mode", "m", "", "proxy mode: iptables, ipvs or nftables (default: the configuration's mode, else iptables)")
	fl.StringVar(&f.node, "node", "", "the Node the rules are for (default: the configuration's hostnameOverride, else the only Node, else node-1 of --nodes)")
	fl.IntVar(&f.nodes, "nodes", 0, "make this many Nodes (node-1 ... node-N) for the workloads' Pods when the input has none")
	fl.StringArrayVar(&f.podCIDR, "pod-cidr", nil, "give Nodes without spec.podCIDRs a /24 (IPv6: /64) of this CIDR for their Pods (default 10.244.0.0/16); repeatable, one per family")
	fl.StringVar(&f.lock, "lock", "", "keep allocated ClusterIPs and NodePorts stable in this file (read, then rewritten)")
	fl.StringArrayVar(&f.serviceCIDR, "service-cidr", nil, "allocate ClusterIPs from this CIDR when the input has no ServiceCIDR (default 10.96.0.0/12); repeatable, one per family")
	fl.StringVar(&f.nodePortRange, "node-port-range", "30000-32767", "allocate NodePorts from this range")
	fl.StringVar(&f.dialect, "dialect", "", "accept a manifest dialect: minik8s (course-project YAML)")
	fl.StringVar(&f.release, "kube-proxy-version", "", "the kube-proxy release to write for: "+release.Names()+" (default: the Nodes' kubelet release, else "+release.Newest().String()+")")
	fl.StringVar(&f.ipFamily, "ip-family", "", "the IP families to write for: ipv4, ipv6 or dual (default: the NodeEnvironment's ipFamily, else on this node (apply, audit --live, diff --live) those the host supports, as kube-proxy, else the families the input has)")
	fl.StringToStringVar(&f.gates, "feature-gates", nil, "feature gates, as kube-proxy takes them: Gate=true,Other=false (over the configuration's featureGates)")
	f.readFlags.register(cmd)
}

// target reads --kube-proxy-version and --feature-gates into s.
func (f *inputFlags) target(s *pipeline.Settings) error {
	if f.release != "" {
		r, err := release.Parse(f.release)
		if err != nil {
			return usagef("--kube-proxy-version: %v", err)
		}
		s.Release = r
	}
	for name, v := range f.gates {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return usagef("--feature-gates: %s=%s: the value must be true or false", name, v)
		}
		if s.Gates == nil {
			s.Gates = map[string]bool{}
		}
		s.Gates[name] = on
	}
	return nil
}

// settings checks the flags and turns them into pipeline settings.
func (f *inputFlags) settings(stdin io.Reader) (pipeline.Inputs, pipeline.Settings, error) {
	in := pipeline.Inputs{Files: f.files, Config: f.config, Stdin: stdin}
	var s pipeline.Settings
	switch f.dialect {
	case "":
	case "minik8s":
		in.Dialect = load.MiniK8s
	default:
		return in, s, usagef("--dialect: unknown dialect %q (known: minik8s)", f.dialect)
	}
	if err := checkMode(f.mode); err != nil {
		return in, s, err
	}
	s.Mode = compiler.Mode(f.mode)
	for _, c := range f.serviceCIDR {
		for _, part := range strings.Split(c, ",") {
			p, err := model.ParsePrefix(strings.TrimSpace(part))
			if err != nil {
				return in, s, usagef("--service-cidr: %v", err)
			}
			s.ServiceCIDRs = append(s.ServiceCIDRs, p.Masked())
		}
	}
	r, err := compiler.ParsePortRange(f.nodePortRange)
	if err != nil {
		return in, s, usagef("--node-port-range: %v", err)
	}
	s.NodePortRange = r
	if f.node != "" {
		if err := model.CheckNodeName(f.node); err != nil {
			return in, s, usagef("--node: %v", err)
		}
	}
	s.Node, s.LockFile = f.node, f.lock
	if f.nodes < 0 || f.nodes > compiler.MaxMadeNodes {
		return in, s, usagef("--nodes: %d is out of range (0-%d)", f.nodes, compiler.MaxMadeNodes)
	}
	s.Nodes = f.nodes
	families := map[model.IPFamily]bool{}
	for _, c := range f.podCIDR {
		for _, part := range strings.Split(c, ",") {
			p, err := model.ParsePrefix(strings.TrimSpace(part))
			if err != nil {
				return in, s, usagef("--pod-cidr: %v", err)
			}
			fam := model.FamilyOf(p.Addr())
			if families[fam] {
				return in, s, usagef("--pod-cidr: a second %s CIDR, %s (give one per family)", fam, p)
			}
			families[fam] = true
			s.PodCIDRs = append(s.PodCIDRs, p.Masked())
		}
	}
	if s.Families, err = parseIPFamily(f.ipFamily); err != nil {
		return in, s, err
	}
	if f.onNode {
		s.Host = model.Families
	}
	if err := f.target(&s); err != nil {
		return in, s, err
	}
	if err := stdinOnce(append(slices.Clone(f.files), f.config)...); err != nil {
		return in, s, err
	}
	return in, s, nil
}

type compileFlags struct {
	inputFlags
	noflush  bool
	previous string
	minimal  bool
	output   string
	split    bool
	stages   bool // nftables: see compile_nft.go
}

func newCompile(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &compileFlags{}
	cmd := &cobra.Command{
		Use:   "compile -f PATH... [flags]",
		Short: "Write the rules kube-proxy would program on a node",
		Long: `compile reads manifests and writes the rules kube-proxy would program on one node.

iptables mode writes iptables-restore input. By default it is a complete file for a
node or network namespace whose nat and filter tables svcgen owns (built-in chains,
kube-proxy's jumps into its chains, every KUBE-* chain). --noflush writes exactly
kube-proxy's payload (KUBE-* chains only) for "iptables-restore --noflush". --previous
FILE (an earlier output, or iptables-save of the node; - for stdin) writes what
kube-proxy's partial sync would: its fixed chains in full, the service chains that
changed, and -X for chains no Service uses any more. --minimal also leaves out fixed
chains whose rules did not change: the smallest correct restore.

ipvs mode (-m ipvs, or mode: ipvs in the configuration) writes one POSIX shell script
that sets the node up as kube-proxy's ipvs proxier does: sysctls, the kube-ipvs0 dummy
interface with every virtual address, the ipsets, the IPVS virtual and real servers,
and the companion iptables chains. Running it again changes only what differs (IPVS is
reconciled with the node's ipvsadm -Sn; nothing is cleared). --split -o DIR writes the
parts as files instead: sysctl.conf, addresses, ipset.restore, ipvsadm.rules and
iptables.rules.

nftables mode (-m nftables, or mode: nftables in the configuration) writes an nft -f
script that replaces kube-proxy's table (ip or ip6 kube-proxy) in one transaction and
touches nothing else; running it again leaves the same table. --previous FILE (an
earlier script, or "nft list ruleset" output) writes only what changed, as kube-proxy's
partial sync does: every chain of a changed Service flushed and rewritten. --minimal
also leaves out the chains whose rules did not change (an endpoint's chain carries its
address, so one moved endpoint rewrites one endpoint chain and the service chain, not
all ten). --stages writes a shell script that loads the table in five nft
transactions: faster for large clusters, but not atomic (see docs/compile.md).

Services without a ClusterIP or NodePort get one, deterministically; --lock keeps the
choice stable across runs. Services with a selector and no EndpointSlice get endpoints
from the Pods they select.`,
		Example: `  svcgen compile -f examples/ > rules.txt && iptables-restore < rules.txt
  svcgen compile -f cluster.yaml -c kube-proxy.yaml --node worker-1 --noflush -o rules.txt
  svcgen compile -f manifests/ --lock svcgen.lock          # stable ClusterIPs and NodePorts
  iptables-save | svcgen compile -f manifests/ --previous - --minimal | iptables-restore --noflush
  svcgen compile --dialect minik8s -f testdata/minik8s/
  svcgen compile -f examples/ -m ipvs -o node.sh && sudo sh node.sh   # ipvs mode, re-runnable
  svcgen compile -f examples/ -m ipvs --split -o ipvs/ && sudo ipvsadm -R < ipvs/ipvsadm.rules
  svcgen compile -f examples/ -m nftables > rules.nft && nft -f rules.nft
  nft list ruleset | svcgen compile -f manifests/ -m nftables --previous - | nft -f -
  nft list table ip kube-proxy | svcgen compile -f manifests/ -m nftables --previous - --minimal | nft -f -
  svcgen compile -f big-cluster/ -m nftables --stages > load.sh && sh load.sh`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompile(f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&f.noflush, "noflush", false, "write kube-proxy's payload only, for iptables-restore --noflush")
	fl.StringVar(&f.previous, "previous", "", "write a partial sync against this ruleset (svcgen output or iptables-save; - for stdin)")
	fl.BoolVar(&f.minimal, "minimal", false, "with --previous: also leave out chains whose rules did not change (iptables: fixed chains; nftables: any chain)")
	fl.StringVarP(&f.output, "output", "o", "", "write to this file (through a temporary file and a rename) instead of stdout")
	fl.BoolVar(&f.split, "split", false, "ipvs mode: write the script's parts as separate files into the folder -o names")
	fl.BoolVar(&f.stages, "stages", false, "nftables: write a shell script that loads the table in stages (faster for large clusters, not atomic)")
	return cmd
}

func runCompile(f *compileFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	unlock, err := f.holdLock()
	if err != nil {
		return err
	}
	defer unlock()
	res, err := f.compileInputs(stdin, stderr, func(in pipeline.Inputs) error {
		if f.minimal && f.previous == "" {
			return usagef("--minimal needs --previous")
		}
		if err := f.checkOutputs(); err != nil {
			return err
		}
		return stdinTaken(f.previous == "-")(in)
	})
	if err != nil {
		return err
	}
	// Only the service map is written from here: let the clusters go, before a
	// previous ruleset is read.
	res.KeepMaps()
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return err
	}
	opts := modes.Options{NoFlush: f.noflush, Minimal: f.minimal, Stages: f.stages}
	if f.previous != "" {
		opts.Previous = &modes.Input{Name: inputName(f.previous)}
	}
	if err := mode.Check(opts, f.split); err != nil {
		return err
	}
	outs, err := f.outputs(res.Maps, mode)
	if err != nil {
		return err
	}
	for _, o := range outs {
		if err := o.write(f.split, stdin, stdout, mode, opts); err != nil {
			return err
		}
	}
	if f.lock != "" {
		return writeLock(f.lock, res.Lock)
	}
	return nil
}

// output is one output of a compile: the maps it holds (one per family, or every
// family's for a OneScript mode), where it goes, and the previous rules it is the
// change from.
type output struct {
	maps     []*ir.ServiceMap
	path     string // -o: a file, or the folder of --split; "" or "-": stdout
	previous string // --previous, "" for none
}

// outputs are compile's outputs: one, unless the run has two families and the mode
// writes an output per family (iptables, ipvs); then -o PREFIX names PREFIX.v4 and
// PREFIX.v6 (--split -o DIR: the folders DIR/v4 and DIR/v6), and --previous PREFIX
// is read as PREFIX.v4 and PREFIX.v6 likewise. Stdout holds one family only.
func (f *compileFlags) outputs(maps []*ir.ServiceMap, mode modes.Mode) ([]output, error) {
	if len(maps) == 1 || mode.OneScript() {
		return []output{{maps: maps, path: f.output, previous: f.previous}}, nil
	}
	if f.output == "" || f.output == "-" {
		return nil, usagef("this run has two IP families (%s), and %s mode writes one output per family; name them with -o PREFIX (PREFIX.v4 and PREFIX.v6), or write one family with --ip-family ipv4 or --ip-family ipv6", ir.FamilyNames(maps), mode.Name)
	}
	if f.previous == "-" {
		return nil, usagef("--previous -: this run has two IP families (%s); give the previous rules as --previous PREFIX (PREFIX.v4 and PREFIX.v6)", ir.FamilyNames(maps))
	}
	outs := make([]output, len(maps))
	inputs := append(slices.Clone(f.files), f.config, f.lock)
	for i, sm := range maps {
		sep := "."
		if f.split {
			sep = string(filepath.Separator)
		}
		outs[i] = output{maps: maps[i : i+1], path: f.output + sep + sm.Family.Suffix()}
		if f.previous != "" {
			outs[i].previous = f.previous + "." + sm.Family.Suffix()
			inputs = append(inputs, outs[i].previous)
		}
	}
	for _, o := range outs {
		if f.split {
			continue
		}
		if err := fileutil.CheckOutput("-o", o.path, inputs, manifestExts); err != nil {
			return nil, usagef("%v", err)
		}
	}
	return outs, nil
}

// write writes one output: its parts (--split), the whole rules, or the change from
// its previous rules (read as they are parsed, never held twice).
func (o output) write(split bool, stdin io.Reader, stdout io.Writer, mode modes.Mode, opts modes.Options) error {
	if split {
		return writeParts(o.path, o.maps[0], mode)
	}
	write := func() error {
		return writeOutput(o.path, stdout, func(w io.Writer) error { return mode.WriteAll(w, o.maps, opts) })
	}
	if o.previous == "" {
		return write()
	}
	_, err := parseInput(o.previous, stdin, func(name string, r io.Reader) (struct{}, error) {
		opts.Previous = &modes.Input{Name: name, R: r}
		return struct{}{}, write()
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		err = &pipeline.InputError{Err: err}
	}
	return err
}

// parseIPFamily reads --ip-family: nil when it is not given.
func parseIPFamily(v string) ([]model.IPFamily, error) {
	switch v {
	case "":
		return nil, nil
	case "ipv4":
		return []model.IPFamily{model.IPv4}, nil
	case "ipv6":
		return []model.IPFamily{model.IPv6}, nil
	case "dual":
		return slices.Clone(model.Families), nil
	}
	return nil, usagef("--ip-family: unknown family %q (want ipv4, ipv6 or dual)", v)
}

// writeParts writes a mode's output as files in the folder dir (--split).
func writeParts(dir string, sm *ir.ServiceMap, mode modes.Mode) error {
	if dir == "" || dir == "-" {
		return usagef("--split writes several files: name their folder with -o DIR")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return mode.Split(sm, func(name string, write func(io.Writer) error) error {
		return fileutil.WriteAtomic(filepath.Join(dir, name), write)
	})
}

// manifestExts are the files a folder given to -f is read for.
var manifestExts = []string{".yaml", ".yml", ".json"}

// checkOutputs refuses, before anything is read, an -o or --lock that is not a regular
// file or is an input of the run (-f, -c, --previous; --lock is read and rewritten,
// so -o must not be it either). With --split, -o is a folder of regular files.
func (f *compileFlags) checkOutputs() error {
	inputs := append(slices.Clone(f.files), f.config, f.previous)
	if f.lock != "" {
		if err := fileutil.CheckOutput("--lock", f.lock, inputs, manifestExts); err != nil {
			return usagef("%v", err)
		}
	}
	if f.output == "" || f.output == "-" || f.split {
		return nil
	}
	if err := fileutil.CheckOutput("-o", f.output, append(inputs, f.lock), manifestExts); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// checkOutput is checkOutputs for a command whose only input is its manifests.
func checkOutput(output string, files []string) error {
	if output == "" || output == "-" {
		return nil
	}
	if err := fileutil.CheckOutput("-o", output, files, manifestExts); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// writeOutput writes to stdout, or to a file through a temporary file and a rename.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(stdout)
	}
	return fileutil.WriteAtomic(path, write)
}

// holdLock takes --lock's exclusive lock for the whole read-allocate-write, so that
// runs at once never lose an allocation or hand one address to two Services. Without
// --lock it does nothing.
func (f *inputFlags) holdLock() (unlock func(), err error) {
	if f.lock == "" {
		return func() {}, nil
	}
	return fileutil.Exclusive(f.lock)
}

// writeLock rewrites the lock file when its content changed.
func writeLock(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return fileutil.WriteFileAtomic(path, data)
}

func printProblems(stderr io.Writer, ps []*model.Problem) {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	printWarnings(stderr, errs)
}
