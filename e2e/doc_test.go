// Package e2e holds real-kernel tests: they build network namespaces (internal/netlab),
// load svcgen's output with the real tools, run real servers and connect to Service
// addresses.
//
// Network rule (netlab's): traffic stays inside namespaces the test creates (none is
// linked to the root namespace) and goes only to addresses the test assigns, all in
// 198.18.0.0/15. Every loop that sends traffic is bounded in count and time.
package e2e
