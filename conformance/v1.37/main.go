// Command oracle runs kube-proxy v1.37's proxiers on one input (see package oracle).
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
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"

	"github.com/svcgen/svcgen/conformance/oracle"
)

func main() { oracle.Main(release{}) }

type release struct{}

func (release) Version() string { return "v1.37.2" }

// NewProxier is createProxier of cmd/kube-proxy/app/server_linux.go: the
// dual-stack proxier where the host supports both families, else the single-stack
// one of the primary family. Since v1.37 the proxiers take the configuration itself.
func (release) NewProxier(ctx context.Context, p *oracle.Params) (proxy.Provider, error) {
	c, f := p.Config, p.Family
	switch c.Mode {
	case kubeproxyconfig.ProxyModeIPTables:
		if p.DualStack {
			return iptables.NewDualStackProxier(ctx, c, p.IPTables, p.Sysctl, p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, false)
		}
		return iptables.NewProxier(ctx, c, f, p.IPTables[f], p.Sysctl, p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, false)
	case kubeproxyconfig.ProxyModeIPVS:
		if p.DualStack {
			return ipvs.NewDualStackProxier(ctx, c, p.IPTables, p.IPVS, p.IPSet, p.Sysctl, p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, false)
		}
		return ipvs.NewProxier(ctx, c, f, p.IPTables[f], p.IPVS, p.IPSet, p.Sysctl, p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, false)
	case kubeproxyconfig.ProxyModeNFTables:
		if p.DualStack {
			return nftables.NewDualStackProxier(ctx, c, p.LocalDetectors,
				p.NodeName, p.NodeIPs, p.Recorder, nil, false)
		}
		return nftables.NewProxier(ctx, c, f, p.LocalDetectors[f],
			p.NodeName, p.NodeIPs[f], p.Recorder, nil, false)
	}
	return nil, fmt.Errorf("unknown mode %q", c.Mode)
}

// NodePortAddresses is v1.37's expandNodePortAddressKeywords (cmd/kube-proxy/app,
// unexported): "primary" is each family's node IP that is not loopback, "localhost"
// both loopback CIDRs, "all" both zero CIDRs; CIDRs stay as they are.
func (release) NodePortAddresses(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	var out []string
	for _, a := range addrs {
		switch a {
		case kubeproxyconfig.NodePortAddressesPrimary:
			out = append(out, oracle.PrimaryOnly([]string{a}, nodeIPs)...)
		case kubeproxyconfig.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case kubeproxyconfig.NodePortAddressesAll:
			out = append(out, proxyutil.IPv4ZeroCIDR, proxyutil.IPv6ZeroCIDR)
		default:
			out = append(out, a)
		}
	}
	return out
}

// FakeIPTables: v1.37's fake has no --random-fully switch; nothing asks any more.
func (release) FakeIPTables(family v1.IPFamily, _ bool) utiliptables.Interface {
	if family == v1.IPv6Protocol {
		return iptablestest.NewIPv6Fake()
	}
	return iptablestest.NewFake()
}

// RandomFully: v1.37 dropped the probe; MASQUERADE always has --random-fully.
func (release) RandomFully(utiliptables.Interface) bool { return true }
