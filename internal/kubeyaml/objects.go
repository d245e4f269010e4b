package kubeyaml

import (
	"github.com/svcgen/svcgen/model"
)

type servicePortDoc struct {
	Name        string `yaml:"name,omitempty"`
	Protocol    string `yaml:"protocol"`
	AppProtocol string `yaml:"appProtocol,omitempty"`
	Port        int32  `yaml:"port"`
	TargetPort  any    `yaml:"targetPort,omitempty"`
	NodePort    int32  `yaml:"nodePort,omitempty"`
}

type affinityConfigDoc struct {
	ClientIP struct {
		TimeoutSeconds int32 `yaml:"timeoutSeconds"`
	} `yaml:"clientIP"`
}

type serviceSpecDoc struct {
	Ports                         []servicePortDoc   `yaml:"ports,omitempty"`
	Selector                      *map[string]string `yaml:"selector,omitempty"`
	ClusterIP                     string             `yaml:"clusterIP,omitempty"`
	ClusterIPs                    []string           `yaml:"clusterIPs,omitempty"`
	Type                          string             `yaml:"type,omitempty"`
	ExternalIPs                   []string           `yaml:"externalIPs,omitempty"`
	SessionAffinity               string             `yaml:"sessionAffinity,omitempty"`
	LoadBalancerSourceRanges      []string           `yaml:"loadBalancerSourceRanges,omitempty"`
	ExternalName                  string             `yaml:"externalName,omitempty"`
	ExternalTrafficPolicy         string             `yaml:"externalTrafficPolicy,omitempty"`
	HealthCheckNodePort           int32              `yaml:"healthCheckNodePort,omitempty"`
	PublishNotReadyAddresses      bool               `yaml:"publishNotReadyAddresses,omitempty"`
	SessionAffinityConfig         *affinityConfigDoc `yaml:"sessionAffinityConfig,omitempty"`
	IPFamilies                    []string           `yaml:"ipFamilies,omitempty"`
	IPFamilyPolicy                string             `yaml:"ipFamilyPolicy,omitempty"`
	AllocateLoadBalancerNodePorts *bool              `yaml:"allocateLoadBalancerNodePorts,omitempty"`
	InternalTrafficPolicy         string             `yaml:"internalTrafficPolicy,omitempty"`
	TrafficDistribution           string             `yaml:"trafficDistribution,omitempty"`
}

type ingressDoc struct {
	IP       string `yaml:"ip,omitempty"`
	Hostname string `yaml:"hostname,omitempty"`
	IPMode   string `yaml:"ipMode,omitempty"`
}

type serviceDoc struct {
	typeMeta `yaml:",inline"`
	Metadata objectMeta     `yaml:"metadata"`
	Spec     serviceSpecDoc `yaml:"spec"`
	Status   *struct {
		LoadBalancer struct {
			Ingress []ingressDoc `yaml:"ingress"`
		} `yaml:"loadBalancer"`
	} `yaml:"status,omitempty"`
}

func service(s *model.Service) serviceDoc {
	d := serviceDoc{
		typeMeta: typeMeta{"v1", "Service"},
		Metadata: objectMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels},
	}
	sp := &d.Spec
	for _, p := range s.Ports {
		sp.Ports = append(sp.Ports, servicePort(p))
	}
	if s.Selector != nil {
		sel := s.Selector
		sp.Selector = &sel
	}
	sp.ClusterIPs = strs(s.ClusterIPs)
	switch {
	case s.Headless:
		sp.ClusterIP = "None"
	case len(sp.ClusterIPs) > 0:
		sp.ClusterIP = sp.ClusterIPs[0]
	}
	sp.Type = string(s.Type)
	sp.ExternalIPs = strs(s.ExternalIPs)
	if s.SessionAffinityClientIP {
		sp.SessionAffinity = "ClientIP"
		sp.SessionAffinityConfig = &affinityConfigDoc{}
		sp.SessionAffinityConfig.ClientIP.TimeoutSeconds = s.AffinityTimeoutSeconds
	}
	sp.LoadBalancerSourceRanges = strs(s.LoadBalancerSourceRanges)
	sp.ExternalName = s.ExternalName
	sp.ExternalTrafficPolicy = string(s.ExternalTrafficPolicy)
	sp.HealthCheckNodePort = s.HealthCheckNodePort
	sp.PublishNotReadyAddresses = s.PublishNotReadyAddresses
	sp.IPFamilies = ipFamilies(s)
	sp.IPFamilyPolicy = string(s.IPFamilyPolicy)
	sp.AllocateLoadBalancerNodePorts = s.AllocateLoadBalancerNodePorts
	sp.InternalTrafficPolicy = string(s.InternalTrafficPolicy)
	sp.TrafficDistribution = s.TrafficDistribution
	if len(s.LoadBalancerIngress) > 0 {
		d.Status = &struct {
			LoadBalancer struct {
				Ingress []ingressDoc `yaml:"ingress"`
			} `yaml:"loadBalancer"`
		}{}
		for _, in := range s.LoadBalancerIngress {
			d.Status.LoadBalancer.Ingress = append(d.Status.LoadBalancer.Ingress, ingressDoc{addrString(in.IP), in.Hostname, in.IPMode})
		}
	}
	return d
}

