package load

import (
	"strings"

	"github.com/svcgen/svcgen/model"
)

func (l *Loader) pod(w *walker, n *node) {
	p := &model.Pod{}
	p.Namespace, p.Name, p.Labels = w.metadata(n, true, model.DNS1123Subdomain)
	p.Origin = w.origin
	meta := get(n, "metadata")
	p.Terminating = has(meta, "deletionTimestamp")
	spec := w.mapping(n, fieldPath{}, "spec")
	p.NodeName = w.strAt(spec, at("spec"), "nodeName")
	p.Hostname = w.strAt(spec, at("spec"), "hostname")
	w.items(spec, at("spec"), "containers", func(cn *node, cp fieldPath) {
		w.items(cn, cp, "ports", func(pn *node, pp fieldPath) {
			cport := model.ContainerPort{
				Name:          w.strAt(pn, pp, "name"),
				ContainerPort: w.port(pn, pp, "containerPort"),
				Protocol:      w.protocol(pn, pp, "protocol"),
			}
			if cport.Name != "" {
				w.name(cport.Name, pp.key("name"), model.IANASvcName)
			}
			p.Ports = append(p.Ports, cport)
		})
	})
	w.podStatus(p, n)
	l.Cluster.Pods = append(l.Cluster.Pods, p)
}

func (w *walker) podStatus(p *model.Pod, n *node) {
	status := w.mapping(n, fieldPath{}, "status")
	p.Phase = w.strAt(status, at("status"), "phase")
	listed := false
	w.items(status, at("status"), "podIPs", func(in *node, path fieldPath) {
		listed = true
		if a, ok := w.addrAt(in, path, "ip"); ok {
			p.PodIPs = append(p.PodIPs, a)
		}
	})
	if has(status, "podIP") {
		// status.podIP repeats podIPs[0]; it stands alone only where podIPs is not written.
		if a, ok := w.addrAt(status, at("status"), "podIP"); ok && !listed {
			p.PodIPs = append(p.PodIPs, a)
		}
	}
	w.items(status, at("status"), "conditions", func(cn *node, path fieldPath) {
		if w.strAt(cn, path, "type") == "Ready" {
			p.Ready = w.strAt(cn, path, "status") == "True"
		}
	})
}

func (l *Loader) node(w *walker, n *node) {
	nd := &model.Node{}
	_, nd.Name, nd.Labels = w.metadata(n, false, model.DNS1123Subdomain)
	nd.Origin = w.origin
	spec := w.mapping(n, fieldPath{}, "spec")
	cidrs := w.strList(spec, at("spec"), "podCIDRs")
	if len(cidrs) == 0 {
		if c := w.strAt(spec, at("spec"), "podCIDR"); c != "" {
			cidrs = []string{c}
		}
	}
	for i, c := range cidrs {
		if p, ok := w.prefix(c, at("spec.podCIDRs").index(i)); ok {
			nd.PodCIDRs = append(nd.PodCIDRs, p.Masked())
		}
	}
	status := w.mapping(n, fieldPath{}, "status")
	w.items(status, at("status"), "addresses", func(an *node, path fieldPath) {
		t := w.strAt(an, path, "type")
		if t != "InternalIP" && t != "ExternalIP" {
			return // Hostname, InternalDNS, ExternalDNS carry no IP
		}
		if a, ok := w.addrAt(an, path, "address"); ok {
			nd.Addresses = append(nd.Addresses, model.NodeAddress{Type: t, Address: a})
		}
	})
	nodeInfo := w.mapping(status, at("status"), "nodeInfo")
	nd.KubeletVersion = w.strAt(nodeInfo, at("status.nodeInfo"), "kubeletVersion")
	l.Cluster.Nodes = append(l.Cluster.Nodes, nd)
}

