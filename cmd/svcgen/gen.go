package main

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/gen"
)

func newGen(stdout io.Writer) *cobra.Command {
	var o gen.Options
	var output, format string
	cmd := &cobra.Command{
		Use:   "gen --services N [--endpoints E] [--nodes K] [--seed S] [--format yaml|json] [-o FILE]",
		Short: "Write a large generated cluster as manifests (for benchmarks and scale tests)",
		Long: `gen writes a realistic cluster as manifests: Services of every type and traffic
policy (ClusterIP, NodePort, LoadBalancer with source ranges and health-check ports,
external IPs, ExternalName, headless, session affinity, internal and external traffic
policy Local, a second UDP port), one EndpointSlice each with ready, not-ready and
terminating endpoints spread over the nodes (or Pods, for Services whose endpoints come
from their selector), the Nodes, a ServiceCIDR, a NodeEnvironment and a
KubeProxyConfiguration for node-0. YAML is one document per object as kubectl prints
them; --format json writes one kind: List as "kubectl get -o json" does. The same
options give the same bytes.`,
		Example: `  svcgen gen --services 10000 --endpoints 10 > big.yaml
  svcgen gen --services 10000 --endpoints 10 --format json -o big.json
  svcgen compile -f big.yaml --noflush > big.rules`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.Services <= 0 {
				return usagef("--services must be at least 1")
			}
			o.Format = gen.Format(format)
			if err := checkOutput(output, nil); err != nil {
				return err
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
	fl.StringVar(&format, "format", "yaml", "yaml (one document per object) or json (a kind: List)")
	fl.StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
