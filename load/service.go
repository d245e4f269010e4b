package load

import (
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

// defaultAffinityTimeout is the API server's default for
// sessionAffinityConfig.clientIP.timeoutSeconds.
const defaultAffinityTimeout = 10800

// metadata reads metadata.name/namespace/labels. Namespaced objects default to the
// "default" namespace, as kubectl apply does.
func (w *walker) metadata(n *tree.Node, namespaced bool, nameRule model.NameRule) (ns, name string, labels map[string]string) {
	meta := w.mapping(n, tree.Path{}, "metadata")
	if namespaced {
		ns = w.strAt(meta, tree.At("metadata"), "namespace")
		if ns == "" {
			ns = "default"
			w.origin.Namespace = ns
		} else {
			w.name(ns, tree.At("metadata.namespace"), model.DNS1123Label)
		}
	} else {
		w.origin.Namespace = "" // cluster-scoped: a namespace written in metadata means nothing
	}
	name = w.strAt(meta, tree.At("metadata"), "name")
	if name == "" {
		w.errorf(tree.At("metadata.name"), "missing")
	} else {
		w.name(name, tree.At("metadata.name"), nameRule)
	}
	labels = w.stringMap(meta, tree.At("metadata"), "labels")
	return ns, name, labels
}

func (l *Loader) service(w *walker, n *tree.Node) {
	s := &model.Service{}
	s.Namespace, s.Name, s.Labels = w.metadata(n, true, model.DNS1035Label)
	s.Origin = w.origin
	if !has(n, "spec") {
		w.errorf(tree.At("spec"), "missing")
		return
	}
	spec := w.mapping(n, tree.Path{}, "spec")
	if spec == nil {
		return
	}
	w.serviceType(s, spec)
	w.clusterIPs(s, spec)
	w.selector(s, spec)
	w.servicePorts(s, spec)
	w.externalIPs(s, spec)
	w.policies(s, spec)
	w.affinity(s, spec)
	s.ExternalName = w.strAt(spec, tree.At("spec"), "externalName")
	s.AllocateLoadBalancerNodePorts = w.boolPtr(spec, tree.At("spec"), "allocateLoadBalancerNodePorts")
	s.PublishNotReadyAddresses, _ = w.boolean(spec, tree.At("spec"), "publishNotReadyAddresses")
	s.TrafficDistribution = w.strAt(spec, tree.At("spec"), "trafficDistribution")
	w.loadBalancerStatus(s, n)
	l.Cluster.Services = append(l.Cluster.Services, s)
}

func (w *walker) serviceType(s *model.Service, spec *tree.Node) {
	t := model.ServiceType(w.strAt(spec, tree.At("spec"), "type"))
	switch t {
	case "", model.TypeClusterIP, model.TypeNodePort, model.TypeLoadBalancer, model.TypeExternalName:
		s.Type = t
	default:
		w.errorf(tree.At("spec.type"), "unknown Service type %q (want ClusterIP, NodePort, LoadBalancer or ExternalName)", string(t))
	}
}

func (w *walker) clusterIPs(s *model.Service, spec *tree.Node) {
	single := w.strAt(spec, tree.At("spec"), "clusterIP")
	list := w.strList(spec, tree.At("spec"), "clusterIPs")
	if single == "None" || (single == "" && len(list) > 0 && list[0] == "None") {
		s.Headless = true
		return
	}
	if single != "" && len(list) > 0 && list[0] != single {
		w.errorf(tree.At("spec.clusterIPs[0]"), "%q must equal spec.clusterIP %q", list[0], single)
	}
	if len(list) == 0 && single != "" {
		list = []string{single}
	}
	for i, ip := range list {
		if a, ok := w.addr(ip, tree.At("spec.clusterIPs").Index(i)); ok {
			s.ClusterIPs = append(s.ClusterIPs, a)
		}
	}
	if len(s.ClusterIPs) == 2 && model.FamilyOf(s.ClusterIPs[0]) == model.FamilyOf(s.ClusterIPs[1]) {
		w.errorf(tree.At("spec.clusterIPs"), "two addresses of one family; dual-stack Services have one IPv4 and one IPv6 address")
	}
	if len(s.ClusterIPs) > 2 {
		w.errorf(tree.At("spec.clusterIPs"), "at most two addresses (one per family)")
	}
	for i, f := range w.strList(spec, tree.At("spec"), "ipFamilies") {
		switch model.IPFamily(f) {
		case model.IPv4, model.IPv6:
			s.IPFamilies = append(s.IPFamilies, model.IPFamily(f))
		default:
			w.errorf(tree.At("spec.ipFamilies").Index(i), "unknown IP family %q (want IPv4 or IPv6)", f)
		}
	}
	if len(s.IPFamilies) > 2 {
		w.errorf(tree.At("spec.ipFamilies"), "at most two families (IPv4 and IPv6)")
	}
	if len(s.IPFamilies) == 2 && s.IPFamilies[0] == s.IPFamilies[1] {
		w.errorf(tree.At("spec.ipFamilies"), "%s twice; dual-stack Services have one IPv4 and one IPv6 family", s.IPFamilies[0])
	}
	for i, a := range s.ClusterIPs {
		if i < len(s.IPFamilies) && model.FamilyOf(a) != s.IPFamilies[i] {
			w.errorf(tree.At("spec.clusterIPs").Index(i), "%s is not an %s address (spec.ipFamilies[%d])", a, s.IPFamilies[i], i)
		}
	}
	switch p := model.IPFamilyPolicy(w.strAt(spec, tree.At("spec"), "ipFamilyPolicy")); p {
	case "", model.SingleStack, model.PreferDualStack, model.RequireDualStack:
		s.IPFamilyPolicy = p
	default:
		w.errorf(tree.At("spec.ipFamilyPolicy"), "unknown IP family policy %q (want SingleStack, PreferDualStack or RequireDualStack)", string(p))
	}
	if s.IPFamilyPolicy == model.SingleStack && (len(s.ClusterIPs) == 2 || len(s.IPFamilies) == 2) {
		w.errorf(tree.At("spec.ipFamilyPolicy"), "SingleStack with two families; a dual-stack Service is PreferDualStack or RequireDualStack")
	}
}

func (w *walker) selector(s *model.Service, spec *tree.Node) {
	sel := tree.Get(spec, "selector")
	if tree.IsNull(sel) {
		return
	}
	if ml := tree.Get(sel, "matchLabels"); ml != nil && ml.Kind == tree.Mapping {
		if w.dialect != MiniK8s {
			w.errorf(tree.At("spec.selector.matchLabels"), "a Service selector is a plain label map; matchLabels is the minik8s dialect (use --dialect minik8s)")
			return
		}
		s.Selector = w.stringMap(sel, tree.At("spec.selector"), "matchLabels")
		if s.Selector == nil {
			s.Selector = map[string]string{}
		}
		return
	}
	s.Selector = w.stringMap(spec, tree.At("spec"), "selector")
	if s.Selector == nil {
		s.Selector = map[string]string{}
	}
}

func (w *walker) servicePorts(s *model.Service, spec *tree.Node) {
	w.items(spec, tree.At("spec"), "ports", func(pn *tree.Node, path tree.Path) {
		p := model.ServicePort{
			Name:        w.strAt(pn, path, "name"),
			Protocol:    w.protocol(pn, path, "protocol"),
			Port:        w.port(pn, path, "port"),
			NodePort:    w.port(pn, path, "nodePort"),
			AppProtocol: w.strAt(pn, path, "appProtocol"),
		}
		if p.Name != "" {
			w.name(p.Name, path.Key("name"), model.IANASvcName)
		}
		p.TargetPort = w.targetPort(pn, path)
		if p.Port == 0 && !has(pn, "port") {
			w.defaultPort(&p, path)
		}
		if p.TargetPort.IsZero() {
			p.TargetPort.Int = p.Port
		}
		s.Ports = append(s.Ports, p)
	})
}

// defaultPort handles a port without `port`: an error for Kubernetes manifests; the
// minik8s dialect falls back to the node port, then to a numeric targetPort.
func (w *walker) defaultPort(p *model.ServicePort, path tree.Path) {
	if w.dialect != MiniK8s {
		w.errorf(path.Key("port"), "missing")
		return
	}
	switch {
	case p.NodePort != 0:
		p.Port = p.NodePort
	case p.TargetPort.Int != 0:
		p.Port = p.TargetPort.Int
	default:
		w.errorf(path.Key("port"), "missing, and neither nodePort nor a numeric targetPort can stand in for it")
		return
	}
	w.warnf(path.Key("port"), "missing; using %d (minik8s dialect)", p.Port)
}

func (w *walker) targetPort(pn *tree.Node, path tree.Path) model.IntOrString {
	n := tree.Get(pn, "targetPort")
	if tree.IsNull(n) {
		return model.IntOrString{}
	}
	p := path.Key("targetPort")
	if n.Kind == tree.Scalar && n.Tag == tree.Int {
		return model.IntOrString{Int: w.port(pn, path, "targetPort")}
	}
	s, ok := w.strItem(n, p)
	if !ok {
		return model.IntOrString{}
	}
	if !w.name(s, p, model.IANASvcName) {
		return model.IntOrString{}
	}
	return model.IntOrString{Str: s}
}

func (w *walker) externalIPs(s *model.Service, spec *tree.Node) {
	for i, ip := range w.strList(spec, tree.At("spec"), "externalIPs") {
		p := tree.At("spec.externalIPs").Index(i)
		if strings.Contains(ip, "/") {
			w.errorf(p, "%q is a CIDR; external IPs are single addresses", ip)
			continue
		}
		if a, ok := w.addr(ip, p); ok {
			s.ExternalIPs = append(s.ExternalIPs, a)
		}
	}
	for i, r := range w.strList(spec, tree.At("spec"), "loadBalancerSourceRanges") {
		// kube-proxy trims the ranges (" 203.0.113.0/25" is accepted).
		if p, ok := w.prefix(strings.TrimSpace(r), tree.At("spec.loadBalancerSourceRanges").Index(i)); ok {
			s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, p.Masked())
		}
	}
}

