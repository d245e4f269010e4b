package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/ruleview"
)

// onHost is the run's families that this host can program in the mode, as kube-proxy
// decides before it makes its proxiers (apply.HostFamilies): each kept family's map
// and backend; a family with Services left out is a warning on stderr, and a host
// kube-proxy would not start on is an error. apply, audit --live and diff --live
// call it (their runs have both families unless --ip-family or a NodeEnvironment
// says otherwise: see inputFlags.onNode); compile and the commands that read files
// do not look at the host.
func onHost(ctx context.Context, res *pipeline.Result, m modes.Mode, wait time.Duration, stderr io.Writer) ([]*ir.ServiceMap, []apply.Backend, error) {
	families := make([]model.IPFamily, len(res.Maps))
	backends := make([]apply.Backend, len(res.Maps))
	for i, sm := range res.Maps {
		families[i], backends[i] = sm.Family, m.Backend(sm.Family, wait)
	}
	keep, left, err := apply.HostFamilies(ctx, families, backends, primaryFamily(res), apply.KernelIPv6)
	if err != nil {
		return nil, nil, err
	}
	var maps []*ir.ServiceMap
	var kept []apply.Backend
	for i, k := range keep {
		switch {
		case k:
			maps, kept = append(maps, res.Maps[i]), append(kept, backends[i])
		case len(res.Maps[i].Services) > 0:
			// Only a family with Services is worth a warning: every run on a node
			// asks for both families, and an IPv4 cluster on a host without IPv6 is
			// as it should be.
			printWarnings(stderr, []error{errors.New(left[i])})
		}
	}
	return maps, kept, nil
}

// primaryFamily is kube-proxy's primary family of the run's node: its first
// InternalIP's (detectNodeIPs takes the Node's addresses in that order), else the
// config's bindAddress's, else the run's first family.
func primaryFamily(res *pipeline.Result) model.IPFamily {
	var first []model.IPFamily
	for _, n := range res.Cluster.Nodes {
		if n.Name != res.Map.Node.Name {
			continue
		}
		for _, a := range n.Addresses {
			if a.Type == "InternalIP" {
				first = append(first, model.FamilyOf(a.Address))
			}
		}
		for _, a := range n.Addresses {
			first = append(first, model.FamilyOf(a.Address))
		}
	}
	for _, c := range res.Cluster.Configs {
		if c.BindAddress.IsValid() && !c.BindAddress.IsUnspecified() {
			first = append(first, model.FamilyOf(c.BindAddress))
		}
	}
	for _, f := range first {
		if res.MapOf(f) != nil {
			return f
		}
	}
	return res.Maps[0].Family
}

// cleanable leaves out the cleaners whose family this host cannot program (no
// ip6tables, say): nothing of theirs can be there to remove, and reading would fail.
// A family the kernel has disabled IPv6 for is still cleaned: its rules may remain.
// When no cleaner can run (not root, say), every one is kept, so that cleanup fails
// with what the tools say instead of passing over everything.
func cleanable(ctx context.Context, cs []apply.Cleaner, stderr io.Writer) []apply.Cleaner {
	why := make([]error, len(cs))
	canRun := false
	for i, c := range cs {
		why[i] = apply.Unsupported(ctx, c)
		canRun = canRun || why[i] == nil
	}
	if !canRun {
		return cs
	}
	var out []apply.Cleaner
	for i, c := range cs {
		if why[i] != nil {
			fmt.Fprintf(stderr, "%s: passed over: %v\n", c.Name(), why[i])
			continue
		}
		out = append(out, c)
	}
	return out
}

// passedOver says that a comparison with the node (audit --live, diff --live -f)
// leaves out the family of sm: the input has no Service of it and the node no
// kube-proxy rule of it. Such a family is in the run only because the host supports
// it (kube-proxy, and apply, program its fixed rules); a node whose rules were
// loaded from compile's output of the other family is in step. note (on stderr)
// says so.
func passedOver(sm *ir.ServiceMap, kernel *ruleview.View, cmd string, stderr io.Writer) bool {
	if sm == nil || len(sm.Services) > 0 {
		return false
	}
	for _, sec := range kernel.Sections {
		if len(sec.Lines) > 0 {
			return false
		}
	}
	fmt.Fprintf(stderr, "%s: %s passed over: the input has no %s Service and the node no kube-proxy rule of %s (apply would add kube-proxy's fixed %s rules)\n",
		cmd, sm.Family, sm.Family, sm.Family, sm.Family)
	return true
}
