package load

import (
	"slices"
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

func (l *Loader) pod(w *walker, n *tree.Node) {
	p := &model.Pod{}
	p.Namespace, p.Name, p.Labels = w.metadata(n, true, model.DNS1123Subdomain)
	p.Origin = w.origin
	meta := tree.Get(n, "metadata")
	p.Terminating = has(meta, "deletionTimestamp")
	spec := w.mapping(n, tree.Path{}, "spec")
	p.NodeName = w.strAt(spec, tree.At("spec"), "nodeName")
	p.Hostname = w.strAt(spec, tree.At("spec"), "hostname")
	p.Ports = w.containerPorts(spec, tree.At("spec"))
	p.Owner = w.owner(n)
	w.podStatus(p, n)
	l.Cluster.Pods = append(l.Cluster.Pods, p)
}

func (w *walker) podStatus(p *model.Pod, n *tree.Node) {
	status := w.mapping(n, tree.Path{}, "status")
	p.Phase = w.strAt(status, tree.At("status"), "phase")
	listed := false
	w.items(status, tree.At("status"), "podIPs", func(in *tree.Node, path tree.Path) {
		listed = true
		if a, ok := w.addrAt(in, path, "ip"); ok {
			p.PodIPs = append(p.PodIPs, a)
		}
	})
	if has(status, "podIP") {
		// status.podIP repeats podIPs[0]; it stands alone only where podIPs is not written.
		if a, ok := w.addrAt(status, tree.At("status"), "podIP"); ok && !listed {
			p.PodIPs = append(p.PodIPs, a)
		}
	}
	w.items(status, tree.At("status"), "conditions", func(cn *tree.Node, path tree.Path) {
		if w.strAt(cn, path, "type") == "Ready" {
			p.Ready = w.strAt(cn, path, "status") == "True"
		}
	})
}

func (l *Loader) node(w *walker, n *tree.Node) {
	nd := &model.Node{}
	_, nd.Name, nd.Labels = w.metadata(n, false, model.DNS1123Subdomain)
	nd.Origin = w.origin
	spec := w.mapping(n, tree.Path{}, "spec")
	cidrs := w.strList(spec, tree.At("spec"), "podCIDRs")
	if len(cidrs) == 0 {
		if c := w.strAt(spec, tree.At("spec"), "podCIDR"); c != "" {
			cidrs = []string{c}
		}
	}
	for i, c := range cidrs {
		if p, ok := w.prefix(c, tree.At("spec.podCIDRs").Index(i)); ok {
			nd.PodCIDRs = append(nd.PodCIDRs, p.Masked())
		}
	}
	nd.Unschedulable, _ = w.boolean(spec, tree.At("spec"), "unschedulable")
	w.items(spec, tree.At("spec"), "taints", func(tn *tree.Node, path tree.Path) {
		nd.Taints = append(nd.Taints, model.Taint{Key: w.strAt(tn, path, "key"), Value: w.strAt(tn, path, "value"), Effect: w.strAt(tn, path, "effect")})
	})
	status := w.mapping(n, tree.Path{}, "status")
	w.items(status, tree.At("status"), "addresses", func(an *tree.Node, path tree.Path) {
		t := w.strAt(an, path, "type")
		if t != "InternalIP" && t != "ExternalIP" {
			return // Hostname, InternalDNS, ExternalDNS carry no IP
		}
		if a, ok := w.addrAt(an, path, "address"); ok {
			nd.Addresses = append(nd.Addresses, model.NodeAddress{Type: t, Address: a})
		}
	})
	nodeInfo := w.mapping(status, tree.At("status"), "nodeInfo")
	nd.KubeletVersion = w.strAt(nodeInfo, tree.At("status.nodeInfo"), "kubeletVersion")
	l.Cluster.Nodes = append(l.Cluster.Nodes, nd)
}

func (l *Loader) serviceCIDR(w *walker, n *tree.Node) {
	sc := &model.ServiceCIDR{}
	_, sc.Name, _ = w.metadata(n, false, model.DNS1123Subdomain)
	sc.Origin = w.origin
	spec := w.mapping(n, tree.Path{}, "spec")
	before := l.Errors.Len()
	for i, c := range w.strList(spec, tree.At("spec"), "cidrs") {
		p, ok := w.prefix(c, tree.At("spec.cidrs").Index(i))
		if !ok {
			continue
		}
		if p != p.Masked() {
			w.errorf(tree.At("spec.cidrs").Index(i), "%q has host bits set (did you mean %s?)", c, p.Masked())
			continue
		}
		sc.CIDRs = append(sc.CIDRs, p)
	}
	if len(sc.CIDRs) == 0 && l.Errors.Len() == before {
		// "missing" only when no entry was reported wrong above.
		w.errorf(tree.At("spec.cidrs"), "missing")
	}
	l.Cluster.ServiceCIDRs = append(l.Cluster.ServiceCIDRs, sc)
}

func (l *Loader) config(w *walker, n *tree.Node) {
	c := &model.Config{Origin: w.origin}
	c.Mode = w.str(n, "mode")
	switch c.Mode {
	case "", "iptables", "ipvs", "nftables":
	default:
		w.errorf(tree.At("mode"), "unknown proxy mode %q (want iptables, ipvs or nftables)", c.Mode)
	}
	c.HostnameOverride = w.str(n, "hostnameOverride")
	if b := w.str(n, "bindAddress"); b != "" {
		c.BindAddress, _ = w.addr(b, tree.At("bindAddress"))
	}
	cidrs := 0
	for _, s := range strings.Split(w.str(n, "clusterCIDR"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if cidrs++; cidrs == 3 {
			w.errorf(tree.At("clusterCIDR"), "at most two CIDRs (one per family)")
		}
		if p, ok := w.prefix(s, tree.At("clusterCIDR")); ok {
			c.ClusterCIDRs = append(c.ClusterCIDRs, p.Masked())
		}
	}
	w.detectLocal(c, n)
	w.nodePortAddresses(c, n)
	w.proxyModes(c, n)
	c.FeatureGates = w.featureGates(n)
	l.Cluster.Configs = append(l.Cluster.Configs, c)
}

func (w *walker) detectLocal(c *model.Config, n *tree.Node) {
	c.DetectLocalMode = w.str(n, "detectLocalMode")
	switch c.DetectLocalMode {
	case "", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix":
	default:
		w.errorf(tree.At("detectLocalMode"), "unknown mode %q (want ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix)", c.DetectLocalMode)
	}
	dl := w.mapping(n, tree.Path{}, "detectLocal")
	c.BridgeInterface = w.strAt(dl, tree.At("detectLocal"), "bridgeInterface")
	c.InterfaceNamePrefix = w.strAt(dl, tree.At("detectLocal"), "interfaceNamePrefix")
	check := func(v, field string, needed bool) {
		if v == "" && !needed {
			return
		}
		if err := model.CheckInterfaceName(v); err != nil {
			w.errorf(tree.At(field), "%v", err)
		}
	}
	check(c.BridgeInterface, "detectLocal.bridgeInterface", c.DetectLocalMode == "BridgeInterface")
	check(c.InterfaceNamePrefix, "detectLocal.interfaceNamePrefix", c.DetectLocalMode == "InterfaceNamePrefix")
}

// nodePortAddresses reads CIDRs and the keywords "primary", "localhost" and "all"
// (which releases accept which, and with what, is the compiler's to check).
func (w *walker) nodePortAddresses(c *model.Config, n *tree.Node) {
	for i, s := range w.strList(n, tree.Path{}, "nodePortAddresses") {
		var kw *bool
		switch s {
		case "primary":
			kw = &c.NodePortPrimary
		case "localhost":
			kw = &c.NodePortLocalhost
		case "all":
			kw = &c.NodePortAll
		}
		switch {
		case kw != nil && *kw:
			w.errorf(tree.At("nodePortAddresses").Index(i), "%q is listed twice", s)
		case kw != nil:
			*kw = true
		default:
			if p, ok := w.prefix(s, tree.At("nodePortAddresses").Index(i)); ok {
				c.NodePortAddresses = append(c.NodePortAddresses, p.Masked())
			}
		}
	}
}

// masqueradeBit reads a masqueradeBit, which must be 0-31.
func (w *walker) masqueradeBit(parent *tree.Node, path tree.Path) *int32 {
	v, ok := w.integer(parent, path, "masqueradeBit", 0, 31)
	if !ok {
		return nil
	}
	b := int32(v)
	return &b
}

func (w *walker) proxyModes(c *model.Config, n *tree.Node) {
	ipt := w.mapping(n, tree.Path{}, "iptables")
	c.IPTables.MasqueradeAll, _ = w.boolean(ipt, tree.At("iptables"), "masqueradeAll")
	c.IPTables.MasqueradeBit = w.masqueradeBit(ipt, tree.At("iptables"))
	c.IPTables.LocalhostNodePorts = w.boolPtr(ipt, tree.At("iptables"), "localhostNodePorts")
	c.IPTables.SyncPeriod = w.strAt(ipt, tree.At("iptables"), "syncPeriod")
	c.IPTables.MinSyncPeriod = w.strAt(ipt, tree.At("iptables"), "minSyncPeriod")

	nft := w.mapping(n, tree.Path{}, "nftables")
	c.NFTables.MasqueradeAll, _ = w.boolean(nft, tree.At("nftables"), "masqueradeAll")
	c.NFTables.MasqueradeBit = w.masqueradeBit(nft, tree.At("nftables"))
	c.NFTables.SyncPeriod = w.strAt(nft, tree.At("nftables"), "syncPeriod")
	c.NFTables.MinSyncPeriod = w.strAt(nft, tree.At("nftables"), "minSyncPeriod")

	ipvs := w.mapping(n, tree.Path{}, "ipvs")
	c.IPVS.Scheduler = w.strAt(ipvs, tree.At("ipvs"), "scheduler")
	c.IPVS.StrictARP, _ = w.boolean(ipvs, tree.At("ipvs"), "strictARP")
	for i, s := range w.strList(ipvs, tree.At("ipvs"), "excludeCIDRs") {
		if p, ok := w.prefix(s, tree.At("ipvs.excludeCIDRs").Index(i)); ok {
			c.IPVS.ExcludeCIDRs = append(c.IPVS.ExcludeCIDRs, p.Masked())
		}
	}
	c.IPVS.TCPTimeout = w.strAt(ipvs, tree.At("ipvs"), "tcpTimeout")
	c.IPVS.TCPFinTimeout = w.strAt(ipvs, tree.At("ipvs"), "tcpFinTimeout")
	c.IPVS.UDPTimeout = w.strAt(ipvs, tree.At("ipvs"), "udpTimeout")
	c.IPVS.SyncPeriod = w.strAt(ipvs, tree.At("ipvs"), "syncPeriod")
	c.IPVS.MinSyncPeriod = w.strAt(ipvs, tree.At("ipvs"), "minSyncPeriod")
}

func (w *walker) featureGates(n *tree.Node) map[string]bool {
	fg := w.mapping(n, tree.Path{}, "featureGates")
	if fg == nil {
		return nil
	}
	out := map[string]bool{}
	for i := 0; i+1 < len(fg.Content); i += 2 {
		key := w.text.keep(fg.Content[i].Value)
		if v, ok := w.boolean(fg, tree.At("featureGates"), key); ok {
			out[key] = v
		}
	}
	return out
}

func (l *Loader) environment(w *walker, n *tree.Node) {
	e := &model.NodeEnvironment{Origin: w.origin, RandomFully: true, NFAcct: true}
	_, e.Node, _ = w.metadata(n, false, model.DNS1123Subdomain)
	switch f := w.str(n, "ipFamily"); f {
	case "":
	case "IPv4", "IPv6":
		e.IPFamilies = []model.IPFamily{model.IPFamily(f)}
	case "DualStack":
		e.IPFamilies = slices.Clone(model.Families)
	default:
		w.errorf(tree.At("ipFamily"), "unknown IP family %q (want IPv4, IPv6 or DualStack)", f)
	}
	ipt := w.mapping(n, tree.Path{}, "iptables")
	if v, ok := w.boolean(ipt, tree.At("iptables"), "randomFully"); ok {
		e.RandomFully = v
	}
	if v, ok := w.boolean(ipt, tree.At("iptables"), "nfacct"); ok {
		e.NFAcct = v
	}
	ct := w.mapping(n, tree.Path{}, "conntrack")
	e.TCPBeLiberal, _ = w.boolean(ct, tree.At("conntrack"), "tcpBeLiberal")
	w.items(n, tree.Path{}, "interfaces", func(in *tree.Node, path tree.Path) {
		itf := model.Interface{Name: w.strAt(in, path, "name")}
		for i, a := range w.strList(in, path, "addresses") {
			if p, ok := w.prefix(a, path.Key("addresses").Index(i)); ok {
				itf.Addresses = append(itf.Addresses, p)
			}
		}
		e.Interfaces = append(e.Interfaces, itf)
	})
	if e.Interfaces == nil && has(n, "interfaces") {
		e.Interfaces = []model.Interface{}
	}
	l.Cluster.Environments = append(l.Cluster.Environments, e)
}
