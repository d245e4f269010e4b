package plan

import (
	"fmt"
	"strings"

	"github.com/svcgen/svcgen/iptables/syntax"
)

// Cleaned returns the ruleset without what kube-proxy or svcgen made in any mode: its
// chains (IsKubeProxyChain), the rules of built-in chains that jump to them, and
// KUBE-FIREWALL with its jumps when it holds nothing but kube-proxy's localhost rule (a
// KUBE-FIREWALL with other rules is kubelet's, and stays). Everything else stays as it
// is. A chain that is not kube-proxy's and jumps to one of its chains is an error: the
// kernel would refuse to delete the target, and the rule is not svcgen's to remove.
//
// WriteTransition(w, rs, Cleaned(rs)) is the restore that cleans up.
func Cleaned(rs *syntax.Ruleset) (*syntax.Ruleset, error) {
	out := rs.Clone()
	var errs []string
	for _, t := range out.Tables {
		owned := t.KubeProxyOwns
		kept := t.Chains[:0]
		for _, c := range t.Chains {
			if owned(c.Name) && !syntax.IsBuiltin(t.Name, c.Name) {
				continue
			}
			rules := c.Rules[:0]
			for _, r := range c.Rules {
				target := syntax.RuleTarget(r.Args)
				switch {
				case !owned(target):
					rules = append(rules, r)
				case !syntax.IsBuiltin(t.Name, c.Name):
					errs = append(errs, fmt.Sprintf("table %s: chain %s is not kube-proxy's but jumps to %s: %s", t.Name, c.Name, target, r.Text()))
					rules = append(rules, r)
				}
			}
			c.Rules = rules
			kept = append(kept, c)
		}
		t.Chains = kept
		t.Deleted = nil
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("cleanup would leave rules jumping to removed chains; remove them first:\n  %s", strings.Join(errs, "\n  "))
	}
	return syntax.Reindex(out), nil
}