func (l *Loader) serviceCIDR(w *walker, n *node) {
	sc := &model.ServiceCIDR{}
	_, sc.Name, _ = w.metadata(n, false, model.DNS1123Subdomain)
	sc.Origin = w.origin
	spec := w.mapping(n, fieldPath{}, "spec")
	before := l.Errors.Len()
	for i, c := range w.strList(spec, at("spec"), "cidrs") {
		p, ok := w.prefix(c, at("spec.cidrs").index(i))
		if !ok {
			continue
		}
		if p != p.Masked() {
			w.errorf(at("spec.cidrs").index(i), "%q has host bits set (did you mean %s?)", c, p.Masked())
			continue
		}
		sc.CIDRs = append(sc.CIDRs, p)
	}
	if len(sc.CIDRs) == 0 && l.Errors.Len() == before {
		// "missing" only when no entry was reported wrong above.
		w.errorf(at("spec.cidrs"), "missing")
	}
	l.Cluster.ServiceCIDRs = append(l.Cluster.ServiceCIDRs, sc)
}

func (l *Loader) config(w *walker, n *node) {
	c := &model.Config{Origin: w.origin}
	c.Mode = w.str(n, "mode")
	switch c.Mode {
	case "", "iptables", "ipvs", "nftables":
	default:
		w.errorf(at("mode"), "unknown proxy mode %q (want iptables, ipvs or nftables)", c.Mode)
	}
	c.HostnameOverride = w.str(n, "hostnameOverride")
	if b := w.str(n, "bindAddress"); b != "" {
		c.BindAddress, _ = w.addr(b, at("bindAddress"))
	}
	cidrs := 0
	for _, s := range strings.Split(w.str(n, "clusterCIDR"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if cidrs++; cidrs == 3 {
			w.errorf(at("clusterCIDR"), "at most two CIDRs (one per family)")
		}
		if p, ok := w.prefix(s, at("clusterCIDR")); ok {
			c.ClusterCIDRs = append(c.ClusterCIDRs, p.Masked())
		}
	}
	w.detectLocal(c, n)
	w.nodePortAddresses(c, n)
	w.proxyModes(c, n)
	c.FeatureGates = w.featureGates(n)
	l.Cluster.Configs = append(l.Cluster.Configs, c)
}

func (w *walker) detectLocal(c *model.Config, n *node) {
	c.DetectLocalMode = w.str(n, "detectLocalMode")
	switch c.DetectLocalMode {
	case "", "ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix":
	default:
		w.errorf(at("detectLocalMode"), "unknown mode %q (want ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix)", c.DetectLocalMode)
	}
	dl := w.mapping(n, fieldPath{}, "detectLocal")
	c.BridgeInterface = w.strAt(dl, at("detectLocal"), "bridgeInterface")
	c.InterfaceNamePrefix = w.strAt(dl, at("detectLocal"), "interfaceNamePrefix")
	check := func(v, field string, needed bool) {
		if v == "" && !needed {
			return
		}
		if err := model.CheckInterfaceName(v); err != nil {
			w.errorf(at(field), "%v", err)
		}
	}
	check(c.BridgeInterface, "detectLocal.bridgeInterface", c.DetectLocalMode == "BridgeInterface")
	check(c.InterfaceNamePrefix, "detectLocal.interfaceNamePrefix", c.DetectLocalMode == "InterfaceNamePrefix")
}

// nodePortAddresses reads CIDRs and the keywords "primary", "localhost" and "all"
// (which releases accept which, and with what, is the compiler's to check).
func (w *walker) nodePortAddresses(c *model.Config, n *node) {
	for i, s := range w.strList(n, fieldPath{}, "nodePortAddresses") {
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
			w.errorf(at("nodePortAddresses").index(i), "%q is listed twice", s)
		case kw != nil:
			*kw = true
		default:
			if p, ok := w.prefix(s, at("nodePortAddresses").index(i)); ok {
				c.NodePortAddresses = append(c.NodePortAddresses, p.Masked())
			}
		}
	}
}

// masqueradeBit reads a masqueradeBit, which must be 0-31.
func (w *walker) masqueradeBit(parent *node, path fieldPath) *int32 {
	v, ok := w.integer(parent, path, "masqueradeBit", 0, 31)
	if !ok {
		return nil
	}
	b := int32(v)
	return &b
}

