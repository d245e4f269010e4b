// Package rules writes a service map as kube-proxy's nftables table (the v1.34/v1.35
// layout): the rules layer of the nftables backend, between the service map (ir) and
// the text (nftables/syntax). NewTable plans the table (names, and each service port's
// decisions), from which every chain, rule, set and element is made when it is asked
// for: Write streams them as one "nft -f" script, Build makes the State, and
// nftables/plan compares them with a table on a node.
//
// # Output
//
// The script owns its table: it adds the table, deletes it and writes it again, all in
// one nft transaction, so running it twice leaves the same table and nothing else is
// touched. Objects come in the order knftables' Fake.Dump prints them: table; chains,
// sets and maps by name; rules chain by chain (in rule order); then the elements of
// each set and map by name, each in service-map order (services by namespace/name,
// ports, then frontends as kube-proxy visits them). That order never refers to an
// object before it exists, and it is the order of upstream's expected dumps, so
// svcgen's text sorts the way upstream sorts to the same text.
//
// With Stages, the same state is written as five transactions wrapped in a shell
// script (see Options.Stages for the trade-off, Table.Stages for the split).
//
// # Releases
//
// What differs between kube-proxy releases lands in one place each: the fixed chains,
// sets, maps and rules are tables (build.go: fixedChains, containers, fixedRules, each
// entry with its condition); a port's rules mark for masquerading in
// builder.masquerade, pick an endpoint in builder.dispatch, and comment their
// elements with portPlan.comment.
package rules

import (
	"io"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/syntax"
)

// Options control the output of a whole table. (What changed since a table on a node
// is nftables/plan's.)
type Options struct {
	// Stages writes the table as a shell script of five nft transactions (see
	// Table.Stages). A large table loads faster so (see docs/compile.md, "nftables mode"), but the load is not
	// atomic: from the first transaction, which deletes an older table, to the last,
	// which hooks the new one in, Service traffic is not translated.
	Stages bool
}

// Write writes the table for a service map. It is streamed: each rule and element is
// made when its line is written, and none is kept after.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	t := NewTable(sm)
	w := syntax.NewWriter(out, t.Family())
	w.Header(sm.Header("nftables"))
	if opts.Stages {
		w.Staged(t.Stages())
	} else {
		t.WriteScript(w)
	}
	return w.Flush()
}
