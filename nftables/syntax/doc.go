// Package syntax is the nftables rule model and its text: kube-proxy's table of a
// family as objects (State, over knftables' objects, in a Ruleset by family); Parse,
// which reads "nft -f" scripts (applied as nf_tables applies a transaction: Run,
// txn.go) and "nft list" output; the one line writer (Writer, Text) that owns
// newlines and quoting of every line svcgen writes for nft, staged scripts and the
// commit mark included; the one reader of rule text (lex.go, rule.go): ParseRule, a
// rule's meaning in either spelling, and the canonical form rules are compared by
// (Canonical); the one rule and definition comparison (compare.go); the view diff and
// audit show (View); and kube-proxy's object names and hashes (names.go).
//
// It knows nothing of Services: the rules layer (nftables/rules) and the sync
// (nftables/plan) sit above it, and trace, diff, audit and apply read and write
// nftables text through it, as kube-proxy keeps knftables apart from its proxier.
package syntax
