// Command oracle runs kube-proxy v1.36's proxiers on one input (see package oracle).
package main

import (
	"context"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/ipvs"
	"k8s.io/kubernetes/pkg/proxy/nftables"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"github.com/svcgen/svcgen/conformance/oracle"
)

func main() { oracle.Main(release{}) }

type release struct{}

func (release) Version() string { return "v1.36.3" }

// NewProxier is createProxier of cmd/kube-proxy/app/server_linux.go: the
// dual-stack proxier where the host supports both families, else the single-stack
// one of the primary family.
func (release) NewProxier(ctx context.Context, p *oracle.Params) (proxy.Provider, error) {
	c := p.Config
	f := p.Family
	switch c.Mode {
	case kubeproxyconfig.ProxyModeIPTables:
		if p.DualStack {
			return iptables.NewDualStackProxier(ctx, p.IPTables, p.Sysctl,
				c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.Linux.MasqueradeAll,
				*c.IPTables.LocalhostNodePorts, int(*c.IPTables.MasqueradeBit), p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, c.NodePortAddresses, false)
		}
		return iptables.NewProxier(ctx, f, p.IPTables[f], p.Sysctl,
			c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.Linux.MasqueradeAll,
			*c.IPTables.LocalhostNodePorts, int(*c.IPTables.MasqueradeBit), p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, c.NodePortAddresses, false)
	case kubeproxyconfig.ProxyModeIPVS:
		if p.DualStack {
			return ipvs.NewDualStackProxier(ctx, p.IPTables, p.IPVS, p.IPSet, p.Sysctl,
				c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.IPVS.ExcludeCIDRs, c.IPVS.StrictARP,
				c.IPVS.TCPTimeout.Duration, c.IPVS.TCPFinTimeout.Duration, c.IPVS.UDPTimeout.Duration,
				c.Linux.MasqueradeAll, int(*c.IPTables.MasqueradeBit), p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, c.IPVS.Scheduler, c.NodePortAddresses, false)
		}
		return ipvs.NewProxier(ctx, f, p.IPTables[f], p.IPVS, p.IPSet, p.Sysctl,
			c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.IPVS.ExcludeCIDRs, c.IPVS.StrictARP,
			c.IPVS.TCPTimeout.Duration, c.IPVS.TCPFinTimeout.Duration, c.IPVS.UDPTimeout.Duration,
			c.Linux.MasqueradeAll, int(*c.IPTables.MasqueradeBit), p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, c.IPVS.Scheduler, c.NodePortAddresses, false)
	case kubeproxyconfig.ProxyModeNFTables:
		if p.DualStack {
			return nftables.NewDualStackProxier(ctx,
				c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.Linux.MasqueradeAll,
				int(*c.NFTables.MasqueradeBit), p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, c.NodePortAddresses, false)
		}
		return nftables.NewProxier(ctx, f,
			c.SyncPeriod.Duration, c.MinSyncPeriod.Duration, c.Linux.MasqueradeAll,
			int(*c.NFTables.MasqueradeBit), p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, c.NodePortAddresses, false)
	}
	return nil, fmt.Errorf("unknown mode %q", c.Mode)
}

// NodePortAddresses is newProxyServer's: ["primary"] alone becomes the node IPs.
func (release) NodePortAddresses(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	return oracle.PrimaryOnly(addrs, nodeIPs)
}

func (release) FakeIPTables(family v1.IPFamily, randomFully bool) utiliptables.Interface {
	if family == v1.IPv6Protocol {
		return iptablestest.NewIPv6Fake().SetHasRandomFully(randomFully)
	}
	return iptablestest.NewFake().SetHasRandomFully(randomFully)
}

func (release) RandomFully(ipt utiliptables.Interface) bool { return ipt.HasRandomFully() }
