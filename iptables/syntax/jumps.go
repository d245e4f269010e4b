// Kube-proxy's jump rules from the built-in chains into its own: fixed names and
// order, read by every layer (the rules write them, plan ensures them, trace and audit
// add them to a --noflush payload as a node has them).
package syntax

// jumpRule is one of the rules kube-proxy (and kubelet) ensure in a built-in chain,
// outside the restore payload.
type jumpRule struct {
	table, from, to string
	ctNew           bool // -m conntrack --ctstate NEW
	comment         string
}

// jumpRules is upstream's iptablesJumpChains followed by iptablesKubeletJumpChains, in
// the order it ensures them. Each is inserted at position 1, so on a fresh node a
// built-in chain lists them in reverse (see orderedJumps).
var jumpRules = []jumpRule{
	{"filter", "INPUT", ChainExternalServices, true, "kubernetes externally-visible service portals"},
	{"filter", "FORWARD", ChainExternalServices, true, "kubernetes externally-visible service portals"},
	{"filter", "INPUT", ChainNodePorts, false, "kubernetes health check service ports"},
	{"filter", "FORWARD", ChainServices, true, "kubernetes service portals"},
	{"filter", "OUTPUT", ChainServices, true, "kubernetes service portals"},
	{"filter", "FORWARD", ChainForward, false, "kubernetes forwarding rules"},
	{"filter", "INPUT", ChainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"filter", "OUTPUT", ChainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"filter", "FORWARD", ChainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"nat", "OUTPUT", ChainServices, false, "kubernetes service portals"},
	{"nat", "PREROUTING", ChainServices, false, "kubernetes service portals"},
	{"nat", "POSTROUTING", ChainPostrouting, false, "kubernetes postrouting rules"},
	{"filter", "INPUT", ChainFirewall, false, ""},
	{"filter", "OUTPUT", ChainFirewall, false, ""},
}

// JumpRules returns the jump rules of one table in the order a node that kube-proxy set
// up lists them: for each built-in chain, the last one ensured comes first.
func JumpRules(table string) []Rule {
	var out []Rule
	for _, from := range BuiltinChains(table) {
		for i := len(jumpRules) - 1; i >= 0; i-- {
			j := jumpRules[i]
			if j.table == table && j.from == from {
				out = append(out, Rule{Chain: from, Args: j.args()})
			}
		}
	}
	return out
}

func (j jumpRule) args() []string {
	var a []string
	if j.ctNew {
		a = append(a, "-m", "conntrack", "--ctstate", "NEW")
	}
	if j.comment != "" {
		a = append(a, "-m", "comment", "--comment", j.comment)
	}
	return append(a, "-j", j.to)
}

// Jumps are kube-proxy's jump rules from built-in chains into its own, in the order it
// ensures them (upstream's iptablesJumpChains, then iptablesKubeletJumpChains).
func Jumps() []Jump {
	out := make([]Jump, len(jumpRules))
	for i, j := range jumpRules {
		out[i] = Jump{Table: j.table, From: j.from, Args: j.args()}
	}
	return out
}

// WithJumps returns the ruleset with kube-proxy's jumps from built-in chains into the
// chains it has, as a node that runs kube-proxy has them (a --noflush payload has none).
// It is what a node should have, for audit and diff against a live node.
func WithJumps(rs *Ruleset) *Ruleset {
	out := rs.Clone()
	var jumps []Jump
	for _, j := range Jumps() {
		if out.Table(j.Table).Chain(j.To()) != nil {
			jumps = append(jumps, j)
		}
	}
	EnsureJumps(out, jumps)
	return out
}
