package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// Verdict is what became of one Pod of a Service's namespace for one service port:
// Endpoint is "IP:port" when the rules send traffic to it; Why says why they do not
// (or, for an endpoint, which traffic does not reach it). Both come from the same
// decisions the EndpointSlice controller (excluded, targetPortOn) and kube-proxy
// (the service map's Cluster and Local sets) make.
type Verdict struct {
	Pod      *model.Pod
	Endpoint string
	Why      string
}

// PortExplanation is one port of the Service: its place in the service map (nil
// when the port has no rules in the map's family or on this node) and a verdict for
// each Pod of the namespace, in name order.
type PortExplanation struct {
	Port     model.ServicePort
	Rules    *ir.Port
	Verdicts []Verdict
}

// Explain tells, for the Service key ("namespace/name") of a resolved cluster and
// each of its ports (or only the port named port, or numbered so), why each Pod of
// its namespace is or is not an endpoint in sm, the service map compiled from it.
func Explain(c *model.Cluster, sm *ir.ServiceMap, key, port string) (*model.Service, []PortExplanation, error) {
	var svc *model.Service
	for _, s := range c.Services {
		if s.Key() == key {
			svc = s
		}
	}
	if svc == nil {
		return nil, nil, fmt.Errorf("no Service %s in the input", key)
	}
	var out []PortExplanation
	for _, sp := range svc.Ports {
		if port != "" && sp.Name != port && itoa(int(sp.Port)) != port {
			continue
		}
		pe := PortExplanation{Port: sp, Rules: rulesOf(sm, svc, sp)}
		for _, pod := range c.Pods {
			if pod.Namespace == svc.Namespace {
				pe.Verdicts = append(pe.Verdicts, verdict(svc, sp, pe.Rules, sm, pod))
			}
		}
		out = append(out, pe)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("Service %s has no port %q", key, port)
	}
	return svc, out, nil
}

// rulesOf finds a service port in the map.
func rulesOf(sm *ir.ServiceMap, s *model.Service, sp model.ServicePort) *ir.Port {
	is := sm.Service(s.Key())
	if is == nil {
		return nil
	}
	for _, p := range is.Ports {
		if p.Name.Port == sp.Name && p.Protocol == sp.Protocol {
			return p
		}
	}
	return nil
}

// verdict decides one Pod: first as the EndpointSlice controller would (selector,
// phase, address, port), then as kube-proxy on this node (family, readiness, traffic
// policy, topology).
func verdict(s *model.Service, sp model.ServicePort, rules *ir.Port, sm *ir.ServiceMap, pod *model.Pod) Verdict {
	v := Verdict{Pod: pod}
	switch {
	case s.Selector == nil:
		v.Why = "the Service has no selector: its endpoints are its own EndpointSlices or Endpoints, not Pods"
		return v
	case len(s.Selector) == 0:
		v.Why = "the Service's selector is empty, which selects no Pod"
		return v
	}
	if v.Why = excluded(s, pod); v.Why != "" {
		return v
	}
	target := targetPortOn(sp, pod)
	if target == 0 {
		v.Why = fmt.Sprintf("no %s container port named %q", sp.Protocol, sp.TargetPort.Str)
		return v
	}
	var ip string
	for _, a := range pod.PodIPs {
		if model.FamilyOf(a) == sm.Family {
			ip = ir.Endpoint{IP: a, Port: uint16(target)}.String()
		}
	}
	switch {
	case ip == "":
		v.Why = fmt.Sprintf("other family: no %s address (the rules are for %s)", sm.Family, sm.Family)
		return v
	case rules == nil:
		v.Why = "the port has no rules on this node (" + noRules(s) + ")"
		return v
	}
	i := -1
	for j, e := range rules.Endpoints {
		if e.String() == ip {
			i = j
		}
	}
	if i < 0 {
		v.Why = "not among the port's endpoints (the Service has EndpointSlices of its own)"
		return v
	}
	return placeVerdict(v, rules, i, sm)
}

// noRules says why a Service port has no rules.
func noRules(s *model.Service) string {
	switch {
	case s.Headless:
		return "headless: clusterIP None"
	case s.Type == model.TypeExternalName:
		return "type ExternalName"
	case s.Labels[model.LabelServiceProxyName] != "":
		return "labelled " + model.LabelServiceProxyName + ": another proxy serves it"
	}
	return "no frontend of this family"
}

// placeVerdict decides an endpoint of the service map: which traffic reaches it.
func placeVerdict(v Verdict, rules *ir.Port, i int, sm *ir.ServiceMap) Verdict {
	e := rules.Endpoints[i]
	inCluster, inLocal := slices.Contains(rules.Cluster, i), slices.Contains(rules.Local, i)
	switch {
	case !e.Serving && !e.Ready:
		if e.Terminating {
			v.Why = "terminating, and no longer serving"
		} else {
			v.Why = "not Ready"
		}
		return v
	case !inCluster && !inLocal:
		switch {
		case e.Terminating:
			v.Why = "terminating: used only while the port has no ready endpoint"
		case rules.UsesLocal() && !rules.UsesCluster() && !e.Local:
			v.Why = fmt.Sprintf("other node under a Local policy: on %s, and internalTrafficPolicy Local sends %s's traffic only to its own endpoints", orNone(e.NodeName), sm.Node.Name)
		case rules.UsesCluster():
			v.Why = fmt.Sprintf("topology: hinted for zones %s, and %s is in zone %s", strings.Join(e.ZoneHints(), ","), sm.Node.Name, orNone(sm.Node.Zone))
		default:
			v.Why = "not used on this node"
		}
		return v
	}
	v.Endpoint = e.String()
	var notes []string
	if e.Terminating {
		notes = append(notes, "terminating, used while the port has no ready endpoint")
	}
	if rules.UsesLocal() && !inLocal {
		policy := "externalTrafficPolicy"
		if rules.InternalPolicyLocal {
			policy = "internalTrafficPolicy"
		}
		notes = append(notes, fmt.Sprintf("other node under a Local policy: %s Local traffic on %s does not reach it (it is on %s)", policy, sm.Node.Name, orNone(e.NodeName)))
	}
	if rules.UsesCluster() && !inCluster && inLocal {
		notes = append(notes, "topology: Cluster traffic does not reach it (hints)")
	}
	v.Why = strings.Join(notes, "; ")
	return v
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
