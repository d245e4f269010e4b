// Package upstreamtest compares svcgen's output with kube-proxy's own test expectations
// the way kube-proxy's tests compare them.
package upstreamtest

import (
	"fmt"
	"sort"
	"strings"
)

// dumpChain is a chain of an iptables dump with its rule lines verbatim.
type dumpChain struct {
	name    string
	decl    string // the chain line as written
	rules   []string
	deleted bool
}

type dumpTable struct {
	name   string
	chains []*dumpChain
	index  map[string]*dumpChain
}

// SortIPTablesRules normalises iptables-restore text as kube-proxy's tests do before
// comparing (sortIPTablesRules in pkg/proxy/iptables/proxier_test.go): tables by name;
// chains KUBE-NODEPORTS, KUBE-SERVICES, then other KUBE-* chains by name, then the rest
// by name; per table all chain lines, then the rules chain by chain (keeping their order
// inside a chain), then the -X lines; the rules of KUBE-NODEPORTS and KUBE-SERVICES
// stable-sorted by the service name in their comment, the nat "must be the last rule"
// jump kept last. Rule lines are kept as written.
func SortIPTablesRules(data string) (string, error) {
	tables, err := parseDump(data)
	if err != nil {
		return "", err
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].name < tables[j].name })
	var b strings.Builder
	for _, t := range tables {
		sort.SliceStable(t.chains, func(i, j int) bool { return chainLess(t.chains[i].name, t.chains[j].name) })
		for _, name := range []string{"KUBE-NODEPORTS", "KUBE-SERVICES"} {
			if c := t.index[name]; c != nil {
				sortByService(c.rules, t.name == "nat" && name == "KUBE-SERVICES")
			}
		}
		b.WriteString("*" + t.name + "\n")
		for _, c := range t.chains {
			b.WriteString(c.decl + "\n")
		}
		for _, c := range t.chains {
			for _, r := range c.rules {
				b.WriteString(r + "\n")
			}
		}
		for _, c := range t.chains {
			if c.deleted {
				b.WriteString("-X " + c.name + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String(), nil
}

func chainLess(a, b string) bool {
	rank := func(n string) int {
		switch {
		case n == "KUBE-NODEPORTS":
			return 0
		case n == "KUBE-SERVICES":
			return 1
		case strings.HasPrefix(n, "KUBE-"):
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

func sortByService(rules []string, lastRule bool) {
	sort.SliceStable(rules, func(i, j int) bool {
		ci, cj := commentOf(rules[i]), commentOf(rules[j])
		if lastRule {
			if strings.Contains(ci, "must be the last rule") {
				return false
			}
			if strings.Contains(cj, "must be the last rule") {
				return true
			}
		}
		if ci == "" || cj == "" {
			return false
		}
		return serviceName(ci) < serviceName(cj)
	})
}

// serviceName is a comment up to its first space or colon.
func serviceName(comment string) string {
	if i := strings.IndexAny(comment, " :"); i >= 0 {
		return comment[:i]
	}
	return comment
}

// commentOf returns the --comment value of a rule line ("" if none).
func commentOf(rule string) string {
	const flag = "--comment "
	i := strings.Index(rule, flag)
	if i < 0 {
		return ""
	}
	rest := rule[i+len(flag):]
	if strings.HasPrefix(rest, `"`) {
		if j := strings.Index(rest[1:], `"`); j >= 0 {
			return rest[1 : j+1]
		}
		return rest[1:]
	}
	if j := strings.IndexByte(rest, ' '); j >= 0 {
		return rest[:j]
	}
	return rest
}

func parseDump(data string) ([]*dumpTable, error) {
	var tables []*dumpTable
	var t *dumpTable
	for n, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			t = &dumpTable{name: line[1:], index: map[string]*dumpChain{}}
			tables = append(tables, t)
		case t == nil:
			return nil, fmt.Errorf("line %d: %q outside a table", n+1, line)
		case line == "COMMIT":
			t = nil
		case strings.HasPrefix(line, ":"):
			name := strings.Fields(line[1:])[0]
			if t.index[name] != nil {
				return nil, fmt.Errorf("line %d: chain %s declared twice", n+1, name)
			}
			c := &dumpChain{name: name, decl: line}
			t.chains = append(t.chains, c)
			t.index[name] = c
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			c := t.index[f[1]]
			if c == nil {
				return nil, fmt.Errorf("line %d: rule for undeclared chain %s", n+1, f[1])
			}
			c.rules = append(c.rules, line)
		case strings.HasPrefix(line, "-X "):
			name := strings.TrimSpace(line[3:])
			c := t.index[name]
			if c == nil {
				return nil, fmt.Errorf("line %d: -X of undeclared chain %s", n+1, name)
			}
			c.deleted = true
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n+1, line)
		}
	}
	return tables, nil
}

// ChainRules returns the rule lines of one chain, verbatim and in order (upstream's
// assertIPTablesChainEqual compares these); none when the chain is missing.
func ChainRules(data, table, chain string) ([]string, error) {
	tables, err := parseDump(data)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if t.name == table {
			if c := t.index[chain]; c != nil {
				return c.rules, nil
			}
			return nil, nil // upstream reads a missing chain as an empty one
		}
	}
	return nil, fmt.Errorf("no table %s", table)
}
