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
// script (see Options.Stages for the trade-off, writeStages for the split).
//
// With Previous, the output is kube-proxy's partial sync against an earlier state (see
// partialOps for its order); with Minimal as well, only the chains, sets and elements
// that differ. Object text is always knftables'.
package nft

import (
	"bytes"
	"io"

	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// Options control the output.
type Options struct {
	// Previous is what is loaded now: an earlier svcgen script or "nft list ruleset"
	// output (see Parse). When set, only what changed since is written; when it has no
	// kube-proxy table of the service map's family, the whole table is.
	Previous *Ruleset
	// Minimal (with Previous) writes only what differs: chains whose rules did not
	// change and affinity sets that are the same are left out even when their Service
	// changed (kube-proxy's partial sync rewrites every chain of a changed Service), a
	// new chain is only added and a changed one only flushed (see partialOps).
	Minimal bool
	// Stages writes the table as a shell script of five nft transactions (see writeStages).
	// A large table loads faster so (see README), but the load is not atomic: from the
	// first transaction, which deletes an older table, to the last, which hooks the new
	// one in, Service traffic is not translated.
	Stages bool
}

// Write writes the table for a service map. It is streamed: each rule and element is
// made when its line is written, or compared with the previous table's (see table and
// partialOps), and none is kept after.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	t := newTable(sm)
	lw := newLineWriter(out, t.fixed.Family)
	switch {
	case opts.Previous != nil:
		writePartial(lw, opts.Previous.Tables[t.fixed.Family], t, opts.Minimal)
	case opts.Stages:
		t.writeStages(lw)
	default:
		writeScript(lw, t)
	}
	return lw.flush()
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
func replaceTable(t *knftables.Table) []Op {
	return []Op{{"add", t}, {"delete", &knftables.Table{}}}
}

// writePartial writes kube-proxy's partial sync from prev (nil: no table there) to
// the table (only what differs, with minimal), or the whole table when the sync must
// be a full one.
func writePartial(lw *lineWriter, prev *State, t *table, minimal bool) {
	if prev != nil {
		if ops, full := partialOps(prev, t.wanted(), minimal); !full {
			writeOps(lw, ops)
			return
		}
	}
	writeScript(lw, t)
}

// writeScript writes the whole table as one transaction that replaces an older one.
func writeScript(lw *lineWriter, t *table) {
	writeOps(lw, replaceTable(t.fixed.Table))
	t.write(lw)
}

// WriteState writes a state as knftables' Fake.Dump would: "add" lines only.
func WriteState(w io.Writer, st *State) error {
	lw := newLineWriter(w, st.Family)
	writeOps(lw, adds(st.Objects()))
	return lw.flush()
}

func writeOps(lw *lineWriter, ops []Op) {
	for _, o := range ops {
		lw.op(o.Verb, o.Obj)
	}
}

// stageHeader starts the staged shell script.
const stageHeader = `#!/bin/sh
# kube-proxy's nftables table, loaded in stages (svcgen compile --stages): regular chains,
# sets and maps; their rules (those with anonymous sets apart); the set and map
# elements; then the base chains that hook the table into netfilter. Not atomic: see
# svcgen's README.
set -e
`

// hasAnonymousSet reports a rule with an anonymous set or map ("vmap { 0 : goto ... }",
// "ip saddr != { ... }"); "update @set { ip saddr }" names a set and makes none.
func hasAnonymousSet(rule []byte) bool {
	return bytes.Contains(rule, []byte("{ ")) && !bytes.HasPrefix(rule, []byte("update "))
}
