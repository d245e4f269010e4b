package compiler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// pickTarget decides which kube-proxy release and gate values the rules are for: the
// release asked for (opts.Release), else the minor of the Nodes' kubeletVersion when
// every Node that states one agrees (kube-proxy runs the kubelet's minor release),
// else the newest release svcgen supports. Gates come from the configuration's
// featureGates, then opts.Gates (the command line), over the release's defaults.
func pickTarget(c *model.Cluster, cfg *model.Config, opts Options) (release.Target, error) {
	r := opts.Release
	if r.Minor == 0 {
		var err error
		if r, err = nodesRelease(c.Nodes); err != nil {
			return release.Target{}, err
		}
	}
	// The configuration's gates alone first, so that a gate it gets wrong is reported
	// at its field; then with the command line's over them.
	if _, err := r.Target(cfg.FeatureGates); err != nil {
		var errs model.Problems
		errs.Add(cfg.Origin, "featureGates", "%v", err)
		return release.Target{}, errs.Err()
	}
	gates := map[string]bool{}
	for k, v := range cfg.FeatureGates {
		gates[k] = v
	}
	for k, v := range opts.Gates {
		gates[k] = v
	}
	t, err := r.Target(gates)
	if err != nil {
		return release.Target{}, &GateError{Err: err}
	}
	// Refused rather than compiled without the gate's rules: the output would not
	// be what that kube-proxy programs.
	if err := t.Writes(string(opts.Mode)); err != nil {
		return release.Target{}, &GateError{Err: err}
	}
	return t, nil
}

// GateError is a --feature-gates value the release refuses: a usage error.
type GateError struct{ Err error }

func (e *GateError) Error() string { return "--feature-gates: " + e.Err.Error() }
func (e *GateError) Unwrap() error { return e.Err }

// nodesRelease is the release the Nodes' kubelets run, or the newest when no Node
// says.
func nodesRelease(nodes []*model.Node) (release.Release, error) {
	byRelease := map[string][]string{}
	var found release.Release
	for _, n := range nodes {
		if n.KubeletVersion == "" {
			continue
		}
		r, err := release.Parse(n.KubeletVersion)
		if err != nil {
			return release.Release{}, fmt.Errorf("%s: status.nodeInfo.kubeletVersion: %w; give --kube-proxy-version", n.Origin, err)
		}
		byRelease[r.String()] = append(byRelease[r.String()], n.Name)
		found = r
	}
	switch len(byRelease) {
	case 0:
		return release.Newest(), nil
	case 1:
		return found, nil
	}
	var parts []string
	for r, names := range byRelease {
		parts = append(parts, fmt.Sprintf("%s (%s)", r, strings.Join(names, ", ")))
	}
	sort.Strings(parts)
	return release.Release{}, fmt.Errorf("the Nodes run kubelets of different releases: %s; say which kube-proxy the rules are for with --kube-proxy-version", strings.Join(parts, "; "))
}
