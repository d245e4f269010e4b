// Package ir is the backend-neutral service map: for one node and one IP family, every
// service port with its frontends, its endpoints already sorted into the sets kube-proxy
// uses, and every decision an emitter needs (which chain internal and external traffic
// goes to, whether it is rejected or dropped, what gets masqueraded). Emitters turn it
// into syntax; trace and verify read it as the truth the rules must implement.
//
// Order is fixed: services by namespace/name, ports by port name then protocol,
// endpoints by their "IP:port" string (as upstream sorts them, so 10.0.1.10:80 comes
// before 10.0.1.2:80).
package ir

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// ServiceMap is the compiled service state of one node for one IP family.
type ServiceMap struct {
	Family model.IPFamily
	// Target is the kube-proxy release (and its gates) the rules are for; emitters read
	// its Layout, and every output's header names it.
	Target release.Target
	Node   Node
	// MasqueradeBit is the fwmark bit that asks KUBE-POSTROUTING to masquerade.
	MasqueradeBit int
	MasqueradeAll bool
	LocalDetector LocalDetector
	NodePorts     NodePortAddresses
	Host          Host
	// ServiceCIDRs of this family, from ServiceCIDR objects (nftables drops traffic to
	// addresses inside them that no Service holds).
	ServiceCIDRs []netip.Prefix
	// LargeCluster is kube-proxy's large-cluster mode: more than 1000 endpoints in all
	// (counting every endpoint of the family, ready or not). It drops per-endpoint comments.
	LargeCluster bool
	IPVS         IPVS
	Services     []*Service
}

// MasqueradeMark is the mark as kube-proxy writes it in every mode:
// fmt.Sprintf("%#08x", 1<<bit), so bit 14 is "0x00004000" (upstream's unit tests
// hard-code "0x4000"; the kernel holds the same value).
func (sm *ServiceMap) MasqueradeMark() string {
	return fmt.Sprintf("%#08x", uint32(1)<<uint(sm.MasqueradeBit))
}

// Header says what an output was written for, as its first comment line says it:
// "kube-proxy v1.37 nftables rules for node worker-1 (IPv4), written by svcgen", with
// the feature gates set away from the release's defaults after the release. The node
// name is a checked node name (model.CheckNodeName), so the line is safe in any
// rules file.
func (sm *ServiceMap) Header(mode string) string {
	node := ""
	if sm.Node.Name != "" {
		node = " for node " + sm.Node.Name
	}
	return sm.Target.String() + " " + mode + " rules" + node + " (" + string(sm.Family) + "), written by svcgen"
}

// LargeClusterThreshold is upstream's largeClusterEndpointsThreshold.
const LargeClusterThreshold = 1000

// Node is the node the rules are for.
type Node struct {
	Name string
	// IP is the node's primary address of this family (the Node's InternalIP, or the
	// config's bindAddress); invalid when unknown. LoadBalancer source ranges that
	// contain it let the node reach its own load-balancer IPs.
	IP   netip.Addr
	Zone string
	// Addresses are the node's local addresses of this family on every interface,
	// loopback included, in interface order.
	Addresses []netip.Prefix
}

// LocalDetector says how rules tell pod traffic from other traffic.
type LocalDetector struct {
	Mode      string       // "" (none), ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix
	CIDR      netip.Prefix // ClusterCIDR and NodeCIDR
	Interface string       // BridgeInterface name or InterfaceNamePrefix prefix
}

// Implemented reports whether there is a detector (kube-proxy's IsImplemented).
func (d LocalDetector) Implemented() bool { return d.Mode != "" }

// NodePortAddresses says which destination addresses accept NodePort traffic.
type NodePortAddresses struct {
	// MatchAll: every local address (nodePortAddresses unset, or covering the family).
	MatchAll bool
	// Addresses: the node's addresses inside the configured CIDRs, when !MatchAll.
	Addresses []netip.Addr
	// Localhost: NodePorts also answer on 127.0.0.0/8 (IPv4, iptables.localhostNodePorts
	// and nodePortAddresses allowing loopback).
	Localhost bool
}

// Host is what kube-proxy would probe on the node.
type Host struct {
	RandomFully  bool
	NFAcct       bool
	TCPBeLiberal bool
}

// IPVS holds the ipvs-mode settings of the configuration.
type IPVS struct {
	// Scheduler is ipvs.scheduler, "rr" when unset; the compiler accepts only the
	// kernel's schedulers.
	Scheduler    string
	StrictARP    bool
	ExcludeCIDRs []netip.Prefix
	// Timeouts are ipvs.tcpTimeout, tcpFinTimeout and udpTimeout in whole seconds;
	// 0 keeps the kernel's value (kube-proxy's ConfigureTimeouts).
	TCPTimeout, TCPFinTimeout, UDPTimeout int
}

