package load

import (
	"strings"

	"github.com/svcgen/svcgen/model"
)

// defaultAffinityTimeout is the API server's default for
// sessionAffinityConfig.clientIP.timeoutSeconds.
const defaultAffinityTimeout = 10800

// metadata reads metadata.name/namespace/labels. Namespaced objects default to the
// "default" namespace, as kubectl apply does.
func (w *walker) metadata(n *node, namespaced bool, nameRule model.NameRule) (ns, name string, labels map[string]string) {
	meta := w.mapping(n, fieldPath{}, "metadata")
	if namespaced {
		ns = w.strAt(meta, at("metadata"), "namespace")
		if ns == "" {
			ns = "default"
			w.origin.Namespace = ns
		} else {
			w.name(ns, at("metadata.namespace"), model.DNS1123Label)
		}
	} else {
		w.origin.Namespace = "" // cluster-scoped: a namespace written in metadata means nothing
	}
	name = w.strAt(meta, at("metadata"), "name")
	if name == "" {
		w.errorf(at("metadata.name"), "missing")
	} else {
		w.name(name, at("metadata.name"), nameRule)
	}
	labels = w.stringMap(meta, at("metadata"), "labels")
	return ns, name, labels
}

func (l *Loader) service(w *walker, n *node) {
	s := &model.Service{}
	s.Namespace, s.Name, s.Labels = w.metadata(n, true, model.DNS1035Label)
	s.Origin = w.origin
	if !has(n, "spec") {
		w.errorf(at("spec"), "missing")
		return
	}
	spec := w.mapping(n, fieldPath{}, "spec")
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
	s.ExternalName = w.strAt(spec, at("spec"), "externalName")
	s.AllocateLoadBalancerNodePorts = w.boolPtr(spec, at("spec"), "allocateLoadBalancerNodePorts")
	s.PublishNotReadyAddresses, _ = w.boolean(spec, at("spec"), "publishNotReadyAddresses")
	s.TrafficDistribution = w.strAt(spec, at("spec"), "trafficDistribution")
	w.loadBalancerStatus(s, n)
	l.Cluster.Services = append(l.Cluster.Services, s)
}

func (w *walker) serviceType(s *model.Service, spec *node) {
	t := model.ServiceType(w.strAt(spec, at("spec"), "type"))
	switch t {
	case "", model.TypeClusterIP, model.TypeNodePort, model.TypeLoadBalancer, model.TypeExternalName:
		s.Type = t
	default:
		w.errorf(at("spec.type"), "unknown Service type %q (want ClusterIP, NodePort, LoadBalancer or ExternalName)", string(t))
	}
}

func (w *walker) clusterIPs(s *model.Service, spec *node) {
	single := w.strAt(spec, at("spec"), "clusterIP")
	list := w.strList(spec, at("spec"), "clusterIPs")
	if single == "None" || (single == "" && len(list) > 0 && list[0] == "None") {
		s.Headless = true
		return
	}
	if single != "" && len(list) > 0 && list[0] != single {
		w.errorf(at("spec.clusterIPs[0]"), "%q must equal spec.clusterIP %q", list[0], single)
	}
	if len(list) == 0 && single != "" {
		list = []string{single}
	}
	for i, ip := range list {
		if a, ok := w.addr(ip, at("spec.clusterIPs").index(i)); ok {
			s.ClusterIPs = append(s.ClusterIPs, a)
		}
	}
	if len(s.ClusterIPs) == 2 && model.FamilyOf(s.ClusterIPs[0]) == model.FamilyOf(s.ClusterIPs[1]) {
		w.errorf(at("spec.clusterIPs"), "two addresses of one family; dual-stack Services have one IPv4 and one IPv6 address")
	}
	if len(s.ClusterIPs) > 2 {
		w.errorf(at("spec.clusterIPs"), "at most two addresses (one per family)")
	}
	for i, f := range w.strList(spec, at("spec"), "ipFamilies") {
		switch model.IPFamily(f) {
		case model.IPv4, model.IPv6:
			s.IPFamilies = append(s.IPFamilies, model.IPFamily(f))
		default:
			w.errorf(at("spec.ipFamilies").index(i), "unknown IP family %q (want IPv4 or IPv6)", f)
		}
	}
}

func (w *walker) selector(s *model.Service, spec *node) {
	sel := get(spec, "selector")
	if isNull(sel) {
		return
	}
	if ml := get(sel, "matchLabels"); ml != nil && ml.kind == mappingNode {
		if w.dialect != MiniK8s {
			w.errorf(at("spec.selector.matchLabels"), "a Service selector is a plain label map; matchLabels is the minik8s dialect (use --dialect minik8s)")
			return
		}
		s.Selector = w.stringMap(sel, at("spec.selector"), "matchLabels")
		if s.Selector == nil {
			s.Selector = map[string]string{}
		}
		return
	}
	s.Selector = w.stringMap(spec, at("spec"), "selector")
	if s.Selector == nil {
		s.Selector = map[string]string{}
	}
}

