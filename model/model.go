// Package model holds the Kubernetes objects svcgen reads, as plain values.
//
// The loader turns manifests into these types and remembers where each object came
// from (Origin), so every later stage can name the file, document and field of a problem.
// Addresses are netip values, protocols and policies are typed strings spelled as
// Kubernetes spells them, and nothing here knows about iptables, nftables or IPVS.
package model

import (
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is a Service or endpoint port protocol, spelled as Kubernetes spells it.
type Protocol string

// The protocols kube-proxy programs.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Lower is the protocol as iptables, nft and ipset write it ("tcp").
func (p Protocol) Lower() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return strings.ToLower(string(p))
}

// IPFamily is IPv4 or IPv6.
type IPFamily string

// The two IP families.
const (
	IPv4 IPFamily = "IPv4"
	IPv6 IPFamily = "IPv6"
)

// Families are both IP families in svcgen's fixed order: a dual-stack run writes,
// applies and reports IPv4 first. (kube-proxy's primary family matters for which
// node IP it logs and which family's nodePortAddresses it warns about, never for
// what either proxier programs.)
var Families = []IPFamily{IPv4, IPv6}

// Suffix is the family's short name in file names: "v4" or "v6" (compile -o
// PREFIX writes PREFIX.v4 and PREFIX.v6 for a dual-stack run).
func (f IPFamily) Suffix() string {
	if f == IPv6 {
		return "v6"
	}
	return "v4"
}

// IPFamilyPolicy is spec.ipFamilyPolicy of a Service; empty when unset (the API
// server's default: SingleStack, or RequireDualStack for a headless Service without
// a selector).
type IPFamilyPolicy string

// The Service IP family policies.
const (
	SingleStack      IPFamilyPolicy = "SingleStack"
	PreferDualStack  IPFamilyPolicy = "PreferDualStack"
	RequireDualStack IPFamilyPolicy = "RequireDualStack"
)

