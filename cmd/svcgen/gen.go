package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/gen"
)

func newGen(stdout io.Writer) *cobra.Command {
	var o gen.Options
	var output string
	cmd := &cobra.Command{
		Use:   "gen --services N [--endpoints E] [--nodes K] [--seed S] [-o FILE]",
		Short: "Write a large generated cluster as manifests (for benchmarks and scale tests)",
		Long: `gen writes a realistic cluster as manifests: Services of every type and traffic
policy (ClusterIP, NodePort, LoadBalancer with source ranges and health-check ports,
external IPs, session affinity, internalTrafficPolicy Local), one EndpointSlice each with
ready, not-ready and terminating endpoints spread over the nodes, the Nodes, a
ServiceCIDR, a NodeEnvironment and a KubeProxyConfiguration for node-0. The same options
give the same bytes.`,
		Example: `  svcgen gen --services 10000 --endpoints 10 > big.yaml
  svcgen compile -f big.yaml --noflush > big.rules`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.Services <= 0 {
				return usagef("--services must be at least 1")
			}
			if err := writeOutput(output, stdout, func(w io.Writer) error { return gen.Write(w, o) }); err != nil {
				return usagef("%v", err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Services, "services", 0, "number of Services")
	fl.IntVar(&o.Endpoints, "endpoints", 10, "endpoints per Service")
	fl.IntVar(&o.Nodes, "nodes", 3, "number of Nodes")
	fl.IntVar(&o.Namespaces, "namespaces", 0, "number of namespaces (default: one per 100 Services)")
	fl.Uint64Var(&o.Seed, "seed", 1, "random seed")
	fl.StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
