package oracle

import (
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utilnode "k8s.io/kubernetes/pkg/util/node"
	netutils "k8s.io/utils/net"
)

// nodeView is what cmd/kube-proxy learns about its own Node before it builds the
// proxier: the node IPs (NodeManager: utilnode.GetNodeHostIPs of the Node), the pod
// CIDRs, and the topology labels its NodeTopologyConfig hands the proxier.
type nodeView struct {
	name     string
	rawIPs   []net.IP
	podCIDRs []string
	topology map[string]string
}

// findNode picks the Node named name. kube-proxy's NodeManager waits 30 s for a Node
// with IPs and then goes on without; the oracle goes on at once, which ends the
// same way. With detectLocalMode NodeCIDR, kube-proxy waits five minutes for pod
// CIDRs and then exits: so does the oracle, at once, with the same complaint.
func findNode(c *Cluster, name string, cfg *kubeproxyconfig.KubeProxyConfiguration) (*nodeView, error) {
	nv := &nodeView{name: name, topology: map[string]string{}}
	var node *v1.Node
	for _, n := range c.Nodes {
		if n.Name == name {
			node = n
		}
	}
	if node != nil {
		nv.rawIPs, _ = utilnode.GetNodeHostIPs(node)
		nv.podCIDRs = node.Spec.PodCIDRs
		if zone, ok := node.Labels[v1.LabelTopologyZone]; ok {
			nv.topology[v1.LabelTopologyZone] = zone
		}
	}
	if cfg.DetectLocalMode == kubeproxyconfig.LocalModeNodeCIDR && len(nv.podCIDRs) == 0 {
		if node == nil {
			return nil, fmt.Errorf("kube-proxy does not start: timeout waiting for node %q to exist", name)
		}
		return nil, fmt.Errorf("kube-proxy does not start: timeout waiting for PodCIDR allocation on node %q", name)
	}
	return nv, nil
}

// nodeIPs is cmd/kube-proxy's detectNodeIPs: the first Node IP decides the primary
// family, the second (of the other family) fills it in, a bindAddress that is not
// unspecified overrides its family's, and a family with none is loopback.
func nodeIPs(raw []net.IP, bindAddress string) (v1.IPFamily, map[v1.IPFamily]net.IP) {
	primary := v1.IPv4Protocol
	ips := map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.IPv4(127, 0, 0, 1), v1.IPv6Protocol: net.IPv6loopback}
	familyOf := func(ip net.IP) v1.IPFamily {
		if netutils.IsIPv4(ip) {
			return v1.IPv4Protocol
		}
		return v1.IPv6Protocol
	}
	if len(raw) > 0 {
		primary = familyOf(raw[0])
		ips[primary] = raw[0]
		if len(raw) > 1 {
			ips[familyOf(raw[1])] = raw[1]
		}
	}
	if bind := netutils.ParseIPSloppy(bindAddress); bind != nil && !bind.IsUnspecified() {
		primary = familyOf(bind)
		ips[primary] = bind
	}
	return primary, ips
}

// localDetectors is cmd/kube-proxy's getLocalDetectors: a detector per family,
// no-op where the mode has nothing for that family.
func localDetectors(cfg *kubeproxyconfig.KubeProxyConfiguration, podCIDRs []string) map[v1.IPFamily]proxyutil.LocalTrafficDetector {
	return map[v1.IPFamily]proxyutil.LocalTrafficDetector{
		v1.IPv4Protocol: localDetector(cfg, v1.IPv4Protocol, podCIDRs),
		v1.IPv6Protocol: localDetector(cfg, v1.IPv6Protocol, podCIDRs),
	}
}

// localDetector is getLocalDetectors' detector for one family.
func localDetector(cfg *kubeproxyconfig.KubeProxyConfiguration, family v1.IPFamily, podCIDRs []string) proxyutil.LocalTrafficDetector {
	switch cfg.DetectLocalMode {
	case kubeproxyconfig.LocalModeClusterCIDR:
		if cidrs := proxyutil.MapCIDRsByIPFamily(cfg.DetectLocal.ClusterCIDRs)[family]; len(cidrs) > 0 {
			return proxyutil.NewDetectLocalByCIDR(cidrs[0].String())
		}
	case kubeproxyconfig.LocalModeNodeCIDR:
		if cidrs := proxyutil.MapCIDRsByIPFamily(podCIDRs)[family]; len(cidrs) > 0 {
			return proxyutil.NewDetectLocalByCIDR(cidrs[0].String())
		}
	case kubeproxyconfig.LocalModeBridgeInterface:
		return proxyutil.NewDetectLocalByBridgeInterface(cfg.DetectLocal.BridgeInterface)
	case kubeproxyconfig.LocalModeInterfaceNamePrefix:
		return proxyutil.NewDetectLocalByInterfaceNamePrefix(cfg.DetectLocal.InterfaceNamePrefix)
	}
	return proxyutil.NewNoOpLocalDetector()
}

// PrimaryOnly is what newProxyServer does to nodePortAddresses up to v1.36: the
// keyword "primary", alone, becomes the node IP of each family that has one that is
// not loopback, as /32 or /128.
func PrimaryOnly(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	if len(addrs) != 1 || addrs[0] != kubeproxyconfig.NodePortAddressesPrimary {
		return addrs
	}
	var out []string
	if ip := nodeIPs[v1.IPv4Protocol]; ip != nil && !ip.IsLoopback() {
		out = append(out, ip.String()+"/32")
	}
	if ip := nodeIPs[v1.IPv6Protocol]; ip != nil && !ip.IsLoopback() {
		out = append(out, ip.String()+"/128")
	}
	return out
}
