package iptables

import (
	"fmt"
	"strings"
)

// Cleaned returns the ruleset without what kube-proxy or svcgen made in any mode: its
// chains (IsKubeProxyChain), the rules of built-in chains that jump to them, and
// KUBE-FIREWALL with its jumps when it holds nothing but kube-proxy's localhost rule (a
// KUBE-FIREWALL with other rules is kubelet's, and stays). Everything else stays as it
// is. A chain that is not kube-proxy's and jumps to one of its chains is an error: the
// kernel would refuse to delete the target, and the rule is not svcgen's to remove.
//
// WriteTransition(w, rs, Cleaned(rs)) is the restore that cleans up.
func Cleaned(rs *Ruleset) (*Ruleset, error) {
	out := rs.Clone()
	var errs []string
	for _, t := range out.Tables {
		owned := func(name string) bool {
			return IsKubeProxyChain(name) || (name == chainFirewall && onlyLocalhostBlock(t.Chain(name)))
		}
		kept := t.Chains[:0]
		for _, c := range t.Chains {
			if owned(c.Name) && !IsBuiltin(t.Name, c.Name) {
				continue
			}
			rules := c.Rules[:0]
			for _, r := range c.Rules {
				target := ruleTarget(r.Args)
				switch {
				case !owned(target):
					rules = append(rules, r)
				case !IsBuiltin(t.Name, c.Name):
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
	return Reindex(out), nil
}

// onlyLocalhostBlock reports a KUBE-FIREWALL chain that holds at most kube-proxy's rule
// blocking outside traffic to 127.0.0.0/8.
func onlyLocalhostBlock(c *Chain) bool {
	if c == nil {
		return false
	}
	var want lineBuf
	localhostBlock(&want)
	words, _ := splitWords(string(want.buf))
	key := RuleKey(words)
	for _, r := range c.Rules {
		if RuleKey(r.Args) != key {
			return false
		}
	}
	return true
}