// Service groups the ports of one Service.
type Service struct {
	Namespace, Name string
	Ports           []*Port
}

// Key is "namespace/name".
func (s *Service) Key() string { return s.Namespace + "/" + s.Name }

// Service returns the Service of that key ("namespace/name"), or nil: a binary search
// in the map's order.
func (sm *ServiceMap) Service(key string) *Service {
	ns, name, _ := strings.Cut(key, "/")
	i, found := slices.BinarySearchFunc(sm.Services, [2]string{ns, name}, func(s *Service, k [2]string) int {
		return cmp.Or(strings.Compare(s.Namespace, k[0]), strings.Compare(s.Name, k[1]))
	})
	if !found {
		return nil
	}
	return sm.Services[i]
}

// Pairs calls fn with the two versions of every Service of two maps, walking both in
// the map's order; a Service only one map has comes with nil for the other.
func Pairs(prev, next []*Service, fn func(old, s *Service)) {
	for len(prev) > 0 || len(next) > 0 {
		var c int
		switch {
		case len(next) == 0:
			c = -1
		case len(prev) == 0:
			c = 1
		default:
			c = cmp.Or(strings.Compare(prev[0].Namespace, next[0].Namespace), strings.Compare(prev[0].Name, next[0].Name))
		}
		switch {
		case c < 0:
			fn(prev[0], nil)
			prev = prev[1:]
		case c > 0:
			fn(nil, next[0])
			next = next[1:]
		default:
			fn(prev[0], next[0])
			prev, next = prev[1:], next[1:]
		}
	}
}

// ChangedServices names ("namespace/name", in the map's order) the Services that
// differ between two maps: new, gone, or another value (the same pointer is the same
// Service, as compiler.Session keeps the ones a change does not touch; else the two
// are compared field by field).
func ChangedServices(prev, next *ServiceMap) []string {
	var out []string
	Pairs(prev.Services, next.Services, func(old, s *Service) {
		switch {
		case old == s:
		case old == nil:
			out = append(out, s.Key())
		case s == nil || !reflect.DeepEqual(old, s):
			out = append(out, old.Key())
		}
	})
	return out
}

// PortName is kube-proxy's ServicePortName.
type PortName struct {
	Namespace, Service, Port string
}

// String is "ns/svc:port", or "ns/svc" for an unnamed port.
func (n PortName) String() string {
	if n.Port == "" {
		return n.Namespace + "/" + n.Service
	}
	return n.Namespace + "/" + n.Service + ":" + n.Port
}

// Port is one service port as kube-proxy sees it, with its decisions made.
type Port struct {
	Name     PortName
	Protocol model.Protocol

	// Frontends.
	ClusterIP           netip.Addr
	Port                uint16
	NodePort            uint16 // 0: none
	ExternalIPs         []netip.Addr
	LoadBalancerIPs     []netip.Addr
	SourceRanges        []netip.Prefix
	HealthCheckNodePort uint16

	// Policies. ExternalPolicyLocal is only true for externally accessible Services.
	ExternalPolicyLocal bool
	InternalPolicyLocal bool
	// AffinitySeconds is the ClientIP affinity timeout; 0 without affinity.
	AffinitySeconds int

	// Endpoints are every endpoint of this family for the port, deduplicated and sorted.
	Endpoints []Endpoint
	// Cluster and Local index Endpoints: the endpoints Cluster and Local traffic
	// policy send to (upstream's CategorizeEndpoints); nil when the policy is unused.
	Cluster []int
	Local   []int
	// Reachable indexes the endpoints that get a DNAT target on this node: the union
	// of Cluster and Local, in Endpoints order.
	Reachable []int
	// HasEndpoints: some endpoint anywhere in the cluster can serve the port.
	HasEndpoints bool
}

// ExternallyAccessible is the proxier-level notion: a NodePort, a load-balancer IP or
// an external IP of this family.
func (p *Port) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.LoadBalancerIPs) > 0 || len(p.ExternalIPs) > 0
}

// UsesCluster: some traffic follows the Cluster policy (kube-proxy's UsesClusterEndpoints).
func (p *Port) UsesCluster() bool { return !p.InternalPolicyLocal || p.ExternallyAccessible() }

// UsesLocal: some traffic follows the Local policy (kube-proxy's UsesLocalEndpoints).
func (p *Port) UsesLocal() bool {
	return p.InternalPolicyLocal || (p.ExternalPolicyLocal && p.ExternallyAccessible())
}

