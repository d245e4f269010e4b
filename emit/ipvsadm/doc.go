// Package ipvsadm writes a service map as kube-proxy's ipvs mode would program a node,
// and reads that state back from a node's tools.
//
// Build computes the state (Node) as the ipvs proxier's syncProxyRules does: a virtual
// server per cluster IP, external IP, load-balancer IP and node IP x node port, each
// with upstream's real servers (ir.Port.IPVSRealServers), the 17 sets with their
// entries, the addresses bound to kube-ipvs0, the sysctls and the companion chains.
//
// # Output order
//
// Virtual servers in ipvsadm's save order (protocol TCP, UDP, SCTP; then address, then
// port), real servers by address then port, so ipvsadm.rules is what "ipvsadm -Sn"
// prints for them. Sets in upstream's ipsetInfo order, entries sorted as strings.
// Addresses sorted. The iptables payload in kube-proxy's own order: nat chains, nat
// rules, filter chains, filter rules, which interleaves chains.
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
// only the differences, the way kube-proxy's sync does (see reconcile.awk).
//
// The one writer of shell text (sh) quotes every word it did not write itself; manifest
// names reach the script only in comments, and the data parts are quoted
// here-documents that the writer refuses to let end early.
//
// # Reading back
//
// ParseRules reads "ipvsadm -Sn", ParseSets "ipset save" (or restore input), ParsePayload
// the chains, and ParseScript a whole script, into the same structures.
package ipvsadm
