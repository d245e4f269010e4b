package compiler

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/model"
)

// buildEndpoints gives every selector Service without an EndpointSlice the slices the
// EndpointSlice controller would write, from a v1 Endpoints object of the same name if
// there is one (as the mirroring controller would), else from the Pods its selector
// matches.
func (r *resolver) buildEndpoints() {
	hasSlice := map[string]bool{}
	for _, es := range r.out.Slices {
		hasSlice[es.Namespace+"/"+es.ServiceName] = true
	}
	endpoints := map[string]*model.Endpoints{}
	for _, e := range r.out.Endpoints {
		endpoints[e.Namespace+"/"+e.Name] = e
	}
	nodes := nodesByName(r.out.Nodes)
	for _, s := range r.out.Services {
		if !hasSlice[s.Key()] {
			r.out.Slices = append(r.out.Slices, r.generatedSlices(s, endpoints[s.Key()], nodes)...)
		}
	}
}

func nodesByName(list []*model.Node) map[string]*model.Node {
	nodes := make(map[string]*model.Node, len(list))
	for _, n := range list {
		nodes[n.Name] = n
	}
	return nodes
}

// generatedSlices are the slices the controllers make for a proxied Service that has
// no EndpointSlice of its own: mirrored from its v1 Endpoints object e if there is one,
// else from the Pods its selector matches (r.out.Pods).
func (r *resolver) generatedSlices(s *model.Service, e *model.Endpoints, nodes map[string]*model.Node) []*model.EndpointSlice {
	switch {
	case !proxied(s):
		return nil
	case e != nil:
		return mirrorEndpoints(e)
	case len(s.Selector) > 0:
		return r.slicesFromPods(s, nodes)
	}
	return nil
}

// mirrorEndpoints turns a v1 Endpoints object into slices, one per subset and family.
func mirrorEndpoints(e *model.Endpoints) []*model.EndpointSlice {
	var out []*model.EndpointSlice
	yes, no := true, false
	for i, sub := range e.Subsets {
		for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
			es := &model.EndpointSlice{
				Origin: e.Origin, Namespace: e.Namespace, ServiceName: e.Name,
				Name:        fmt.Sprintf("%s-mirror-%d-%s", e.Name, i, strings.ToLower(string(fam))),
				AddressType: string(fam), Ports: sub.Ports, Generated: "Endpoints",
			}
			add := func(addrs []model.EndpointAddress, ready *bool) {
				for _, a := range addrs {
					if model.FamilyOf(a.IP) == fam {
						es.Endpoints = append(es.Endpoints, model.Endpoint{
							Addresses: []netip.Addr{a.IP}, Ready: ready, NodeName: a.NodeName,
						})
					}
				}
			}
			add(sub.Addresses, &yes)
			add(sub.NotReadyAddresses, &no)
			if len(es.Endpoints) > 0 {
				out = append(out, es)
			}
		}
	}
	return out
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// podEndpoint is one pod's contribution: its endpoint conditions and the port number
// each service port resolves to on it (0: the pod has no such port).
type podEndpoint struct {
	pod   *model.Pod
	ports []int32
}

// slicesFromPods builds the slices for one Service: pods that resolve the service ports
// to the same numbers share a slice, as the EndpointSlice controller groups them.
func (r *resolver) slicesFromPods(s *model.Service, nodes map[string]*model.Node) []*model.EndpointSlice {
	groups := map[string][]podEndpoint{}
	var keys []string
	for _, pod := range r.out.Pods {
		if pod.Namespace != s.Namespace || excluded(s, pod) != "" {
			continue
		}
		pe := podEndpoint{pod: pod, ports: make([]int32, len(s.Ports))}
		var key strings.Builder
		for i, sp := range s.Ports {
			pe.ports[i] = targetPortOn(sp, pod)
			fmt.Fprintf(&key, "%d,", pe.ports[i])
		}
		k := key.String()
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], pe)
	}
	sort.Strings(keys)
	var out []*model.EndpointSlice
	for gi, k := range keys {
		for _, fam := range []model.IPFamily{model.IPv4, model.IPv6} {
			out = append(out, r.podSlices(s, groups[k], fam, gi, nodes)...)
		}
	}
	// A Service without endpoints is told once, with the reason: a named target port
	// no Pod has (per port, at the port), else why no Pod is selected or has an address.
	r.warnUnresolvedPorts(s, groups)
	if why := noEndpoints(s, r.out.Pods, out); why != "" && len(groups) == 0 {
		r.warns.Add(s.Origin, "spec.selector", "the Service has no endpoints: %s (svcgen explain %s tells each Pod's reason)", why, s.Key())
	}
	return out
}