// Route is where one class of traffic (to the cluster IP, or to external frontends)
// goes: to the Cluster or Local endpoint set, or nowhere.
type Route int

// Routes.
const (
	// ToCluster: the Cluster-policy endpoints (KUBE-SVC-, service- chains).
	ToCluster Route = iota
	// ToLocal: the node-local endpoints (KUBE-SVL-, local- chains).
	ToLocal
	// Reject: the service has no usable endpoint anywhere; clients get an ICMP reject.
	Reject
	// Drop: the policy is Local and this node has no usable local endpoint.
	Drop
)

func (r Route) String() string {
	return [...]string{"cluster", "local", "reject", "drop"}[r]
}

// Internal is where cluster-IP traffic goes.
func (p *Port) Internal() Route { return p.route(p.InternalPolicyLocal) }

// External is where traffic to external IPs, load-balancer IPs and node ports goes once
// it is not short-circuited (pod and host traffic with a Local policy still reach the
// Cluster endpoints).
func (p *Port) External() Route { return p.route(p.ExternalPolicyLocal) }

// route is where traffic goes under a traffic policy (local: the policy is Local).
func (p *Port) route(local bool) Route {
	switch {
	case !p.HasEndpoints:
		return Reject
	case !local:
		return ToCluster
	case len(p.Local) == 0:
		return Drop
	}
	return ToLocal
}

// HasSourceRanges: load-balancer traffic is subject to loadBalancerSourceRanges. (The
// iptables proxier builds its firewall chain only when the port also has endpoints;
// the nftables proxier always does.)
func (p *Port) HasSourceRanges() bool {
	return len(p.LoadBalancerIPs) > 0 && len(p.SourceRanges) > 0
}

// FirewallAllowsNode: a source range contains the node's IP, so the node may reach its
// own load-balancer IPs (which then arrive with the LB IP as source).
func (p *Port) FirewallAllowsNode(node netip.Addr) bool {
	if !node.IsValid() {
		return false
	}
	for _, r := range p.SourceRanges {
		if r.Contains(node) {
			return true
		}
	}
	return false
}

// ClusterEndpoints returns the Cluster-policy endpoints.
func (p *Port) ClusterEndpoints() []Endpoint { return p.pick(p.Cluster) }

// LocalEndpoints returns the Local-policy endpoints.
func (p *Port) LocalEndpoints() []Endpoint { return p.pick(p.Local) }

// ReachableEndpoints returns the endpoints reachable from this node.
func (p *Port) ReachableEndpoints() []Endpoint { return p.pick(p.Reachable) }

func (p *Port) pick(idx []int) []Endpoint {
	out := make([]Endpoint, len(idx))
	for i, j := range idx {
		out[i] = p.Endpoints[j]
	}
	return out
}

// Endpoint is one backend of a service port.
type Endpoint struct {
	IP          netip.Addr
	Port        uint16
	Ready       bool
	Serving     bool
	Terminating bool
	Local       bool // on this node
	NodeName    string
	Zone        string
	Hints       *model.EndpointHints // nil without topology hints
}

// ZoneHints are the zones the endpoint is hinted for; nil without hints.
func (e Endpoint) ZoneHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Zones
}

// NodeHints are the nodes the endpoint is hinted for; nil without hints.
func (e Endpoint) NodeHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Nodes
}

// String is "IP:port" ("[IPv6]:port"), the form upstream hashes, sorts and DNATs to.
func (e Endpoint) String() string {
	return net.JoinHostPort(e.IP.String(), strconv.Itoa(int(e.Port)))
}

// AppendTo appends String's form of e to b.
func (e Endpoint) AppendTo(b []byte) []byte {
	if e.IP.Is6() {
		b = append(e.IP.AppendTo(append(b, '[')), ']')
	} else {
		b = e.IP.AppendTo(b)
	}
	return strconv.AppendUint(append(b, ':'), uint64(e.Port), 10)
}

// FamiliesOf are the families of a run's service maps (one map per family).
func FamiliesOf(maps []*ServiceMap) []model.IPFamily {
	out := make([]model.IPFamily, len(maps))
	for i, sm := range maps {
		out[i] = sm.Family
	}
	return out
}

// FamilyNames names the families of a run's service maps: "IPv4 and IPv6".
func FamilyNames(maps []*ServiceMap) string {
	names := make([]string, len(maps))
	for i, sm := range maps {
		names[i] = string(sm.Family)
	}
	return strings.Join(names, " and ")
}
