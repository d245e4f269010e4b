package compiler

import (
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

type builder struct {
	sm             *ir.ServiceMap
	slices         map[string][]*model.EndpointSlice
	sameNodeGate   bool
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
		if model.FamilyOf(a) == family {
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
// terminating, and the result is sorted by its "IP:port" string.
func (b *builder) endpoints(s *model.Service, sp model.ServicePort) []ir.Endpoint {
	list := b.slices[s.Key()]
	n := 0
	for _, es := range list {
		n += len(es.Endpoints)
	}
	out := make([]ir.Endpoint, 0, n)
	keys := make([]string, 0, n) // out[i].String(), made once
	var byKey map[string]int
	for _, es := range list {
		port := slicePort(es, sp)
		if port == 0 {
			continue
		}
		if byKey == nil {
			byKey = make(map[string]int, len(es.Endpoints))
		}
		for _, e := range es.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			ep := b.endpoint(e, port)
			key := ep.String()
			if i, dup := byKey[key]; dup {
				if !ep.Terminating {
					out[i] = ep
				}
				continue
			}
			byKey[key] = len(out)
			out = append(out, ep)
			keys = append(keys, key)
		}
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(keys[i], keys[j]) })
	sorted := make([]ir.Endpoint, len(out))
	for i, j := range order {
		sorted[i] = out[j]
	}
	return sorted
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
		ZoneHints:   e.ZoneHints,
		NodeHints:   e.NodeHints,
	}
}
