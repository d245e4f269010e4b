package compiler

import (
	"slices"
	"strings"

	"github.com/svcgen/svcgen/model"
)

// families chooses the IP families of a compile; it is the one place a run's families
// are chosen. asked (--ip-family) comes first: a dual-stack run asked for so needs
// the Node to have an address of each family. Then the host's families, as kube-proxy
// finds them: the node's NodeEnvironment ipFamily, else host (what apply and the
// other commands on a node give). kube-proxy runs both proxiers wherever the host
// supports both (cmd/kube-proxy/app platformCheckSupported), whatever the Node's
// addresses, and a family without a node IP takes the loopback address as its node
// IP (detectNodeIPs; nodeInfo does the same). Otherwise, in compile, which has no
// host, the run takes the families the input has: the Node's status.addresses, the
// ServiceCIDRs, and the Services' ipFamilies and ClusterIPs (allocated ones
// included, so --service-cidr counts). An input with neither family is IPv4: the
// output of an IPv4-only cluster is what it was before svcgen knew dual-stack.
func families(c *model.Cluster, node *model.Node, env *model.NodeEnvironment, asked, host []model.IPFamily) ([]model.IPFamily, error) {
	switch {
	case len(asked) > 0:
		return checkNodeFamilies(node, asked)
	case env.IPFamilies != nil:
		return env.IPFamilies, nil
	case host != nil:
		return host, nil
	}
	has := map[model.IPFamily]bool{}
	if node != nil {
		for _, a := range node.Addresses {
			has[model.FamilyOf(a.Address)] = true
		}
	}
	for _, sc := range c.ServiceCIDRs {
		for _, p := range sc.CIDRs {
			has[model.FamilyOf(p.Addr())] = true
		}
	}
	for _, s := range c.Services {
		for _, f := range s.IPFamilies {
			has[f] = true
		}
		for _, a := range s.ClusterIPs {
			has[model.FamilyOf(a)] = true
		}
	}
	var out []model.IPFamily
	for _, f := range model.Families {
		if has[f] {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = []model.IPFamily{model.IPv4}
	}
	return out, nil
}

// checkNodeFamilies refuses a dual-stack run asked for with --ip-family for a Node
// that lacks an address of one family: the flag says the node is dual-stack, and a
// node IP of loopback (what kube-proxy would take) is never what it meant.
func checkNodeFamilies(node *model.Node, fs []model.IPFamily) ([]model.IPFamily, error) {
	if len(fs) < 2 || node == nil {
		return fs, nil
	}
	var missing []string
	for _, f := range fs {
		if !slices.ContainsFunc(node.Addresses, func(a model.NodeAddress) bool { return model.FamilyOf(a.Address) == f }) {
			missing = append(missing, string(f))
		}
	}
	if len(missing) == 0 {
		return fs, nil
	}
	var errs model.Problems
	errs.Add(node.Origin, "status.addresses", "no %s address, and --ip-family asks for both families; give the Node an InternalIP of each family",
		strings.Join(missing, " or "))
	return nil, errs.Err()
}
