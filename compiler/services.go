package compiler

import (
	"net/netip"
	"sort"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

type builder struct {
	sm             *ir.ServiceMap
	slices         map[string][]*model.EndpointSlice
	totalEndpoints int
}

// slicesByService indexes the slices of one family by "namespace/service", each list
// sorted by slice name so that duplicate endpoints resolve the same way every run.
func slicesByService(slices []*model.EndpointSlice, family model.IPFamily) map[string][]*model.EndpointSlice {
	out := map[string][]*model.EndpointSlice{}
	for _, es := range slices {
		if es.AddressType != string(family) || es.Headless {
			continue
		}
		key := es.Namespace + "/" + es.ServiceName
		out[key] = append(out[key], es)
	}
	for _, list := range out {
		sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	return out
}

// clusterIPOf is the Service's ClusterIP of the family, invalid when it has none.
func clusterIPOf(s *model.Service, family model.IPFamily) netip.Addr {
	for _, a := range s.ClusterIPs {
		if model.FamilyOf(a) == family {
			return a
		}
	}
	return netip.Addr{}
}

func (b *builder) service(s *model.Service) {
	if !proxied(s) {
		return
	}
	family := b.sm.Family
	cip := clusterIPOf(s, family)
	if !cip.IsValid() {
		return
	}
	out := &ir.Service{Namespace: s.Namespace, Name: s.Name}
	for _, sp := range s.Ports {
		p := b.port(s, sp, cip)
		p.Endpoints = b.endpoints(s, sp)
		b.totalEndpoints += len(p.Endpoints)
		b.categorize(p)
		out.Ports = append(out.Ports, p)
	}
	b.sm.Services = append(b.sm.Services, out)
}

// port builds the frontends and policies of one service port, as upstream's
// newBaseServiceInfo does.
func (b *builder) port(s *model.Service, sp model.ServicePort, cip netip.Addr) *ir.Port {
	family := b.sm.Family
	p := &ir.Port{
		Name:      ir.PortName{Namespace: s.Namespace, Service: s.Name, Port: sp.Name},
		Protocol:  sp.Protocol,
		ClusterIP: cip,
		Port:      uint16(sp.Port),
		NodePort:  uint16(sp.NodePort),
	}
	for _, a := range s.ExternalIPs {
		if model.FamilyOf(a) == family && b.sm.Target.Layout.ExternalIPs {
			p.ExternalIPs = append(p.ExternalIPs, a)
		}
	}
	for _, ing := range s.LoadBalancerIngress {
		if ing.IP.IsValid() && (ing.IPMode == "" || ing.IPMode == "VIP") && model.FamilyOf(ing.IP) == family {
			p.LoadBalancerIPs = append(p.LoadBalancerIPs, ing.IP)
		}
	}
	for _, r := range s.LoadBalancerSourceRanges {
		if model.FamilyOf(r.Addr()) == family {
			p.SourceRanges = append(p.SourceRanges, r)
		}
	}
	p.ExternalPolicyLocal = s.ExternallyAccessible() && s.ExternalTrafficPolicy == model.PolicyLocal
	p.InternalPolicyLocal = s.InternalTrafficPolicy == model.PolicyLocal
	if s.Type == model.TypeLoadBalancer && p.ExternalPolicyLocal {
		p.HealthCheckNodePort = uint16(s.HealthCheckNodePort)
	}
	if s.SessionAffinityClientIP {
		p.AffinitySeconds = int(s.AffinityTimeoutSeconds)
	}
	return p
}

// endpoints collects the endpoints of one service port from its slices: ports match by
// name and protocol (a slice port without a name key never matches), only the first
// address of an endpoint counts, duplicates keep the first unless the later one is not
// terminating (v1.36 and later; before, unless the later one is on this node), and the
// result is sorted by its "IP:port" string.
func (b *builder) endpoints(s *model.Service, sp model.ServicePort) []ir.Endpoint {
	list := b.slices[s.Key()]
	n := 0
	for _, es := range list {
		n += len(es.Endpoints)
	}
	// Room for n IPv4 endpoints' strings ("10.128.1.1:8080"); IPv6 ones grow it.
	l := endpointList{eps: make([]ir.Endpoint, 0, n), text: make([]byte, 0, 16*n), spans: make([][2]int32, 0, n),
		preferLocal: !b.sm.Target.Layout.PreferNonTerminating}
	for _, es := range list {
		port := slicePort(es, sp)
		if port == 0 {
			continue
		}
		for _, e := range es.Endpoints {
			if len(e.Addresses) != 0 {
				l.add(b.endpoint(e, port))
			}
		}
	}
	sort.Sort(&l)
	return l.eps
}

// endpointList gathers a port's endpoints without duplicates and sorts them by their
// "IP:port" strings, which are written once, side by side in one buffer: at 10,000
// Services this is a third of what compiling allocates.
type endpointList struct {
	eps   []ir.Endpoint
	text  []byte     // the "IP:port" strings
	spans [][2]int32 // where eps[i]'s string is in text
	seen  map[ipPort]int
	// preferLocal: a duplicate on this node replaces the one held (kube-proxy before
	// v1.36); otherwise a duplicate that is not terminating does.
	preferLocal bool
}

type ipPort struct {
	ip   netip.Addr
	port uint16
}

// indexFrom is how many endpoints a port has before a map finds duplicates (below
// it, comparing with each is faster).
const indexFrom = 16

// add appends ep, or replaces the endpoint with its address and port when ep wins
// (see preferLocal).
func (l *endpointList) add(ep ir.Endpoint) {
	key := ipPort{ep.IP, ep.Port}
	if i := l.find(key); i >= 0 {
		if l.preferLocal && ep.Local || !l.preferLocal && !ep.Terminating {
			l.eps[i] = ep
		}
		return
	}
	if l.seen != nil {
		l.seen[key] = len(l.eps)
	}
	start := len(l.text)
	l.text = ep.AppendTo(l.text)
	l.spans = append(l.spans, [2]int32{int32(start), int32(len(l.text))})
	l.eps = append(l.eps, ep)
	if len(l.eps) == indexFrom {
		l.seen = make(map[ipPort]int, cap(l.eps))
		for i, e := range l.eps {
			l.seen[ipPort{e.IP, e.Port}] = i
		}
	}
}

func (l *endpointList) find(key ipPort) int {
	if l.seen != nil {
		if i, ok := l.seen[key]; ok {
			return i
		}
		return -1
	}
	for i := range l.eps {
		if l.eps[i].IP == key.ip && l.eps[i].Port == key.port {
			return i
		}
	}
	return -1
}

func (l *endpointList) Len() int { return len(l.eps) }
func (l *endpointList) Less(i, j int) bool {
	a, b := l.spans[i], l.spans[j]
	return string(l.text[a[0]:a[1]]) < string(l.text[b[0]:b[1]])
}
func (l *endpointList) Swap(i, j int) {
	l.eps[i], l.eps[j] = l.eps[j], l.eps[i]
	l.spans[i], l.spans[j] = l.spans[j], l.spans[i]
}

func slicePort(es *model.EndpointSlice, sp model.ServicePort) uint16 {
	for _, p := range es.Ports {
		if p.Name == sp.Name && p.Protocol == sp.Protocol && p.Port != 0 {
			return uint16(p.Port)
		}
	}
	return 0
}

func (b *builder) endpoint(e model.Endpoint, port uint16) ir.Endpoint {
	truthy := func(v *bool, def bool) bool {
		if v == nil {
			return def
		}
		return *v
	}
	return ir.Endpoint{
		IP:          e.Addresses[0],
		Port:        port,
		Ready:       truthy(e.Ready, true),
		Serving:     truthy(e.Serving, true),
		Terminating: truthy(e.Terminating, false),
		Local:       e.NodeName != "" && e.NodeName == b.sm.Node.Name,
		NodeName:    e.NodeName,
		Zone:        e.Zone,
		Hints:       e.Hints,
	}
}
