package oracle

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/util/nfacct"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

const usage = `usage:
  %[1]s run -cluster FILE -config FILE -node NAME -family IPv4|IPv6|DualStack [-out DIR] [-step FILE|resync]...
      run the release's proxier once on the cluster (as root, inside the network
      namespace it may program: ip netns exec NS %[1]s run ...), as kube-proxy does
      on a host that supports the family (DualStack: both, so the dual-stack
      proxier); ipvs mode writes its fakes' state to DIR (DIR/v4 and DIR/v6 for
      DualStack); with -step (iptables and nftables), keep it running and feed it
      each step's changes (the events that turn the cluster into FILE's), one sync a
      step, or "resync", the sync loop's run with nothing changed, and print each
      sync's kind and seconds (see steps.go)
  %[1]s probe
      print, as JSON, what kube-proxy finds on this node: --random-fully support and
      nfacct (the namespace's nfacct counters are changed)
  %[1]s gates
      print, as JSON, every feature gate the release knows with its default and
      whether it is locked to it
  %[1]s version
      print the k8s.io/kubernetes version the oracle runs
`

// Main is the oracle program of one release: it runs a subcommand and exits.
func Main(r Release) {
	os.Exit(run(r, os.Args, os.Stdout, os.Stderr))
}

func run(r Release, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintf(stderr, usage, args[0])
		return 2
	}
	var err error
	switch args[1] {
	case "run":
		err = runCommand(r, args[2:], stdout, stderr)
	case "probe":
		err = probe(r, stdout)
	case "gates":
		err = gates(stdout)
	case "version":
		fmt.Fprintln(stdout, r.Version())
	default:
		fmt.Fprintf(stderr, usage, args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "oracle %s: %v\n", r.Version(), err)
		return 1
	}
	return 0
}

func runCommand(r Release, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var in Input
	var family string
	fs.StringVar(&in.Cluster, "cluster", "", "Services, EndpointSlices, Nodes and ServiceCIDRs (YAML)")
	fs.StringVar(&in.Config, "config", "", "the KubeProxyConfiguration")
	fs.StringVar(&in.Node, "node", "", "the node's name when the configuration has no hostnameOverride")
	fs.StringVar(&family, "family", "IPv4", "the IP families the host supports: IPv4 or IPv6 (the single-stack proxier), or DualStack")
	fs.StringVar(&in.OutDir, "out", "", "ipvs mode: the folder for the fakes' state")
	var steps []string
	fs.Func("step", "after the first sync: a cluster file to change to, or resync (repeatable)", func(s string) error {
		steps = append(steps, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	in.Family, in.DualStack = v1.IPFamily(family), family == "DualStack"
	if in.Cluster == "" || in.Config == "" || (in.Family != v1.IPv4Protocol && in.Family != v1.IPv6Protocol && !in.DualStack) {
		return fmt.Errorf("run needs -cluster, -config and -family IPv4, IPv6 or DualStack")
	}
	if len(steps) > 0 {
		if in.DualStack {
			return fmt.Errorf("-step runs a single-stack proxier: -family IPv4 or IPv6")
		}
		return RunSteps(context.Background(), r, in, steps, stdout)
	}
	return Run(context.Background(), r, in)
}

// Probe is what kube-proxy finds out about a node by itself.
type Probe struct {
	// RandomFully: the iptables proxier adds --random-fully to its MASQUERADE rule.
	RandomFully bool `json:"randomFully"`
	// NFAcct: the iptables proxier could make its nfacct counters, so its rules
	// count with them.
	NFAcct bool `json:"nfacct"`
}

// probe asks what the iptables proxier asks: the release's --random-fully check of
// iptables, and whether nfacct can make the counter of dropped invalid packets (the
// proxier's Ensure, at its first full sync).
func probe(r Release, stdout io.Writer) error {
	var p Probe
	p.RandomFully = r.RandomFully(utiliptables.New(utiliptables.ProtocolIPv4))
	if runner, err := nfacct.New(); err == nil {
		p.NFAcct = runner.Ensure(metrics.IPTablesCTStateInvalidDroppedNFAcctCounter) == nil
	}
	return json.NewEncoder(stdout).Encode(p)
}

// Gate is a feature gate as the release's kube-proxy knows it before any
// configuration sets it.
type Gate struct {
	Default bool `json:"default"`
	Locked  bool `json:"locked"`
}

// gates prints the release's feature gates (k8s.io/kubernetes/pkg/features and the
// generic ones, as registered on utilfeature.DefaultMutableFeatureGate), so the
// harness can check svcgen's release table against them.
func gates(stdout io.Writer) error {
	out := map[string]Gate{}
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		out[string(name)] = Gate{Default: spec.Default, Locked: spec.LockToDefault}
	}
	return json.NewEncoder(stdout).Encode(out)
}