func servicePort(p model.ServicePort) servicePortDoc {
	out := servicePortDoc{Name: p.Name, Protocol: string(p.Protocol), AppProtocol: p.AppProtocol, Port: p.Port, NodePort: p.NodePort}
	if p.Protocol == "" {
		out.Protocol = string(model.TCP)
	}
	switch {
	case p.TargetPort.Str != "":
		out.TargetPort = p.TargetPort.Str
	case p.TargetPort.Int != 0:
		out.TargetPort = p.TargetPort.Int
	}
	return out
}

// ipFamilies is spec.ipFamilies as written, else as the API server sets it: the
// family of each ClusterIP, in order. kube-proxy picks a family's ClusterIP through
// this list when it is set.
func ipFamilies(s *model.Service) []string {
	var out []string
	for _, f := range s.IPFamilies {
		out = append(out, string(f))
	}
	if len(out) > 0 {
		return out
	}
	for _, ip := range s.ClusterIPs {
		out = append(out, string(model.FamilyOf(ip)))
	}
	return out
}

type endpointPortDoc struct {
	Name     *string `yaml:"name"`
	Protocol string  `yaml:"protocol"`
	Port     *int32  `yaml:"port,omitempty"`
}

type conditionsDoc struct {
	Ready       *bool `yaml:"ready,omitempty"`
	Serving     *bool `yaml:"serving,omitempty"`
	Terminating *bool `yaml:"terminating,omitempty"`
}

type hintDoc struct {
	Name string `yaml:"name"`
}

type hintsDoc struct {
	ForZones []hintDoc `yaml:"forZones,omitempty"`
	ForNodes []hintDoc `yaml:"forNodes,omitempty"`
}

type endpointDoc struct {
	Addresses  []string       `yaml:"addresses"`
	Conditions *conditionsDoc `yaml:"conditions,omitempty"`
	NodeName   string         `yaml:"nodeName,omitempty"`
	Zone       string         `yaml:"zone,omitempty"`
	Hints      *hintsDoc      `yaml:"hints,omitempty"`
}

type endpointSliceDoc struct {
	typeMeta    `yaml:",inline"`
	Metadata    objectMeta        `yaml:"metadata"`
	AddressType string            `yaml:"addressType"`
	Endpoints   []endpointDoc     `yaml:"endpoints"`
	Ports       []endpointPortDoc `yaml:"ports,omitempty"`
}

func endpointSlice(es *model.EndpointSlice) endpointSliceDoc {
	d := endpointSliceDoc{
		typeMeta:    typeMeta{"discovery.k8s.io/v1", "EndpointSlice"},
		Metadata:    objectMeta{Name: es.Name, Namespace: es.Namespace, Labels: sliceLabels(es)},
		AddressType: es.AddressType,
		Endpoints:   []endpointDoc{},
	}
	for _, e := range es.Endpoints {
		d.Endpoints = append(d.Endpoints, endpoint(e))
	}
	for _, p := range es.Ports {
		out := endpointPortDoc{Name: &p.Name, Protocol: string(p.Protocol)}
		if out.Protocol == "" {
			out.Protocol = string(model.TCP)
		}
		if p.Port != 0 {
			out.Port = &p.Port
		}
		d.Ports = append(d.Ports, out)
	}
	return d
}

// sliceLabels are the two labels the model keeps: the Service the slice belongs to,
// and the headless mark kube-proxy's informer filters on.
func sliceLabels(es *model.EndpointSlice) map[string]string {
	labels := map[string]string{}
	if es.ServiceName != "" {
		labels[model.LabelServiceName] = es.ServiceName
	}
	if es.Headless {
		labels[model.LabelHeadless] = ""
	}
	return labels
}

func endpoint(e model.Endpoint) endpointDoc {
	out := endpointDoc{Addresses: strs(e.Addresses), NodeName: e.NodeName, Zone: e.Zone}
	if e.Ready != nil || e.Serving != nil || e.Terminating != nil {
		out.Conditions = &conditionsDoc{e.Ready, e.Serving, e.Terminating}
	}
	if e.Hints != nil {
		out.Hints = &hintsDoc{}
		for _, z := range e.Hints.Zones {
			out.Hints.ForZones = append(out.Hints.ForZones, hintDoc{z})
		}
		for _, n := range e.Hints.Nodes {
			out.Hints.ForNodes = append(out.Hints.ForNodes, hintDoc{n})
		}
	}
	return out
}