// FamilyOf is the family of an address.
func FamilyOf(a netip.Addr) IPFamily {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// ServiceType is spec.type of a Service. The empty type is kept as written: upstream
// does not treat an unset type as ClusterIP when it decides external accessibility.
type ServiceType string

// Service types.
const (
	TypeClusterIP    ServiceType = "ClusterIP"
	TypeNodePort     ServiceType = "NodePort"
	TypeLoadBalancer ServiceType = "LoadBalancer"
	TypeExternalName ServiceType = "ExternalName"
)

// TrafficPolicy is spec.externalTrafficPolicy or spec.internalTrafficPolicy.
type TrafficPolicy string

// Traffic policies.
const (
	PolicyCluster TrafficPolicy = "Cluster"
	PolicyLocal   TrafficPolicy = "Local"
)

// Origin says where an object came from: "svc.yaml: document 2 (Service default/web)".
// Item is the path inside a kind: List ("items[3]"), empty otherwise.
type Origin struct {
	File      string
	Doc       int
	Item      string
	Kind      string
	Namespace string
	Name      string
}

func (o Origin) String() string {
	var b strings.Builder
	b.WriteString(o.File)
	if o.Doc == 0 {
		return b.String() // a file that is not manifests (a lock file)
	}
	b.WriteString(": document ")
	b.WriteString(strconv.Itoa(o.Doc))
	if o.Kind != "" {
		b.WriteString(" (")
		b.WriteString(o.Kind)
		if o.Name != "" {
			b.WriteByte(' ')
			if o.Namespace != "" {
				b.WriteString(o.Namespace)
				b.WriteByte('/')
			}
			b.WriteString(o.Name)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Field joins Item with a field path so errors inside a List name the item too.
func (o Origin) Field(path string) string {
	if o.Item == "" {
		return path
	}
	if path == "" {
		return o.Item
	}
	return o.Item + "." + path
}

// IntOrString is a targetPort: a number or a container port name.
type IntOrString struct {
	Int int32
	Str string
}

// IsZero reports an unset targetPort.
func (v IntOrString) IsZero() bool { return v.Int == 0 && v.Str == "" }

func (v IntOrString) String() string {
	if v.Str != "" {
		return v.Str
	}
	return strconv.Itoa(int(v.Int))
}

// ServicePort is one entry of spec.ports.
type ServicePort struct {
	Name        string
	Protocol    Protocol
	Port        int32
	TargetPort  IntOrString
	NodePort    int32
	AppProtocol string
}

// LoadBalancerIngress is one entry of status.loadBalancer.ingress.
type LoadBalancerIngress struct {
	IP       netip.Addr // invalid for hostname-only entries
	Hostname string
	IPMode   string // "", "VIP" or "Proxy"
}

// Service is a v1 Service.
type Service struct {
	Origin
	Namespace, Name string
	Labels          map[string]string
	Type            ServiceType
	// ClusterIPs are spec.clusterIPs (or spec.clusterIP) in order; empty when the
	// Service has none yet (the resolver allocates one) or is headless.
	ClusterIPs []netip.Addr
	Headless   bool // clusterIP: None
	IPFamilies []IPFamily
	// IPFamilyPolicy is spec.ipFamilyPolicy, empty when unset.
	IPFamilyPolicy IPFamilyPolicy
	// Selector is spec.selector; nil when the Service has none (its endpoints are
	// managed by hand), which is different from an empty selector.
	Selector                      map[string]string
	Ports                         []ServicePort
	ExternalIPs                   []netip.Addr
	ExternalName                  string
	LoadBalancerSourceRanges      []netip.Prefix
	LoadBalancerIngress           []LoadBalancerIngress
	ExternalTrafficPolicy         TrafficPolicy
	InternalTrafficPolicy         TrafficPolicy
	HealthCheckNodePort           int32
	SessionAffinityClientIP       bool
	AffinityTimeoutSeconds        int32 // 10800 when ClientIP affinity has no timeout
	AllocateLoadBalancerNodePorts *bool
	PublishNotReadyAddresses      bool
	TrafficDistribution           string
}

// Key is "namespace/name".
func (s *Service) Key() string { return s.Namespace + "/" + s.Name }

// ExternallyAccessible is the API-level notion: LoadBalancer, NodePort, or ClusterIP
// with external IPs. An unset type does not count (upstream's ExternalPolicyLocal).
func (s *Service) ExternallyAccessible() bool {
	return s.Type == TypeLoadBalancer || s.Type == TypeNodePort ||
		(s.Type == TypeClusterIP && len(s.ExternalIPs) > 0)
}

// EndpointPort is one entry of an EndpointSlice's (or v1 Endpoints subset's) ports.
// An absent name is "", as the API server defaults it, so it matches the Service's
// unnamed port.
type EndpointPort struct {
	Name     string
	Protocol Protocol
	Port     int32 // 0 when absent
}

// Endpoint is one entry of an EndpointSlice's endpoints.
type Endpoint struct {
	Addresses   []netip.Addr
	Ready       *bool
	Serving     *bool
	Terminating *bool
	NodeName    string
	Zone        string
	// Hints are the topology hints; nil when the endpoint has none (most have none:
	// behind a pointer they cost 8 bytes, not 48, in each of a cluster's endpoints).
	Hints *EndpointHints
}

// EndpointHints are an endpoint's topology hints: the names of hints.forZones and
// hints.forNodes.
type EndpointHints struct {
	Zones, Nodes []string
}

// EndpointSlice is a discovery.k8s.io/v1 EndpointSlice, or one svcgen made from Pods or
// from v1 Endpoints (Generated says which; it is empty for slices read from manifests).
type EndpointSlice struct {
	Origin
	Namespace, Name string
	ServiceName     string // label kubernetes.io/service-name
	AddressType     string // IPv4, IPv6 or FQDN
	Ports           []EndpointPort
	Endpoints       []Endpoint
	Generated       string
	// Headless: labelled service.kubernetes.io/headless, which kube-proxy's informer
	// filters out.
	Headless bool
}

// EndpointAddress is an address of a v1 Endpoints subset.
type EndpointAddress struct {
	IP       netip.Addr
	NodeName string
}

// EndpointsSubset is one subset of a v1 Endpoints object.
type EndpointsSubset struct {
	Addresses         []EndpointAddress
	NotReadyAddresses []EndpointAddress
	Ports             []EndpointPort
}

// Endpoints is a v1 Endpoints object; svcgen uses it only for a Service that has no
// EndpointSlice, as the EndpointSlice mirroring controller would.
type Endpoints struct {
	Origin
	Namespace, Name string
	Subsets         []EndpointsSubset
}

// ContainerPort is a named or unnamed port of a container.
type ContainerPort struct {
	Name          string
	ContainerPort int32
	Protocol      Protocol
}

// Pod is a v1 Pod, reduced to what endpoint building needs.
type Pod struct {
	Origin
	Namespace, Name string
	Labels          map[string]string
	NodeName        string
	Hostname        string
	PodIPs          []netip.Addr
	Phase           string
	Ready           bool
	Terminating     bool // metadata.deletionTimestamp is set
	Ports           []ContainerPort
	// Owner is the Pod's controller (metadata.ownerReferences); zero when none.
	Owner OwnerRef
	// MadeBy is the workload that svcgen made the Pod from ("Deployment shop/web"),
	// empty for a Pod of the input.
	MadeBy string
	// Pending says why a Pod made from a workload has no address ("no Node fits
	// its placement"); empty otherwise.
	Pending string
}

// NodeAddress is an entry of a Node's status.addresses.
type NodeAddress struct {
	Type    string
	Address netip.Addr
}

// Node is a v1 Node.
type Node struct {
	Origin
	Name      string
	Labels    map[string]string
	Addresses []NodeAddress
	PodCIDRs  []netip.Prefix
	// KubeletVersion is status.nodeInfo.kubeletVersion ("v1.37.2"): kube-proxy runs
	// the kubelet's minor release, so it says which layout the node's rules have.
	KubeletVersion string
	// Unschedulable is spec.unschedulable; Taints are spec.taints: the scheduler
	// places no Pod on such a Node unless it tolerates the taints.
	Unschedulable bool
	Taints        []Taint
	// Made: svcgen made the Node (--nodes); the input had none.
	Made bool
}

// Zone is the node's topology.kubernetes.io/zone label.
func (n *Node) Zone() string { return n.Labels[LabelZone] }

// ServiceCIDR is a networking.k8s.io/v1 ServiceCIDR.
type ServiceCIDR struct {
	Origin
	Name  string
	CIDRs []netip.Prefix
}

// Well-known labels.
const (
	LabelZone             = "topology.kubernetes.io/zone"
	LabelServiceName      = "kubernetes.io/service-name"
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = "service.kubernetes.io/headless"
)
