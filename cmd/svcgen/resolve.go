package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/kubeyaml"
	"github.com/svcgen/svcgen/internal/pipeline"
)

type resolveFlags struct {
	inputFlags
	output string
}

func newResolve(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &resolveFlags{}
	cmd := &cobra.Command{
		Use:   "resolve -f PATH... [flags]",
		Short: "Print the cluster after svcgen's control plane, as Kubernetes manifests",
		Long: `resolve reads manifests, does what the API server and the controllers would do
(ClusterIPs and NodePorts allocated, EndpointSlices made from Pods and mirrored from
v1 Endpoints) and prints the result as a multi-document YAML stream kubectl could
apply: ServiceCIDRs, Nodes, Services and EndpointSlices, in a fixed order. It is the
cluster compile turns into rules; the conformance oracle feeds it to kube-proxy.
KubeProxyConfigurations, NodeEnvironments, Pods and v1 Endpoints are not printed.`,
		Example: `  svcgen resolve -f examples/
  svcgen resolve -f manifests/ --lock svcgen.lock -o cluster.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runResolve(f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "manifests: a file, a folder (read recursively) or - for stdin; repeatable")
	fl.StringVarP(&f.config, "config", "c", "", "a KubeProxyConfiguration file (read, not printed)")
	fl.StringVar(&f.lock, "lock", "", "take allocated ClusterIPs and NodePorts from this file (read only)")
	fl.StringArrayVar(&f.serviceCIDR, "service-cidr", nil, "allocate ClusterIPs from this CIDR when the input has no ServiceCIDR (default 10.96.0.0/12); repeatable, one per family")
	fl.StringVar(&f.nodePortRange, "node-port-range", "30000-32767", "allocate NodePorts from this range")
	fl.StringVar(&f.dialect, "dialect", "", "accept a manifest dialect: minik8s (course-project YAML)")
	fl.StringVarP(&f.output, "output", "o", "", "write to this file (through a temporary file and a rename) instead of stdout")
	return cmd
}

// runResolve loads and resolves as compile does, with the same allocation settings,
// and writes the resolved cluster.
func runResolve(f *resolveFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	in, s, err := f.settings(stdin)
	if err != nil {
		return err
	}
	l, err := pipeline.Load(in)
	if err != nil {
		return err
	}
	cluster, warnings := &l.Cluster, l.Warnings.List()
	opts := compiler.ResolveOptions{ServiceCIDRs: s.ServiceCIDRs, NodePortRange: s.NodePortRange, MiniK8s: f.dialect == "minik8s"}
	if f.lock != "" {
		data, err := os.ReadFile(f.lock)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		if err == nil {
			if opts.Lock, err = compiler.ParseLock(f.lock, data); err != nil {
				return &pipeline.InputError{Err: err}
			}
		}
	}
	resolved, err := compiler.Resolve(cluster, opts)
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	printProblems(stderr, append(warnings, resolved.Warnings...))
	return writeOutput(f.output, stdout, func(w io.Writer) error { return kubeyaml.Write(w, resolved.Cluster) })
}
