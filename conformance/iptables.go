package conformance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Ruleset is iptables state as tables of chains of rules, each rule its arguments
// after "-A CHAIN" as iptables would split them. It reads iptables-save output (the
// kernel's), restore payloads (svcgen's, and the text upstream's FakeIPTables keeps)
// and the jump commands ("iptables -t nat -I OUTPUT 1 ..."), so states written three
// ways compare as one.
type Ruleset map[string]map[string]*Chain // table -> chain -> rules

// Chain is one chain: its policy ("-" for a chain of kube-proxy's) and its rules.
type Chain struct {
	Policy string
	Rules  [][]string
}

// builtin are the chains iptables has in every table it knows; an empty one with
// policy ACCEPT is the same as no chain at all.
var builtin = map[string]bool{
	"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true,
}

// ParseRestore reads iptables-save or iptables-restore text into rs: "*table",
// ":CHAIN POLICY [p:b]", "-A CHAIN args", "COMMIT"; comment lines and blank lines are
// skipped. A chain is declared (and, as with --noflush, emptied) by its ":" line.
func (rs Ruleset) ParseRestore(text string) error {
	var table string
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			if rs[table] == nil {
				rs[table] = map[string]*Chain{}
			}
		case line == "COMMIT":
			table = ""
		case table == "":
			return fmt.Errorf("line %d: %q outside a table", n+1, line)
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return fmt.Errorf("line %d: chain line %q has no policy", n+1, line)
			}
			policy := f[1]
			if builtin[f[0]] && policy == "-" {
				policy = "ACCEPT" // upstream's FakeIPTables writes no policy
			}
			rs[table][f[0]] = &Chain{Policy: policy}
		case strings.HasPrefix(line, "-A "):
			args, err := splitArgs(line)
			if err != nil {
				return fmt.Errorf("line %d: %w", n+1, err)
			}
			c := rs.chain(table, args[1])
			c.Rules = append(c.Rules, args[2:])
		default:
			return fmt.Errorf("line %d: unexpected %q", n+1, line)
		}
	}
	return nil
}

func (rs Ruleset) chain(table, name string) *Chain {
	if rs[table] == nil {
		rs[table] = map[string]*Chain{}
	}
	c := rs[table][name]
	if c == nil {
		c = &Chain{Policy: "-"}
		if builtin[name] {
			c.Policy = "ACCEPT"
		}
		rs[table][name] = c
	}
	return c
}

// Ensure applies "iptables [-t TABLE] -I CHAIN [N] args" or "-A CHAIN args" as
// kube-proxy's EnsureRule does: nothing when the rule is there, else insert or
// append it.
func (rs Ruleset) Ensure(command string) error {
	args, err := splitArgs(command)
	if err != nil {
		return err
	}
	if len(args) > 0 && strings.HasSuffix(args[0], "tables") {
		args = args[1:]
	}
	table := "filter"
	if len(args) >= 2 && args[0] == "-t" {
		table, args = args[1], args[2:]
	}
	if len(args) < 2 || (args[0] != "-I" && args[0] != "-A") {
		return fmt.Errorf("%q: want -I CHAIN or -A CHAIN", command)
	}
	op, c := args[0], rs.chain(table, args[1])
	rule := args[2:]
	if op == "-I" && len(rule) > 0 {
		if _, err := strconv.Atoi(rule[0]); err == nil {
			rule = rule[1:]
		}
	}
	for _, r := range c.Rules {
		if slices.Equal(r, rule) {
			return nil
		}
	}
	if op == "-I" {
		c.Rules = append([][]string{rule}, c.Rules...)
	} else {
		c.Rules = append(c.Rules, rule)
	}
	return nil
}

// splitArgs splits a command line as a shell would for the quoting iptables-save and
// kube-proxy use: double quotes with backslash escapes, and single quotes.
func splitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == ' ' || ch == '\t':
			if inArg {
				args, inArg = append(args, cur.String()), false
				cur.Reset()
			}
		case ch == '"' || ch == '\'':
			end := i + 1
			for ; end < len(line) && line[end] != ch; end++ {
				if ch == '"' && line[end] == '\\' && end+1 < len(line) {
					end++
					cur.WriteByte(line[end])
					continue
				}
				cur.WriteByte(line[end])
			}
			if end >= len(line) {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			i, inArg = end, true
		default:
			cur.WriteByte(ch)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// Canonical writes the ruleset in one order: tables and chains by name (chains as
// ":NAME POLICY" lines first), then each chain's rules in order. Empty built-in
// chains with policy ACCEPT are left out. The rules of the chains named in
// mapOrdered ("nat KUBE-SERVICES") are grouped by the Service port their comment
// names (ServiceOrder), because kube-proxy writes them in Go map order.
func (rs Ruleset) Canonical(mapOrdered []string) string {
	var b strings.Builder
	for _, tname := range sortedKeys(rs) {
		t := rs[tname]
		var names []string
		for _, name := range sortedKeys(t) {
			if c := t[name]; !(builtin[name] && c.Policy == "ACCEPT" && len(c.Rules) == 0) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		b.WriteString("*" + tname + "\n")
		for _, name := range names {
			b.WriteString(":" + name + " " + t[name].Policy + "\n")
		}
		for _, name := range names {
			rules := t[name].Rules
			if slices.Contains(mapOrdered, tname+" "+name) {
				rules = ServiceOrder(rules)
			}
			for _, r := range rules {
				b.WriteString("-A " + name + " " + joinArgs(r) + "\n")
			}
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func joinArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}

// ServiceOrder orders the rules of a chain kube-proxy fills service by service in Go
// map order: stably by the Service port their --comment starts with
// ("ns1/svc1:p80 cluster IP" -> "ns1/svc1:p80"), rules naming no Service first
// (sorted: in these chains they are one per entry of some per-Service list too), and
// the rules whose comment says they "must be the last rule" last (sorted: one per
// node IP, which kube-proxy's GetNodeIPs returns in map order). Each Service's rules
// keep their own order.
func ServiceOrder(rules [][]string) [][]string {
	type keyed struct {
		rank int
		key  string
		rule []string
	}
	ks := make([]keyed, len(rules))
	for i, r := range rules {
		c := comment(r)
		k := keyed{rule: r}
		switch first, _, _ := strings.Cut(c, " "); {
		case strings.Contains(c, "must be the last rule"):
			k.rank, k.key = 2, joinArgs(r)
		case strings.Contains(first, "/"):
			k.rank, k.key = 1, first
		default:
			k.key = joinArgs(r)
		}
		ks[i] = k
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return strings.Compare(a.key, b.key)
	})
	out := make([][]string, len(ks))
	for i, k := range ks {
		out[i] = k.rule
	}
	return out
}

// comment is the rule's --comment value, "" if none.
func comment(rule []string) string {
	for i, a := range rule {
		if a == "--comment" && i+1 < len(rule) {
			return rule[i+1]
		}
	}
	return ""
}