// maxEndpointsPerSlice is the EndpointSlice controller's --max-endpoints-per-slice
// default: a slice holds at most 100 endpoints.
const maxEndpointsPerSlice = 100

// excluded says why the EndpointSlice controller leaves out a Pod of the Service's
// namespace: its selector does not match (naming the label), the Pod has ended, or
// it has no address yet; "" when the Pod is an endpoint candidate.
func excluded(s *model.Service, pod *model.Pod) string {
	for _, k := range slices.Sorted(maps.Keys(s.Selector)) {
		want := s.Selector[k]
		switch got, ok := pod.Labels[k]; {
		case !ok:
			return fmt.Sprintf("not selected: no label %s (the selector wants %s=%s)", k, k, want)
		case got != want:
			return fmt.Sprintf("not selected: label %s=%s (the selector wants %s=%s)", k, got, k, want)
		}
	}
	switch {
	case pod.Phase == "Succeeded" || pod.Phase == "Failed":
		return "phase " + pod.Phase + ": an ended Pod is no endpoint"
	case len(pod.PodIPs) == 0 && pod.Pending != "":
		return "no Pod IP: " + pod.Pending
	case len(pod.PodIPs) == 0:
		return "no Pod IP (status.podIPs)"
	}
	return ""
}

// noEndpoints says why a selector Service got no endpoint from Pods ("" when it got
// one): no Pod selected, or every selected Pod's reason.
func noEndpoints(s *model.Service, pods []*model.Pod, slices []*model.EndpointSlice) string {
	for _, es := range slices {
		if len(es.Endpoints) > 0 {
			return ""
		}
	}
	var inNamespace, selected int
	var first string
	for _, pod := range pods {
		if pod.Namespace != s.Namespace {
			continue
		}
		inNamespace++
		why := excluded(s, pod)
		if strings.HasPrefix(why, "not selected") {
			continue
		}
		selected++
		if why == "" {
			why = "no container port for any of the Service's target ports"
			for _, sp := range s.Ports {
				if sp.TargetPort.Str != "" {
					why = fmt.Sprintf("no %s container port named %q", sp.Protocol, sp.TargetPort.Str)
					break
				}
			}
		}
		if first == "" {
			first = fmt.Sprintf("Pod %s/%s: %s", pod.Namespace, pod.Name, why)
		}
	}
	if selected == 0 {
		return fmt.Sprintf("its selector %s matches none of the %d Pods of namespace %s", model.FormatSelector(s.Selector), inNamespace, s.Namespace)
	}
	if selected == 1 {
		return fmt.Sprintf("the one Pod its selector matches is no endpoint (%s)", first)
	}
	return fmt.Sprintf("%d Pods match its selector and none is an endpoint (%s)", selected, first)
}

// podSlices are the slices of one group of Pods (whose ports resolve alike) in one
// family: at most maxEndpointsPerSlice endpoints each, as the controller packs them.
func (r *resolver) podSlices(s *model.Service, group []podEndpoint, fam model.IPFamily, gi int, nodes map[string]*model.Node) []*model.EndpointSlice {
	es := r.podSlice(s, group, fam, gi, nodes)
	if es == nil {
		return nil
	}
	if len(es.Endpoints) <= maxEndpointsPerSlice {
		return []*model.EndpointSlice{es}
	}
	var out []*model.EndpointSlice
	for i := 0; i < len(es.Endpoints); i += maxEndpointsPerSlice {
		part := *es
		part.Name = fmt.Sprintf("%s-%d", es.Name, i/maxEndpointsPerSlice)
		part.Endpoints = es.Endpoints[i:min(i+maxEndpointsPerSlice, len(es.Endpoints))]
		out = append(out, &part)
	}
	return out
}