func (w *walker) proxyModes(c *model.Config, n *node) {
	ipt := w.mapping(n, fieldPath{}, "iptables")
	c.IPTables.MasqueradeAll, _ = w.boolean(ipt, at("iptables"), "masqueradeAll")
	c.IPTables.MasqueradeBit = w.masqueradeBit(ipt, at("iptables"))
	c.IPTables.LocalhostNodePorts = w.boolPtr(ipt, at("iptables"), "localhostNodePorts")
	c.IPTables.SyncPeriod = w.strAt(ipt, at("iptables"), "syncPeriod")
	c.IPTables.MinSyncPeriod = w.strAt(ipt, at("iptables"), "minSyncPeriod")

	nft := w.mapping(n, fieldPath{}, "nftables")
	c.NFTables.MasqueradeAll, _ = w.boolean(nft, at("nftables"), "masqueradeAll")
	c.NFTables.MasqueradeBit = w.masqueradeBit(nft, at("nftables"))
	c.NFTables.SyncPeriod = w.strAt(nft, at("nftables"), "syncPeriod")
	c.NFTables.MinSyncPeriod = w.strAt(nft, at("nftables"), "minSyncPeriod")

	ipvs := w.mapping(n, fieldPath{}, "ipvs")
	c.IPVS.Scheduler = w.strAt(ipvs, at("ipvs"), "scheduler")
	c.IPVS.StrictARP, _ = w.boolean(ipvs, at("ipvs"), "strictARP")
	for i, s := range w.strList(ipvs, at("ipvs"), "excludeCIDRs") {
		if p, ok := w.prefix(s, at("ipvs.excludeCIDRs").index(i)); ok {
			c.IPVS.ExcludeCIDRs = append(c.IPVS.ExcludeCIDRs, p.Masked())
		}
	}
	c.IPVS.TCPTimeout = w.strAt(ipvs, at("ipvs"), "tcpTimeout")
	c.IPVS.TCPFinTimeout = w.strAt(ipvs, at("ipvs"), "tcpFinTimeout")
	c.IPVS.UDPTimeout = w.strAt(ipvs, at("ipvs"), "udpTimeout")
	c.IPVS.SyncPeriod = w.strAt(ipvs, at("ipvs"), "syncPeriod")
	c.IPVS.MinSyncPeriod = w.strAt(ipvs, at("ipvs"), "minSyncPeriod")
}

func (w *walker) featureGates(n *node) map[string]bool {
	fg := w.mapping(n, fieldPath{}, "featureGates")
	if fg == nil {
		return nil
	}
	out := map[string]bool{}
	for i := 0; i+1 < len(fg.content); i += 2 {
		key := w.text.keep(fg.content[i].value)
		if v, ok := w.boolean(fg, at("featureGates"), key); ok {
			out[key] = v
		}
	}
	return out
}

func (l *Loader) environment(w *walker, n *node) {
	e := &model.NodeEnvironment{Origin: w.origin, RandomFully: true}
	_, e.Node, _ = w.metadata(n, false, model.DNS1123Subdomain)
	switch f := w.str(n, "ipFamily"); f {
	case "", "IPv4":
		e.IPFamily = model.IPv4
	case "IPv6":
		e.IPFamily = model.IPv6
	default:
		w.errorf(at("ipFamily"), "unknown IP family %q (want IPv4 or IPv6)", f)
	}
	ipt := w.mapping(n, fieldPath{}, "iptables")
	if v, ok := w.boolean(ipt, at("iptables"), "randomFully"); ok {
		e.RandomFully = v
	}
	e.NFAcct, _ = w.boolean(ipt, at("iptables"), "nfacct")
	ct := w.mapping(n, fieldPath{}, "conntrack")
	e.TCPBeLiberal, _ = w.boolean(ct, at("conntrack"), "tcpBeLiberal")
	w.items(n, fieldPath{}, "interfaces", func(in *node, path fieldPath) {
		itf := model.Interface{Name: w.strAt(in, path, "name")}
		for i, a := range w.strList(in, path, "addresses") {
			if p, ok := w.prefix(a, path.key("addresses").index(i)); ok {
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
