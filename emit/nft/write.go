// Package nft writes a service map as kube-proxy's nftables rules (the v1.34/v1.35
// layout), as an "nft -f" script, and reads such scripts back.
//
// # Output
//
// The default script owns its table: it adds the table, deletes it and writes it
// again, all in one nft transaction, so running it twice leaves the same table and
// nothing else is touched. Objects come in the order knftables' Fake.Dump prints them:
// table; chains, sets and maps by name; rules chain by chain (in rule order); then the
// elements of each set and map by name, each in service-map order (services by
// namespace/name, ports, then frontends as kube-proxy visits them). That order never
// refers to an object before it exists, and it is the order of upstream's expected
// dumps, so svcgen's text sorts the way upstream sorts to the same text.
//
// With Stages, the same state is written as five transactions wrapped in a shell
// script (see Stages and Options.Stages for the trade-off).
//
// With Previous, the output is kube-proxy's partial sync against an earlier state (see
// partialOps for its order). Object text is always knftables'.
package nft

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// Options control the output.
type Options struct {
	// Previous is what is loaded now: an earlier svcgen script or "nft list ruleset"
	// output (see Parse). When set, only what changed since is written; when it has no
	// kube-proxy table of the service map's family, the whole table is.
	Previous *Ruleset
	// Stages writes the table as a shell script of five nft transactions (see Stages).
	// A large table loads faster so (see README), but the load is not atomic: from the
	// first transaction, which deletes an older table, to the last, which hooks the new
	// one in, Service traffic is not translated.
	Stages bool
}

// chunk is how many objects go into one knftables transaction while writing, so the
// text streams instead of being built whole.
const chunk = 4096

