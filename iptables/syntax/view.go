package syntax

import (
	"slices"

	"github.com/svcgen/svcgen/ruleview"
)

// Scope says which part of a ruleset a view shows.
type Scope int

const (
	// Everything shows every table and chain, for comparing two rule files.
	Everything Scope = iota
	// KubeProxyOnly shows what kube-proxy owns: its chains (IsKubeProxyChain, and
	// KUBE-FIREWALL when it holds only kube-proxy's rule) and the rules of built-in
	// chains that jump to them. A live node has other software's rules as well.
	KubeProxyOnly
)

// builtinOrder is the order of the built-in chains in a view: the packet's way.
var builtinOrder = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// View is the ruleset as diff and audit compare it: one section per chain, rules keyed
// by meaning (RuleKey), hashed chains and rules assigned to their service ports.
func (rs *Ruleset) View(owners Owners, scope Scope) *ruleview.View {
	v := &ruleview.View{Label: owners.Label, Key: lineKey}
	// One allocation for every section and one for every line: a 10,000-Service
	// ruleset has 100,000 chains of a few rules each.
	chains, rules := 0, 0
	for _, t := range rs.Tables {
		chains += len(t.Chains)
		for _, c := range t.Chains {
			rules += len(c.Rules)
		}
	}
	sections := make([]ruleview.Section, 0, chains)
	lines := make([]ruleview.Line, 0, rules)
	v.Sections = make([]*ruleview.Section, 0, chains)
	for _, t := range rs.Tables {
		ours := t.KubeProxyOwns
		for _, c := range t.Chains {
			builtin := IsBuiltin(t.Name, c.Name)
			if scope == KubeProxyOnly && !builtin && !ours(c.Name) {
				continue
			}
			if c.Name == ChainCanary && len(c.Rules) == 0 {
				continue // kube-proxy's flush monitor: no rule, nothing jumps to it
			}
			sections = append(sections, section(t.Name, c, owners[c.Name].Port, scope))
			s := &sections[len(sections)-1]
			first := len(lines)
			for _, r := range c.Rules {
				if scope == KubeProxyOnly && builtin && !ours(RuleTarget(r.Args)) {
					continue
				}
				lines = append(lines, viewLine(r, s.Owner))
			}
			s.Lines = lines[first:len(lines):len(lines)]
			// An empty built-in chain is what a table has without it.
			if builtin && len(s.Lines) == 0 && (scope == KubeProxyOnly || c.Policy == "ACCEPT") {
				sections = sections[:len(sections)-1]
				continue
			}
			v.Sections = append(v.Sections, s)
		}
	}
	v.Sort()
	return v
}

// section is a chain's section without its lines: its header and rank.
func section(table string, c *Chain, owner string, scope Scope) ruleview.Section {
	s := ruleview.Section{Table: table, Name: c.Name, Owner: owner}
	switch {
	case IsBuiltin(table, c.Name):
		s.Header, s.Rank = ":"+c.Name+" "+c.Policy, slices.Index(builtinOrder, c.Name)
		if scope == KubeProxyOnly {
			s.Header = ":" + c.Name // the policy is not kube-proxy's
		}
	case s.Owner != "":
		s.Header, s.Rank = ":"+c.Name+" -", len(builtinOrder)+1
	default:
		s.Header, s.Rank = ":"+c.Name+" -", len(builtinOrder)
	}
	return s
}

// viewLine is a rule as a view's line, in a chain of that owner. A rule spelled as
// read is its line, keyed on demand (lineKey); another is written and keyed now.
func viewLine(r Rule, owner string) ruleview.Line {
	l := ruleview.Line{Text: r.Raw}
	if r.Raw == "" || !r.spelledAsRaw() {
		l = ruleview.Line{Text: r.Text(), Key: ruleKeyIn(r.Chain, r.Args)}
	}
	l.Owner = owner
	if l.Owner == "" {
		l.Owner = commentPort(r.Args)
	}
	return l
}

// ruleKeyIn is a rule's key in a view: its chain and RuleKey.
func ruleKeyIn(chain string, args []string) string { return chain + " " + RuleKey(args) }

// lineKey is the key of a view's line whose text is the rule's line as read: the
// words are those the parser read from it, so the key is the one it had.
func lineKey(line string) string {
	r, err := ParseRuleLine(line)
	if err != nil {
		return line // not a rule line: View keys every rule it cannot spell as read
	}
	return ruleKeyIn(r.Chain, r.Args)
}

// LineOwner is the owner of the chain a restore line is about, or the service port
// its comment names; "" for the node's own lines.
func (o Owners) LineOwner(line string) string {
	chain := LineChain([]byte(line))
	if label := o.Label(chain); label != "" {
		return label
	}
	words, err := splitWords(line)
	if err != nil {
		return ""
	}
	return commentPort(words)
}

// KubeProxyOwns reports a chain of the table that kube-proxy (or svcgen) made in some
// mode (IsKubeProxyChain), or KUBE-FIREWALL when it holds kube-proxy's localhost rule
// and nothing else (with other rules it is kubelet's; empty, as a complete ruleset
// declares it for kubelet's jumps, it is nobody's and changes no packet).
func (t *Table) KubeProxyOwns(chain string) bool {
	return IsKubeProxyChain(chain) || (chain == ChainFirewall && onlyLocalhostBlock(t.Chain(chain)))
}

// onlyLocalhostBlock reports a KUBE-FIREWALL chain that holds at most kube-proxy's rule
// blocking outside traffic to 127.0.0.0/8.
func onlyLocalhostBlock(c *Chain) bool {
	if c == nil || len(c.Rules) == 0 {
		return false // an empty KUBE-FIREWALL is kubelet's jump target, nobody's rules
	}
	key := RuleKey(LocalhostBlock)
	for _, r := range c.Rules {
		if RuleKey(r.Args) != key {
			return false
		}
	}
	return true
}
