package main

import (
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/graph"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/verify"
)

type graphFlags struct {
	inputFlags
	service string
	output  string
}

func newGraph(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &graphFlags{}
	cmd := &cobra.Command{
		Use:   "graph -f PATH... --service NAMESPACE/NAME [flags]",
		Short: "Draw one Service's path through the rules as Graphviz DOT",
		Long: `graph writes a Graphviz DOT picture of one Service on one node: its frontends (cluster
IP, node ports, external and load-balancer IPs, health-check node port), the chains of
the mode's rules that belong to the Service, and the endpoints or verdicts the traffic
ends at. Edges carry the chance of taking them (1/3) and, where the rules treat sources
differently (externalTrafficPolicy Local, loadBalancerSourceRanges), the sources that
take them. The picture is drawn from traces of the compiled rules, for every frontend
and every kind of source, as svcgen verify probes them.`,
		Example: `  svcgen graph -f examples/ --service default/hello-service2 | dot -Tsvg > hello.svg
  svcgen graph -f cluster/ --node worker-1 --service shop/web -o web.dot`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGraph(f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.service, "service", "", "the Service to draw, as namespace/name")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "write to this file (through a temporary file and a rename) instead of stdout")
	return cmd
}

func runGraph(f *graphFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.service == "" {
		return usagef("graph needs --service NAMESPACE/NAME")
	}
	res, err := f.compileInputs(stdin, stderr, func(in pipeline.Inputs) error {
		return checkOutput(f.output, append(slices.Clone(in.Files), in.Config))
	})
	if err != nil {
		return err
	}
	l := verify.NewLocator(res.Map, res.Resolved.Cluster)
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return err
	}
	tr, err := mode.Tracer(res.Map, l.Host())
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	g, err := graph.Build(f.service, l, tr, string(res.Mode))
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	return writeOutput(f.output, stdout, g.WriteDOT)
}
