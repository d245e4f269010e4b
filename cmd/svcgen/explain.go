package main

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/graph"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/verify"
)

func newExplain(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &inputFlags{}
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/NAME[:PORT] -f PATH... [flags]",
		Short: "Tell why each Pod is or is not an endpoint of a Service",
		Long: `explain compiles the manifests as compile does and, for one Service (one port of it
with :PORT, a name or a number), lists every Pod of its namespace (those of the input and
those made from workloads) and why it is or is not an endpoint on the node: the selector
label that does not match, no Pod IP, no container port of the target port's name and
protocol, not Ready, terminating, an address of the other family, another node under a
Local traffic policy, topology hints for another zone. Then the port's frontends, and the
chains (ipvs: virtual servers) of the mode that carry its traffic, as svcgen graph finds
them by tracing.`,
		Example: `  svcgen explain boutique/frontend -f docs/examples/boutique/ --nodes 3
  svcgen explain shop/web:http -f cluster/ --node worker-1 -m nftables`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(f, args[0], stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	return cmd
}

func runExplain(f *inputFlags, arg string, stdin io.Reader, stdout, stderr io.Writer) error {
	key, port, _ := strings.Cut(arg, ":")
	if ns, name, ok := strings.Cut(key, "/"); !ok || ns == "" || name == "" {
		return usagef("explain wants NAMESPACE/NAME[:PORT], got %q", arg)
	}
	res, err := f.compileInputs(stdin, stderr, nil)
	if err != nil {
		return err
	}
	svc, ports, err := compiler.Explain(res.Resolved.Cluster, res.Map, key, port)
	if err != nil {
		return &pipeline.InputError{Err: err}
	}
	carriers, err := carriersOf(res, key)
	if err != nil {
		return err
	}
	node := res.Map.Node.Name
	if node == "" {
		node = "(unnamed)"
	}
	fmt.Fprintf(stdout, "Service %s: type %s, selector %s; node %s, %s, %s mode\n", key, orDefault(string(svc.Type), "ClusterIP"), selectorText(svc.Selector), node, res.Map.Family, res.Mode)
	for _, pe := range ports {
		writePort(stdout, pe)
	}
	if len(carriers) > 0 {
		fmt.Fprintf(stdout, "carried by (%s):\n", res.Mode)
		for _, c := range carriers {
			fmt.Fprintf(stdout, "  %s\n", c)
		}
	}
	return nil
}

// writePort writes one port: its frontends and its Pods' verdicts.
func writePort(w io.Writer, pe compiler.PortExplanation) {
	sp := pe.Port
	fmt.Fprintf(w, "port %s %d/%s -> targetPort %s\n", orDefault(sp.Name, "(unnamed)"), sp.Port, sp.Protocol, orDefault(sp.TargetPort.String(), strconv.Itoa(int(sp.Port))))
	if pe.Rules != nil {
		fmt.Fprintf(w, "  frontends: %s\n", strings.Join(frontends(pe.Rules), ", "))
	}
	if len(pe.Verdicts) == 0 {
		fmt.Fprintf(w, "  no Pod in the namespace\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, v := range pe.Verdicts {
		state := "not an endpoint"
		if v.Endpoint != "" {
			state = "endpoint " + v.Endpoint
		}
		line := "  " + v.Pod.Namespace + "/" + v.Pod.Name + "\t" + orDefault(v.Pod.NodeName, "-") + "\t" + state
		if v.Why != "" {
			line += ": " + v.Why
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// frontends are the addresses a port is reached at.
func frontends(p *ir.Port) []string {
	hostPort := func(a netip.Addr, port uint16) string { return netip.AddrPortFrom(a, port).String() }
	var out []string
	if p.ClusterIP.IsValid() {
		out = append(out, "cluster IP "+hostPort(p.ClusterIP, p.Port))
	}
	if p.NodePort != 0 {
		out = append(out, "node port "+strconv.Itoa(int(p.NodePort)))
	}
	for _, a := range p.ExternalIPs {
		out = append(out, "external IP "+hostPort(a, p.Port))
	}
	for _, a := range p.LoadBalancerIPs {
		out = append(out, "load-balancer IP "+hostPort(a, p.Port))
	}
	if p.HealthCheckNodePort != 0 {
		out = append(out, "health check node port "+strconv.Itoa(int(p.HealthCheckNodePort)))
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}

// carriersOf traces the Service through the mode's rules, as graph does, and lists
// the chains its traffic took; none when the Service has no frontend on the node.
func carriersOf(res *pipeline.Result, key string) ([]string, error) {
	if res.Map.Service(key) == nil {
		return nil, nil
	}
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return nil, err
	}
	l := verify.NewLocator(res.Map, res.Resolved.Cluster)
	tr, err := mode.Tracer(res.Map, l.Host())
	if err != nil {
		return nil, &pipeline.InputError{Err: err}
	}
	g, err := graph.Build(key, l, tr, string(res.Mode))
	if err != nil {
		return nil, nil // no frontend to trace
	}
	return g.Carriers(), nil
}

func selectorText(sel map[string]string) string {
	if sel == nil {
		return "(none)"
	}
	return orDefault(model.FormatSelector(sel), "(empty)")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
