package oracle

import (
	"context"
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// Release is what differs between the kube-proxy releases the oracle runs: the
// signatures of the proxiers' constructors and the few lines of cmd/kube-proxy that
// changed. Each conformance/vX.Y module implements it against its own
// k8s.io/kubernetes and hands it to Main; everything else is this package, compiled
// once per release against that release's code.
type Release interface {
	// Version is the k8s.io/kubernetes version the module requires ("v1.35.4").
	Version() string
	// NewProxier calls the release's NewProxier of p.Config.Mode as its
	// cmd/kube-proxy createProxier does: NewDualStackProxier when p.DualStack,
	// else the single-stack NewProxier of p.Family.
	NewProxier(ctx context.Context, p *Params) (proxy.Provider, error)
	// NodePortAddresses does what the release's newProxyServer does to the
	// configuration's nodePortAddresses once the node IPs are known ("primary"...).
	NodePortAddresses(addresses []string, nodeIPs map[v1.IPFamily]net.IP) []string
	// FakeIPTables is pkg/util/iptables/testing's fake for the family, saying what
	// the real iptables said about --random-fully where the release still asks.
	FakeIPTables(family v1.IPFamily, randomFully bool) utiliptables.Interface
	// RandomFully is what the release's iptables proxier learns about
	// --random-fully from ipt.
	RandomFully(ipt utiliptables.Interface) bool
}

// Params are NewProxier's arguments, gathered as cmd/kube-proxy gathers them.
type Params struct {
	// Config is the configuration after kube-proxy's own decoding, defaulting and
	// the release's NodePortAddresses.
	Config *kubeproxyconfig.KubeProxyConfiguration
	// Family is the single-stack proxier's family; in a dual-stack run, the node's
	// primary family (createProxier's s.PrimaryIPFamily).
	Family v1.IPFamily
	// DualStack: the host supports both families, so kube-proxy runs
	// NewDualStackProxier (newProxyServer passes platformCheckSupported's
	// dualStackSupported to createProxier).
	DualStack bool
	NodeName  string
	// NodeIPs, LocalDetectors and IPTables hold each family of the run, as
	// createProxier's s.NodeIPs, localDetectors and ipts do: a single-stack
	// proxier takes its family's entry, a dual-stack one the maps.
	NodeIPs        map[v1.IPFamily]net.IP
	LocalDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector
	// IPTables are the real iptables and ip6tables of the namespace (iptables
	// mode) or the fakes (ipvs mode); Sysctl is the namespace's (iptables mode) or
	// a fake (ipvs mode); IPVS (a fake) and IPSet (the real runner) are set in ipvs
	// mode only, one for both families as in createProxier.
	IPTables map[v1.IPFamily]utiliptables.Interface
	IPVS     utilipvs.Interface
	IPSet    utilipset.Interface
	Sysctl   utilsysctl.Interface
	// Recorder takes the proxier's events (none of them shape rules).
	Recorder events.EventRecorder

	topology map[string]string // the node's topology labels, for feed
}

// Families are the families the run's proxiers program: Family alone, or IPv4 and
// IPv6 for a dual-stack run.
func (p *Params) Families() []v1.IPFamily {
	if p.DualStack {
		return []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
	return []v1.IPFamily{p.Family}
}
