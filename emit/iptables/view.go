package iptables

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/svcgen/svcgen/internal/textutil"
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
	v := &ruleview.View{Labels: map[string]string{}}
	for name, o := range owners {
		v.Labels[name] = o.String()
	}
	for _, t := range rs.Tables {
		ours := func(chain string) bool {
			return IsKubeProxyChain(chain) || (chain == chainFirewall && onlyLocalhostBlock(t.Chain(chain)))
		}
		for _, c := range t.Chains {
			builtin := IsBuiltin(t.Name, c.Name)
			if scope == KubeProxyOnly && !builtin && !ours(c.Name) {
				continue
			}
			s := &ruleview.Section{Table: t.Name, Name: c.Name, Owner: owners[c.Name].Port}
			switch {
			case builtin:
				s.Header, s.Rank = ":"+c.Name+" "+c.Policy, slices.Index(builtinOrder, c.Name)
				if scope == KubeProxyOnly {
					s.Header = ":" + c.Name // the policy is not kube-proxy's
				}
			case s.Owner != "":
				s.Header, s.Rank = ":"+c.Name+" -", len(builtinOrder)+1
			default:
				s.Header, s.Rank = ":"+c.Name+" -", len(builtinOrder)
			}
			for _, r := range c.Rules {
				if scope == KubeProxyOnly && builtin && !ours(ruleTarget(r.Args)) {
					continue
				}
				s.Lines = append(s.Lines, ruleview.Line{Text: r.Text(), Key: r.Chain + " " + RuleKey(r.Args), Owner: owners.RulePort(r)})
			}
			// An empty built-in chain is what a table has without it.
			if builtin && len(s.Lines) == 0 && (scope == KubeProxyOnly || c.Policy == "ACCEPT") {
				continue
			}
			v.Sections = append(v.Sections, s)
		}
	}
	v.Sort()
	return v
}

// WithJumps returns the ruleset with kube-proxy's jumps from built-in chains into the
// chains it has, as a node that runs kube-proxy has them (a --noflush payload has none).
// It is what a node should have, for audit and diff against a live node.
func WithJumps(rs *Ruleset) *Ruleset {
	out := rs.Clone()
	var jumps []Jump
	for _, j := range jumpRules {
		if out.Table(j.table).Chain(j.to) != nil {
			jumps = append(jumps, Jump{Table: j.table, From: j.from, Args: j.args()})
		}
	}
	EnsureJumps(out, jumps)
	return out
}

var failedLine = regexp.MustCompile(`line:? (\d+)`)

// FailedLine finds the line iptables-restore's error names ("Error occurred at line:
// 8", "line 5: RULE_APPEND failed"), 0 if none.
func FailedLine(stderr string) int {
	m := failedLine.FindStringSubmatch(stderr)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Blocks returns, for each "*table ... COMMIT" block of a restore, the line numbers
// (from 1) of its COMMIT line.
func Blocks(payload []byte) []int {
	var commits []int
	n := 0
	forEachLine(payload, func(l []byte) {
		n++
		if bytes.Equal(bytes.TrimSpace(l), []byte("COMMIT")) {
			commits = append(commits, n)
		}
	})
	return commits
}

// Head returns the first n lines of a restore.
func Head(payload []byte, n int) []byte {
	i := 0
	for ; n > 0 && i < len(payload); n-- {
		j := bytes.IndexByte(payload[i:], '\n')
		if j < 0 {
			return payload
		}
		i += j + 1
	}
	return payload[:i]
}

// Line returns line n (from 1) of a restore, "" if it has fewer.
func Line(payload []byte, n int) string {
	rest := Head(payload, n)
	if n <= 0 || len(rest) == 0 {
		return ""
	}
	rest = bytes.TrimSuffix(rest, []byte("\n"))
	if i := bytes.LastIndexByte(rest, '\n'); i >= 0 {
		rest = rest[i+1:]
	}
	return string(rest)
}

// LineOwner is the owner of the chain a restore line is about, or the service port
// its comment names; "" for the node's own lines.
func (o Owners) LineOwner(line string) string {
	chain := lineChain([]byte(line))
	if label := o.Label(chain); label != "" {
		return label
	}
	words, err := splitWords(line)
	if err != nil {
		return ""
	}
	return commentPort(words)
}

// Count tallies a restore: chain lines (a chain that is deleted is flushed by one
// first), rules added, rules and chains deleted, blocks.
type Count struct {
	Chains, Rules, DeletedRules, DeletedChains, Blocks int
}

func (c Count) String() string {
	return fmt.Sprintf("%s written, %s written, %s and %s deleted, in %s",
		textutil.Count(c.Chains-c.DeletedChains, "chain", "chains"), textutil.Count(c.Rules, "rule", "rules"),
		textutil.Count(c.DeletedRules, "rule", "rules"), textutil.Count(c.DeletedChains, "chain", "chains"),
		textutil.Count(c.Blocks, "block", "blocks"))
}

// CountLines tallies a restore's lines, leaving out the commit marks (which change
// nothing).
func CountLines(payload []byte) Count {
	var c Count
	forEachLine(payload, func(l []byte) {
		switch {
		case len(l) == 0, isCommitMark(l):
		case l[0] == ':':
			c.Chains++
		case bytes.HasPrefix(l, []byte("-A ")), bytes.HasPrefix(l, []byte("-I ")):
			c.Rules++
		case bytes.HasPrefix(l, []byte("-D ")):
			c.DeletedRules++
		case bytes.HasPrefix(l, []byte("-X ")):
			c.DeletedChains++
		case string(l) == "COMMIT":
			c.Blocks++
		}
	})
	return c
}

// Commits counts the COMMIT blocks of a restore (iptables-nft commits each as one
// nf_tables transaction), and reports whether every block is sure to change the
// ruleset: it appends, inserts or deletes a rule or deletes a chain, as the commit mark
// does (Options.MarkCommits); a block that only declares chains may find them as it
// wants them and commit nothing.
func Commits(payload []byte) (n int, sure bool) {
	sure = true
	changes := false
	forEachLine(payload, func(l []byte) {
		switch {
		case bytes.HasPrefix(l, []byte("-A ")), bytes.HasPrefix(l, []byte("-I ")),
			bytes.HasPrefix(l, []byte("-D ")), bytes.HasPrefix(l, []byte("-X ")):
			changes = true
		case string(l) == "COMMIT":
			n++
			sure = sure && changes
			changes = false
		}
	})
	return n, sure
}