func (r *resolver) podSlice(s *model.Service, group []podEndpoint, fam model.IPFamily, gi int, nodes map[string]*model.Node) *model.EndpointSlice {
	es := &model.EndpointSlice{
		Origin: s.Origin, Namespace: s.Namespace, ServiceName: s.Name,
		Name:        fmt.Sprintf("%s-pods-%d-%s", s.Name, gi, strings.ToLower(string(fam))),
		AddressType: string(fam), Generated: "Pods",
	}
	for i, sp := range s.Ports {
		if group[0].ports[i] == 0 {
			continue // no pod of this group has the named port
		}
		name := sp.Name
		es.Ports = append(es.Ports, model.EndpointPort{Name: name, Protocol: sp.Protocol, Port: group[0].ports[i]})
	}
	if len(es.Ports) == 0 {
		return nil
	}
	for _, pe := range group {
		for _, ip := range pe.pod.PodIPs {
			if model.FamilyOf(ip) == fam {
				es.Endpoints = append(es.Endpoints, podToEndpoint(s, pe.pod, ip, nodes))
				break
			}
		}
	}
	if len(es.Endpoints) == 0 {
		return nil
	}
	return es
}

// podToEndpoint sets the conditions the way the EndpointSlice controller does:
// serving follows the Ready condition, ready also needs the pod not to be terminating.
func podToEndpoint(s *model.Service, pod *model.Pod, ip netip.Addr, nodes map[string]*model.Node) model.Endpoint {
	serving := pod.Ready || s.PublishNotReadyAddresses
	ready := serving && !pod.Terminating
	terminating := pod.Terminating
	ep := model.Endpoint{
		Addresses: []netip.Addr{ip}, Ready: &ready, Serving: &serving, Terminating: &terminating,
		NodeName: pod.NodeName,
	}
	if n := nodes[pod.NodeName]; n != nil {
		ep.Zone = n.Zone()
	}
	if ep.Zone != "" && preferClose(s) {
		// The controller's trafficdist heuristic: each endpoint is hinted for its own
		// zone.
		ep.Hints = &model.EndpointHints{Zones: []string{ep.Zone}}
	}
	return ep
}

// targetPortOn resolves a service port's targetPort on a pod: a number as written, a
// name through the pod's container ports of the same protocol; 0 when the pod has no
// port of that name.
func targetPortOn(sp model.ServicePort, pod *model.Pod) int32 {
	if sp.TargetPort.Str == "" {
		if sp.TargetPort.Int != 0 {
			return sp.TargetPort.Int
		}
		return sp.Port
	}
	for _, cp := range pod.Ports {
		if cp.Name == sp.TargetPort.Str && cp.Protocol == sp.Protocol {
			return cp.ContainerPort
		}
	}
	return 0
}

// warnUnresolvedPorts warns about a named targetPort that none of the selected pods
// defines: the port then has no endpoints.
func (r *resolver) warnUnresolvedPorts(s *model.Service, groups map[string][]podEndpoint) {
	if len(groups) == 0 {
		return
	}
	for i, sp := range s.Ports {
		found := false
		for _, g := range groups {
			found = found || g[0].ports[i] != 0
		}
		if !found {
			r.warns.Add(s.Origin, fmt.Sprintf("spec.ports[%d].targetPort", i),
				"no pod the Service selects has a %s container port named %q, so this port has no endpoints", sp.Protocol, sp.TargetPort.Str)
		}
	}
}

// preferClose reports topology-aware routing asked through spec.trafficDistribution:
// PreferClose (and PreferSameZone, its newer name) make the controller hint each
// endpoint for its own zone.
func preferClose(s *model.Service) bool {
	return s.TrafficDistribution == "PreferClose" || s.TrafficDistribution == "PreferSameZone"
}
