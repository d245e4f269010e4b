// Package syntax is the iptables rule model and its text: iptables-restore input and
// iptables-save output parsed into a Ruleset (Parse) and written back (Write), the one
// line writer (Buffer) that owns quoting and newlines, each rule's canonical key
// (RuleKey, so that iptables-save's spelling of a rule is the same rule), the one rule
// comparison (Rule.Same), and kube-proxy's chain names and hashes (names.go).
//
// It knows nothing of Services: trace, diff, audit, apply and the rules and plan layers
// all read and write iptables text through it, as kube-proxy keeps pkg/util/iptables
// apart from its proxier.
package syntax
