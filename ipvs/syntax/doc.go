// Package syntax is the ipvs-mode rule model and its text: the state of one node for
// one IP family (Node: virtual servers with their real servers, the sets, the addresses
// of kube-ipvs0, the sysctls, the companion chains), "ipvsadm -Sn" text (ServiceLine,
// RealLine, WriteRules, ParseRules), "ipset save" and "ipset restore" text (WriteSets,
// ParseSets), the script that sets a node up and its parser (WriteScript, ParseScript,
// WriteSplit, with the one writer of shell text, which owns the quoting), and the
// names (names.go: sets and their KUBE-6- forms, chains, service flags). The companion
// chains are iptables rules: they are written and read through iptables/syntax.
//
// It knows nothing of Services: ipvs/rules builds a Node from a service map and
// ipvs/plan works out how to bring a node to one; trace, diff, audit and apply read and
// write ipvs text through this package.
//
// # Output order
//
// Virtual servers in ipvsadm's save order (protocol TCP, UDP, SCTP; then address, then
// port), real servers by address then port, so WriteRules gives what "ipvsadm -Sn"
// prints for them. Sets in upstream's ipsetInfo order (SetInfos), entries sorted as
// strings. Addresses sorted. The iptables payload in kube-proxy's own order: nat
// chains, nat rules, filter chains, filter rules, which interleaves chains.
//
// # The script
//
// WriteScript writes one POSIX shell script, in kube-proxy's order of concerns:
// sysctls; kube-ipvs0 and its addresses (added and removed to match, through
// "ip -batch"); the sets ("ipset restore -exist", each refilled in a scratch set and
// swapped in, so no set is ever empty for a moment); IPVS; the companion chains
// ("iptables-restore --noflush") and the jumps into them. Every step converges, so it
// can run again. IPVS is reconciled, not cleared: "ipvsadm -R" fails on a service
// that exists and "ipvsadm -C" drops every service and connection, so an awk program
// (reconcile.awk) compares the wanted rules with "ipvsadm -Sn" and gives "ipvsadm -R"
// only the differences. It is ipvs/plan's IPVS planner written again for the shell:
// the shared cases of ipvs/plan hold the two to the same lines and the same drain
// decisions.
//
// The one writer of shell text (sh) quotes every word it did not write itself; manifest
// names reach the script only in comments, and the data parts are quoted
// here-documents that the writer refuses to let end early.
//
// # Reading back
//
// ParseRules reads "ipvsadm -Sn", ParseSets "ipset save" (or restore input), ParsePayload
// the chains, and ParseScript a whole script, into the same structures.
package syntax
