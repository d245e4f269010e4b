// Package oracle runs kube-proxy's own proxiers on one input, for svcgen's
// conformance tests: what it programs is what kube-proxy would program, and svcgen's
// output is compared with it (see package conformance in the main module).
//
// It is a module of its own because it requires k8s.io/kubernetes: each supported
// release has a module (conformance/vX.Y) that requires that release, implements
// Release (the few lines that differ between releases: the proxiers' constructor
// signatures, the nodePortAddresses keywords) and calls Main. This module requires
// the oldest supported release; a release module's requirement wins, so this code is
// compiled against each release in turn. It imports upstream code and never copies
// it: the configuration goes through kube-proxy's own command (LoadConfig), objects
// through the API server's defaulting (ReadCluster), and the proxier is the real
// NewProxier (NewDualStackProxier when the run has both families, as on a host
// that supports both), fed as kube-proxy's informers feed it (Run).
//
// iptables and nftables mode program the network namespace the program runs in, with
// the real iptables and nft; ipvs mode runs on upstream's fakes (this kernel has no
// IPVS) and writes their state in the formats of ipvsadm, ipset and iptables-save.
package oracle
