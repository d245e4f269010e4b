package syntax

import "strings"

// DummyInterface is the link every virtual address is bound to, so the kernel takes
// traffic for it as local and IPVS (in the INPUT path) picks it up.
const DummyInterface = "kube-ipvs0"

// Chains kube-proxy's ipvs proxier owns, in the order it declares them.
const (
	ChainServices            = "KUBE-SERVICES"
	ChainPostrouting         = "KUBE-POSTROUTING"
	ChainNodePort            = "KUBE-NODE-PORT"
	ChainLoadBalancer        = "KUBE-LOAD-BALANCER"
	ChainMarkMasq            = "KUBE-MARK-MASQ"
	ChainForward             = "KUBE-FORWARD"
	ChainProxyFirewall       = "KUBE-PROXY-FIREWALL"
	ChainSourceRangeFirewall = "KUBE-SOURCE-RANGES-FIREWALL"
	ChainIPVSFilter          = "KUBE-IPVS-FILTER"
	ChainIPVSOutFilter       = "KUBE-IPVS-OUT-FILTER"
)

// Jump is a rule kube-proxy ensures in a built-in chain (check with -C, else insert at
// position 1), outside the restore payload.
type Jump struct {
	Table, From, To, Comment string
}

// Args are the rule's words after the chain name.
func (j Jump) Args() []string {
	return []string{"-m", "comment", "--comment", j.Comment, "-j", j.To}
}

// Jumps is upstream's iptablesJumpChain, in the order kube-proxy ensures them.
var Jumps = []Jump{
	{"nat", "OUTPUT", ChainServices, "kubernetes service portals"},
	{"nat", "PREROUTING", ChainServices, "kubernetes service portals"},
	{"nat", "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules"},
	{"filter", "FORWARD", ChainForward, "kubernetes forwarding rules"},
	{"filter", "INPUT", ChainNodePort, "kubernetes health check rules"},
	{"filter", "INPUT", ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "FORWARD", ChainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "INPUT", ChainIPVSFilter, "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", ChainIPVSOutFilter, "kubernetes ipvs access filter"},
}

// Set types, as ipset spells them.
const (
	HashIP        = "hash:ip"
	HashIPPort    = "hash:ip,port"
	HashIPPortIP  = "hash:ip,port,ip"
	HashIPPortNet = "hash:ip,port,net"
	BitmapPort    = "bitmap:port"
)

// The sets, by their IPv4 names.
const (
	SetLoopBack            = "KUBE-LOOP-BACK"
	SetClusterIP           = "KUBE-CLUSTER-IP"
	SetExternalIP          = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer        = "KUBE-LOAD-BALANCER"
	SetLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerSrcIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSrcCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP         = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP         = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs             = "KUBE-IPVS-IPS"
)

// SetInfo describes one of kube-proxy's sets.
type SetInfo struct {
	Name, Type string
	// Comment is what the set's iptables rules say about it.
	Comment string
}

// SetInfos is upstream's ipsetInfo: every set, in its order, with its type and the
// comment its iptables rules carry (the sets themselves are created without one).
var SetInfos = []SetInfo{
	{Name: SetLoopBack, Type: HashIPPortIP, Comment: "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{Name: SetClusterIP, Type: HashIPPort, Comment: "Kubernetes service cluster ip + port for masquerade purpose"},
	{Name: SetExternalIP, Type: HashIPPort, Comment: "Kubernetes service external ip + port for masquerade and filter purpose"},
	{Name: SetExternalIPLocal, Type: HashIPPort, Comment: "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{Name: SetLoadBalancer, Type: HashIPPort, Comment: "Kubernetes service lb portal"},
	{Name: SetLoadBalancerFW, Type: HashIPPort, Comment: "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{Name: SetLoadBalancerLocal, Type: HashIPPort, Comment: "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{Name: SetLoadBalancerSrcIP, Type: HashIPPortIP, Comment: "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{Name: SetLoadBalancerSrcCIDR, Type: HashIPPortNet, Comment: "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{Name: SetNodePortTCP, Type: BitmapPort, Comment: "Kubernetes nodeport TCP port for masquerade purpose"},
	{Name: SetNodePortLocalTCP, Type: BitmapPort, Comment: "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{Name: SetNodePortUDP, Type: BitmapPort, Comment: "Kubernetes nodeport UDP port for masquerade purpose"},
	{Name: SetNodePortLocalUDP, Type: BitmapPort, Comment: "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{Name: SetNodePortSCTP, Type: HashIPPort, Comment: "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{Name: SetNodePortLocalSCTP, Type: HashIPPort, Comment: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{Name: SetHealthCheckNodePort, Type: BitmapPort, Comment: "Kubernetes health check node port"},
	{Name: SetIPVSIPs, Type: HashIP, Comment: "Addresses on the ipvs interface"},
}

// maxSetName is the longest name ipset takes.
const maxSetName = 31

// SetName is a set's name for a family: the IPv6 proxier writes "KUBE-6-" for
// "KUBE-" and cuts the result to 31 characters, so KUBE-LOAD-BALANCER-SOURCE-CIDR
// becomes KUBE-6-LOAD-BALANCER-SOURCE-CID and KUBE-NODE-PORT-LOCAL-SCTP-HASH
// becomes KUBE-6-NODE-PORT-LOCAL-SCTP-HAS.
func SetName(name string, ipv6 bool) string {
	if !ipv6 || !strings.HasPrefix(name, "KUBE-") {
		return name
	}
	name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(name) > maxSetName {
		name = name[:maxSetName]
	}
	return name
}

// Schedulers that read scheduler flags, and the names ipvsadm gives the flag bits.
var schedFlagNames = map[string][3]string{
	"sh": {"sh-fallback", "sh-port", "flag-3"},
	"mh": {"mh-fallback", "mh-port", "flag-3"},
}

var genericFlagNames = [3]string{"flag-1", "flag-2", "flag-3"}

// Service flags (the kernel's IP_VS_SVC_F_*). HASHED (0x2) is the kernel's own and
// never written.
const (
	FlagPersistent = 0x1
	FlagOnePacket  = 0x4
	FlagSched1     = 0x8
	FlagSched2     = 0x10 // sh-port / mh-port: kube-proxy sets it with mh
	FlagSched3     = 0x20
)

// SetNames are the IPv4 names of the sets kube-proxy's ipvs proxier keeps, in its order.
func SetNames() []string {
	out := make([]string, len(SetInfos))
	for i, si := range SetInfos {
		out[i] = si.Name
	}
	return out
}