func (w *walker) servicePorts(s *model.Service, spec *node) {
	w.items(spec, at("spec"), "ports", func(pn *node, path fieldPath) {
		p := model.ServicePort{
			Name:        w.strAt(pn, path, "name"),
			Protocol:    w.protocol(pn, path, "protocol"),
			Port:        w.port(pn, path, "port"),
			NodePort:    w.port(pn, path, "nodePort"),
			AppProtocol: w.strAt(pn, path, "appProtocol"),
		}
		if p.Name != "" {
			w.name(p.Name, path.key("name"), model.IANASvcName)
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
func (w *walker) defaultPort(p *model.ServicePort, path fieldPath) {
	if w.dialect != MiniK8s {
		w.errorf(path.key("port"), "missing")
		return
	}
	switch {
	case p.NodePort != 0:
		p.Port = p.NodePort
	case p.TargetPort.Int != 0:
		p.Port = p.TargetPort.Int
	default:
		w.errorf(path.key("port"), "missing, and neither nodePort nor a numeric targetPort can stand in for it")
		return
	}
	w.warnf(path.key("port"), "missing; using %d (minik8s dialect)", p.Port)
}

func (w *walker) targetPort(pn *node, path fieldPath) model.IntOrString {
	n := get(pn, "targetPort")
	if isNull(n) {
		return model.IntOrString{}
	}
	p := path.key("targetPort")
	if n.kind == scalarNode && n.tag == tagInt {
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

func (w *walker) externalIPs(s *model.Service, spec *node) {
	for i, ip := range w.strList(spec, at("spec"), "externalIPs") {
		p := at("spec.externalIPs").index(i)
		if strings.Contains(ip, "/") {
			w.errorf(p, "%q is a CIDR; external IPs are single addresses", ip)
			continue
		}
		if a, ok := w.addr(ip, p); ok {
			s.ExternalIPs = append(s.ExternalIPs, a)
		}
	}
	for i, r := range w.strList(spec, at("spec"), "loadBalancerSourceRanges") {
		// kube-proxy trims the ranges (" 203.0.113.0/25" is accepted).
		if p, ok := w.prefix(strings.TrimSpace(r), at("spec.loadBalancerSourceRanges").index(i)); ok {
			s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, p.Masked())
		}
	}
}

func (w *walker) policies(s *model.Service, spec *node) {
	read := func(key string) model.TrafficPolicy {
		v := model.TrafficPolicy(w.strAt(spec, at("spec"), key))
		switch v {
		case "", model.PolicyCluster, model.PolicyLocal:
			return v
		}
		w.errorf(at("spec").key(key), "unknown traffic policy %q (want Cluster or Local)", string(v))
		return ""
	}
	s.ExternalTrafficPolicy = read("externalTrafficPolicy")
	s.InternalTrafficPolicy = read("internalTrafficPolicy")
	v, _ := w.integer(spec, at("spec"), "healthCheckNodePort", 1, 65535)
	s.HealthCheckNodePort = int32(v)
}

func (w *walker) affinity(s *model.Service, spec *node) {
	switch a := w.strAt(spec, at("spec"), "sessionAffinity"); a {
	case "", "None":
	case "ClientIP":
		s.SessionAffinityClientIP = true
	default:
		w.errorf(at("spec.sessionAffinity"), "unknown session affinity %q (want None or ClientIP)", a)
	}
	cfg := w.mapping(spec, at("spec"), "sessionAffinityConfig")
	ip := w.mapping(cfg, at("spec.sessionAffinityConfig"), "clientIP")
	t, ok := w.integer(ip, at("spec.sessionAffinityConfig.clientIP"), "timeoutSeconds", 1, 86400)
	if !ok {
		t = defaultAffinityTimeout
	}
	if s.SessionAffinityClientIP {
		s.AffinityTimeoutSeconds = int32(t)
	}
}

func (w *walker) loadBalancerStatus(s *model.Service, n *node) {
	status := w.mapping(n, fieldPath{}, "status")
	lb := w.mapping(status, at("status"), "loadBalancer")
	w.items(lb, at("status.loadBalancer"), "ingress", func(in *node, path fieldPath) {
		ing := model.LoadBalancerIngress{
			Hostname: w.strAt(in, path, "hostname"),
			IPMode:   w.strAt(in, path, "ipMode"),
		}
		switch ing.IPMode {
		case "", "VIP", "Proxy":
		default:
			w.errorf(path.key("ipMode"), "unknown ipMode %q (want VIP or Proxy)", ing.IPMode)
		}
		if ip := w.strAt(in, path, "ip"); ip != "" {
			ing.IP, _ = w.addr(ip, path.key("ip"))
		}
		s.LoadBalancerIngress = append(s.LoadBalancerIngress, ing)
	})
}
