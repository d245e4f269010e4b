package compiler

import (
	"net/netip"
	"time"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// DefaultMasqueradeBit is kube-proxy's default masqueradeBit.
const DefaultMasqueradeBit = 14

var ipv4Loopback = netip.MustParseAddr("127.0.0.1")

// applyConfig turns the KubeProxyConfiguration into the service map's settings.
func applyConfig(sm *ir.ServiceMap, cfg *model.Config, node *model.Node, mode Mode, errs *model.Problems) {
	bit, all := cfg.IPTables.MasqueradeBit, cfg.IPTables.MasqueradeAll
	if mode == NFTables {
		bit, all = cfg.NFTables.MasqueradeBit, cfg.NFTables.MasqueradeAll
	}
	sm.MasqueradeBit = DefaultMasqueradeBit
	if bit != nil {
		sm.MasqueradeBit = int(*bit)
	}
	sm.MasqueradeAll = all
	sm.LocalDetector = localDetector(cfg, node, sm.Family, errs)
	sm.NodePorts = nodePortAddresses(cfg, sm, mode, errs)
	sm.IPVS = ipvsConfig(cfg, sm.Family, mode == IPVS, errs)
}

// ipvsSchedulers are the kernel's IPVS schedulers (modules ip_vs_<name>), the names
// ipvsadm accepts after -s. Upstream no longer validates ipvs.scheduler and the kernel
// refuses an unknown one when the first virtual server is added; svcgen refuses it in
// the input, and so no other text reaches the ipvs script.
var ipvsSchedulers = map[string]bool{
	"rr": true, "wrr": true, "lc": true, "wlc": true, "lblc": true, "lblcr": true,
	"dh": true, "sh": true, "sed": true, "nq": true, "fo": true, "ovf": true, "mh": true,
}

// ipvsConfig reads the ipvs section: the scheduler (rr when unset), excludeCIDRs of
// the family and the connection timeouts. Only an ipvs compile checks its fields.
func ipvsConfig(cfg *model.Config, family model.IPFamily, check bool, errs *model.Problems) ir.IPVS {
	out := ir.IPVS{Scheduler: cfg.IPVS.Scheduler, StrictARP: cfg.IPVS.StrictARP}
	if out.Scheduler == "" {
		out.Scheduler = "rr"
	}
	if check && !ipvsSchedulers[out.Scheduler] {
		errs.Add(cfg.Origin, "ipvs.scheduler", "unknown IPVS scheduler %q (want one of rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, fo, ovf, mh)", out.Scheduler)
	}
	for _, p := range cfg.IPVS.ExcludeCIDRs {
		if model.FamilyOf(p.Addr()) == family {
			out.ExcludeCIDRs = append(out.ExcludeCIDRs, p)
		}
	}
	for _, t := range []struct {
		field, value string
		dst          *int
	}{
		{"ipvs.tcpTimeout", cfg.IPVS.TCPTimeout, &out.TCPTimeout},
		{"ipvs.tcpFinTimeout", cfg.IPVS.TCPFinTimeout, &out.TCPFinTimeout},
		{"ipvs.udpTimeout", cfg.IPVS.UDPTimeout, &out.UDPTimeout},
	} {
		if t.value == "" {
			continue
		}
		d, err := time.ParseDuration(t.value)
		if err != nil || d < 0 {
			if check {
				errs.Add(cfg.Origin, t.field, "%q is not a duration such as 900s or 15m", t.value)
			}
			continue
		}
		*t.dst = int(d / time.Second)
	}
	return out
}

// localDetector follows cmd/kube-proxy's getLocalDetectors: ClusterCIDR is the
// default mode; a mode without a value for this family detects nothing.
func localDetector(cfg *model.Config, node *model.Node, family model.IPFamily, errs *model.Problems) ir.LocalDetector {
	mode := cfg.DetectLocalMode
	if mode == "" {
		mode = "ClusterCIDR"
	}
	switch mode {
	case "ClusterCIDR":
		for _, p := range cfg.ClusterCIDRs {
			if model.FamilyOf(p.Addr()) == family {
				return ir.LocalDetector{Mode: mode, CIDR: p}
			}
		}
	case "NodeCIDR":
		if node == nil {
			errs.Add(cfg.Origin, "detectLocalMode", "NodeCIDR needs the Node object in the input (its spec.podCIDRs)")
			return ir.LocalDetector{}
		}
		for _, p := range node.PodCIDRs {
			if model.FamilyOf(p.Addr()) == family {
				return ir.LocalDetector{Mode: mode, CIDR: p}
			}
		}
	case "BridgeInterface":
		return ir.LocalDetector{Mode: mode, Interface: cfg.BridgeInterface}
	case "InterfaceNamePrefix":
		return ir.LocalDetector{Mode: mode, Interface: cfg.InterfaceNamePrefix}
	}
	return ir.LocalDetector{}
}

// nodePortAddresses resolves nodePortAddresses for the service map's family, as
// cmd/kube-proxy does: the keywords expanded ("primary": the node's IP; "localhost":
// 127.0.0.0/8 or ::1/128; "all": every address), nftables mode without any taking
// "primary" (platformApplyDefaults), and what the release does not accept refused.
func nodePortAddresses(cfg *model.Config, sm *ir.ServiceMap, mode Mode, errs *model.Problems) ir.NodePortAddresses {
	checkNodePortKeywords(cfg, sm.Target, errs)
	primary := cfg.NodePortPrimary
	if mode == NFTables && len(cfg.NodePortAddresses) == 0 && !cfg.NodePortLocalhost && !cfg.NodePortAll {
		primary = true
	}
	var cidrs []netip.Prefix
	for _, p := range cfg.NodePortAddresses {
		if model.FamilyOf(p.Addr()) == sm.Family {
			cidrs = append(cidrs, p)
		}
	}
	if ip := sm.Node.IP; primary && ip.IsValid() && !ip.IsLoopback() {
		cidrs = append(cidrs, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if cfg.NodePortLocalhost {
		cidrs = append(cidrs, loopbackOf(sm.Family))
	}
	if cfg.NodePortAll {
		cidrs = append(cidrs, netip.PrefixFrom(loopbackOf(sm.Family).Addr(), 0).Masked())
	}
	var npa ir.NodePortAddresses
	npa.MatchAll = len(cidrs) == 0
	for _, p := range cidrs {
		if p.Bits() == 0 {
			npa.MatchAll = true
		}
	}
	localhostOK := cfg.IPTables.LocalhostNodePorts == nil || *cfg.IPTables.LocalhostNodePorts
	containsLoopback := npa.MatchAll
	for _, p := range cidrs {
		if p.Contains(ipv4Loopback) || (p.Addr().Is4() && netip.MustParsePrefix("127.0.0.0/8").Overlaps(p)) {
			containsLoopback = true
		}
	}
	npa.Localhost = localhostOK && sm.Family == model.IPv4 && containsLoopback
	if npa.MatchAll {
		return npa
	}
	seen := map[netip.Addr]bool{}
	for _, a := range sm.Node.Addresses {
		ip := a.Addr()
		for _, p := range cidrs {
			if p.Contains(ip) && !seen[ip] {
				seen[ip] = true
				npa.Addresses = append(npa.Addresses, ip)
			}
		}
	}
	return npa
}

// loopbackOf is the family's loopback range: 127.0.0.0/8 or ::1/128.
func loopbackOf(f model.IPFamily) netip.Prefix {
	if f == model.IPv6 {
		return netip.MustParsePrefix("::1/128")
	}
	return netip.MustParsePrefix("127.0.0.0/8")
}

// checkNodePortKeywords refuses what the release's validation refuses: before v1.37
// "primary" only alone, and no "localhost" or "all".
func checkNodePortKeywords(cfg *model.Config, t release.Target, errs *model.Problems) {
	if t.Layout.NodePortAddressKeywords {
		return
	}
	if cfg.NodePortLocalhost || cfg.NodePortAll {
		errs.Add(cfg.Origin, "nodePortAddresses", "the keywords \"localhost\" and \"all\" need kube-proxy 1.37 or later (the rules are for %s)", t.Release)
	}
	if cfg.NodePortPrimary && (len(cfg.NodePortAddresses) > 0 || cfg.NodePortLocalhost || cfg.NodePortAll) {
		errs.Add(cfg.Origin, "nodePortAddresses", "\"primary\" cannot be combined with CIDRs before kube-proxy 1.37 (the rules are for %s)", t.Release)
	}
}