// Write writes the table for a service map.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	st := Build(sm)
	bw := bufio.NewWriterSize(out, 64<<10)
	var err error
	switch {
	case opts.Previous != nil:
		prev := opts.Previous.Tables[st.Family]
		if prev == nil {
			err = writeScript(bw, st)
		} else {
			err = writeOps(bw, st.Family, partialOps(prev, st))
		}
	case opts.Stages:
		err = writeStages(bw, st)
	default:
		err = writeScript(bw, st)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// Op is one nft operation: a verb (add, flush or delete) and its object.
type Op struct {
	Verb string
	Obj  knftables.Object
}

func adds(objs []knftables.Object) []Op {
	ops := make([]Op, len(objs))
	for i, o := range objs {
		ops[i] = Op{"add", o}
	}
	return ops
}

// replaceTable is "add table" then "delete table": whether or not the table existed,
// it is gone, and the table the following lines build holds only what they add.
func replaceTable(st *State) []Op {
	return []Op{{"add", st.Table}, {"delete", &knftables.Table{}}}
}

func writeScript(w io.Writer, st *State) error {
	return writeOps(w, st.Family, append(replaceTable(st), adds(st.Objects())...))
}

// WriteState writes a state as knftables' Fake.Dump would: "add" lines only.
func WriteState(w io.Writer, st *State) error {
	return writeOps(w, st.Family, adds(st.Objects()))
}

// writeOps writes operations through knftables transactions, a chunk at a time,
// except the commonest, which writeOps writes itself (see plainRule).
func writeOps(w io.Writer, family knftables.Family, ops []Op) error {
	return writeOpsWith(w, family, ops, true)
}

func writeOpsWith(w io.Writer, family knftables.Family, ops []Op, direct bool) error {
	fake := knftables.NewFake(family, tableName)
	tx, queued := fake.NewTransaction(), 0
	flush := func() error {
		if queued == 0 {
			return nil
		}
		text := tx.String()
		tx, queued = fake.NewTransaction(), 0
		if i := lastErrorLine(text); i >= 0 {
			return fmt.Errorf("nftables: %s", text[i+len("# ERROR: "):])
		}
		_, err := io.WriteString(w, text)
		return err
	}
	var line []byte
	for _, o := range ops {
		if r := plainRule(o); direct && r != nil {
			if err := flush(); err != nil {
				return err
			}
			line = appendRule(line[:0], family, r)
			if _, err := w.Write(line); err != nil {
				return err
			}
			continue
		}
		switch o.Verb {
		case "add":
			tx.Add(o.Obj)
		case "flush":
			tx.Flush(o.Obj)
		case "delete":
			tx.Delete(o.Obj)
		}
		if queued++; queued == chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// plainRule returns the rule of an "add rule" that knftables would accept and write
// as "add rule FAMILY TABLE CHAIN RULE [comment "..."]": no index or handle, the
// table's own family and name, a chain and a rule. Rules are most of a table (nine in
// ten at 10,000 Services), and knftables prints every object with fmt; appendRule
// writes the same bytes without it (TestPlainRulesAsKnftables holds it to that).
func plainRule(o Op) *knftables.Rule {
	r, ok := o.Obj.(*knftables.Rule)
	if !ok || o.Verb != "add" || r.Index != nil || r.Handle != nil || r.Chain == "" || r.Rule == "" ||
		r.Family != "" || r.Table != "" {
		return nil
	}
	return r
}

func appendRule(b []byte, family knftables.Family, r *knftables.Rule) []byte {
	b = append(b, "add rule "...)
	b = append(b, family...)
	b = append(b, ' ')
	b = append(b, tableName...)
	b = append(b, ' ')
	b = append(b, r.Chain...)
	b = append(b, ' ')
	b = append(b, r.Rule...)
	if r.Comment != nil {
		b = append(b, " comment "...)
		b = strconv.AppendQuote(b, *r.Comment)
	}
	return append(b, '\n')
}

// lastErrorLine finds the error knftables appends to a transaction it refused.
func lastErrorLine(text string) int {
	const marker = "# ERROR: "
	for i := len(text) - len(marker); i >= 0; i-- {
		if text[i:i+len(marker)] == marker && (i == 0 || text[i-1] == '\n') {
			return i
		}
	}
	return -1
}

// stageHeader starts the staged shell script.
const stageHeader = `#!/bin/sh
# kube-proxy's nftables table, loaded in stages (svcgen compile --stages): regular chains,
# sets and maps; their rules (those with anonymous sets apart); the set and map
# elements; then the base chains that hook the table into netfilter. Not atomic: see
# svcgen's README.
set -e
`

// Stages splits the state into the transactions of a staged load, in load order:
//
//  1. the table (replacing an older one) with its regular chains, sets and maps;
//  2. the rules of the regular chains, up to the first one with an anonymous set or
//     map in each chain;
//  3. those rules and the ones after them (numgen vmaps, source-range sets);
//  4. every set and map element;
//  5. the base chains with their rules, which hook the table into netfilter.
//
// Each stage refers only to objects of earlier stages, rules keep their order in
// their chain, and no packet meets the table before the last stage. Rules with
// anonymous sets are apart because nft 1.0.6 loads a transaction that mixes many of
// them with many other rules several times slower than the two apart (see README).
func Stages(st *State) [][]Op {
	var defs, rules, anon, elems, hooks []Op
	defs = replaceTable(st)
	late := map[string]bool{} // chains whose remaining rules go to the anonymous-set stage
	for _, o := range st.Objects() {
		switch o := o.(type) {
		case *knftables.Chain:
			if o.Hook != nil {
				hooks = append(hooks, Op{"add", o})
			} else {
				defs = append(defs, Op{"add", o})
			}
		case *knftables.Rule:
			switch {
			case st.Chains[o.Chain].Obj.Hook != nil:
				hooks = append(hooks, Op{"add", o})
			case late[o.Chain] || hasAnonymousSet(o.Rule):
				late[o.Chain] = true
				anon = append(anon, Op{"add", o})
			default:
				rules = append(rules, Op{"add", o})
			}
		case *knftables.Element:
			elems = append(elems, Op{"add", o})
		default:
			defs = append(defs, Op{"add", o})
		}
	}
	return [][]Op{defs, rules, anon, elems, hooks}
}

// hasAnonymousSet reports a rule with an anonymous set or map ("vmap { 0 : goto ... }",
// "ip saddr != { ... }"); "update @set { ip saddr }" names a set and makes none.
func hasAnonymousSet(rule string) bool {
	return strings.Contains(rule, "{ ") && !strings.HasPrefix(rule, "update ")
}

func writeStages(w io.Writer, st *State) error {
	if _, err := io.WriteString(w, stageHeader); err != nil {
		return err
	}
	for i, ops := range Stages(st) {
		if _, err := fmt.Fprintf(w, "nft -f - <<'SVCGEN_STAGE_%d'\n", i+1); err != nil {
			return err
		}
		if err := writeOps(w, st.Family, ops); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "SVCGEN_STAGE_%d\n", i+1); err != nil {
			return err
		}
	}
	return nil
}