func (w *walker) policies(s *model.Service, spec *tree.Node) {
	read := func(key string) model.TrafficPolicy {
		v := model.TrafficPolicy(w.strAt(spec, tree.At("spec"), key))
		switch v {
		case "", model.PolicyCluster, model.PolicyLocal:
			return v
		}
		w.errorf(tree.At("spec").Key(key), "unknown traffic policy %q (want Cluster or Local)", string(v))
		return ""
	}
	s.ExternalTrafficPolicy = read("externalTrafficPolicy")
	s.InternalTrafficPolicy = read("internalTrafficPolicy")
	v, _ := w.integer(spec, tree.At("spec"), "healthCheckNodePort", 1, 65535)
	s.HealthCheckNodePort = int32(v)
}

func (w *walker) affinity(s *model.Service, spec *tree.Node) {
	switch a := w.strAt(spec, tree.At("spec"), "sessionAffinity"); a {
	case "", "None":
	case "ClientIP":
		s.SessionAffinityClientIP = true
	default:
		w.errorf(tree.At("spec.sessionAffinity"), "unknown session affinity %q (want None or ClientIP)", a)
	}
	cfg := w.mapping(spec, tree.At("spec"), "sessionAffinityConfig")
	ip := w.mapping(cfg, tree.At("spec.sessionAffinityConfig"), "clientIP")
	t, ok := w.integer(ip, tree.At("spec.sessionAffinityConfig.clientIP"), "timeoutSeconds", 1, 86400)
	if !ok {
		t = defaultAffinityTimeout
	}
	if s.SessionAffinityClientIP {
		s.AffinityTimeoutSeconds = int32(t)
	}
}

func (w *walker) loadBalancerStatus(s *model.Service, n *tree.Node) {
	status := w.mapping(n, tree.Path{}, "status")
	lb := w.mapping(status, tree.At("status"), "loadBalancer")
	w.items(lb, tree.At("status.loadBalancer"), "ingress", func(in *tree.Node, path tree.Path) {
		ing := model.LoadBalancerIngress{
			Hostname: w.strAt(in, path, "hostname"),
			IPMode:   w.strAt(in, path, "ipMode"),
		}
		switch ing.IPMode {
		case "", "VIP", "Proxy":
		default:
			w.errorf(path.Key("ipMode"), "unknown ipMode %q (want VIP or Proxy)", ing.IPMode)
		}
		if ip := w.strAt(in, path, "ip"); ip != "" {
			ing.IP, _ = w.addr(ip, path.Key("ip"))
		}
		s.LoadBalancerIngress = append(s.LoadBalancerIngress, ing)
	})
}
