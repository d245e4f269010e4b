// Package conformance holds svcgen to kube-proxy's own code. For each supported
// kube-proxy release, conformance/vX.Y is a Go module that requires that release of
// k8s.io/kubernetes and builds a small program (on package conformance/oracle, a
// module too) that runs upstream's real proxier once on one cluster. The test here
// (TestOracle) runs it in one network namespace, loads svcgen's rules for the same
// cluster, mode and IP families (both for a dual-stack run) into another, reads both
// back with the real tools and compares them family by family, in one canonical
// order where kube-proxy's own order is Go map order.
//
// Differences that are known and explained are listed in expected.txt; any other
// difference fails the test, with a diff ("-" is kube-proxy, "+" is svcgen).
//
// The comparison helpers (Ruleset, CanonicalNFT, CanonicalLines, the case
// preparation and expectations) are in this package's non-test files; the driver,
// which needs root, network namespaces and the Go toolchain, is oracle_test.go.
package conformance
