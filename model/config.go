package model

import "net/netip"

// Config is the part of a kubeproxy.config.k8s.io/v1alpha1 KubeProxyConfiguration that
// shapes rules. Fields mean what they mean to kube-proxy; pointers are fields whose
// default is not the zero value.
type Config struct {
	Origin
	Mode             string
	HostnameOverride string
	BindAddress      netip.Addr
	// ClusterCIDRs is clusterCIDR split at commas (one per family at most).
	ClusterCIDRs        []netip.Prefix
	DetectLocalMode     string // ClusterCIDR (default), NodeCIDR, BridgeInterface, InterfaceNamePrefix
	BridgeInterface     string
	InterfaceNamePrefix string
	// NodePortAddresses are CIDRs; NodePortPrimary, NodePortLocalhost and NodePortAll
	// are the keywords "primary", "localhost" and "all" (v1.37 accepts them mixed with
	// CIDRs; before, only "primary", alone).
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	NodePortLocalhost bool
	NodePortAll       bool
	IPTables          IPTablesConfig
	IPVS              IPVSConfig
	NFTables          NFTablesConfig
	FeatureGates      map[string]bool
}

// IPTablesConfig is the iptables section.
type IPTablesConfig struct {
	MasqueradeAll      bool
	MasqueradeBit      *int32
	LocalhostNodePorts *bool
	SyncPeriod         string
	MinSyncPeriod      string
}

// IPVSConfig is the ipvs section.
type IPVSConfig struct {
	Scheduler     string
	StrictARP     bool
	ExcludeCIDRs  []netip.Prefix
	TCPTimeout    string
	TCPFinTimeout string
	UDPTimeout    string
	SyncPeriod    string
	MinSyncPeriod string
}

// NFTablesConfig is the nftables section.
type NFTablesConfig struct {
	MasqueradeAll bool
	MasqueradeBit *int32
	SyncPeriod    string
	MinSyncPeriod string
}

// Interface is a network interface of a node with its addresses.
type Interface struct {
	Name      string
	Addresses []netip.Prefix
}

// NodeEnvironment (svcgen/v1alpha1) is what kube-proxy would probe on the node at run
// time: the IP families it programs, what the iptables binary and kernel support, and
// the node's interface addresses (for nodePortAddresses). The defaults are what
// kube-proxy finds on a current stock kernel and iptables: --random-fully and the
// nfnetlink_acct counters supported, nf_conntrack_tcp_be_liberal off.
type NodeEnvironment struct {
	Origin
	Node string
	// IPFamilies are the families kube-proxy programs on the node (ipFamily: IPv4,
	// IPv6 or DualStack); nil when the document does not say (compile then takes
	// the families of the input: see compiler.Families).
	IPFamilies   []IPFamily
	RandomFully  bool // default true
	NFAcct       bool // default true
	TCPBeLiberal bool
	Interfaces   []Interface // nil: the Node's InternalIPs only
}

// Cluster is everything read from the inputs.
type Cluster struct {
	Services     []*Service
	Slices       []*EndpointSlice
	Endpoints    []*Endpoints
	Pods         []*Pod
	Nodes        []*Node
	ServiceCIDRs []*ServiceCIDR
	Configs      []*Config
	Environments []*NodeEnvironment
	Workloads    []*Workload
}

// Append appends every object list of o to c's.
func (c *Cluster) Append(o *Cluster) {
	c.Services = append(c.Services, o.Services...)
	c.Slices = append(c.Slices, o.Slices...)
	c.Endpoints = append(c.Endpoints, o.Endpoints...)
	c.Pods = append(c.Pods, o.Pods...)
	c.Nodes = append(c.Nodes, o.Nodes...)
	c.ServiceCIDRs = append(c.ServiceCIDRs, o.ServiceCIDRs...)
	c.Configs = append(c.Configs, o.Configs...)
	c.Environments = append(c.Environments, o.Environments...)
	c.Workloads = append(c.Workloads, o.Workloads...)
}
