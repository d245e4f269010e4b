package ipvsadm

import "strings"

// DummyInterface is the link every virtual address is bound to, so the kernel takes
// traffic for it as local and IPVS (in the INPUT path) picks it up.
const DummyInterface = "kube-ipvs0"

// Chains kube-proxy's ipvs proxier owns, in the order it declares them.
const (
	chainServices            = "KUBE-SERVICES"
	chainPostrouting         = "KUBE-POSTROUTING"
	chainNodePort            = "KUBE-NODE-PORT"
	chainLoadBalancer        = "KUBE-LOAD-BALANCER"
	chainMarkMasq            = "KUBE-MARK-MASQ"
	chainForward             = "KUBE-FORWARD"
	chainProxyFirewall       = "KUBE-PROXY-FIREWALL"
	chainSourceRangeFirewall = "KUBE-SOURCE-RANGES-FIREWALL"
	chainIPVSFilter          = "KUBE-IPVS-FILTER"
	chainIPVSOutFilter       = "KUBE-IPVS-OUT-FILTER"
)

var (
	natChains    = []string{chainServices, chainPostrouting, chainNodePort, chainLoadBalancer, chainMarkMasq}
	filterChains = []string{chainForward, chainNodePort, chainProxyFirewall, chainSourceRangeFirewall, chainIPVSFilter, chainIPVSOutFilter}
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
	{"nat", "OUTPUT", chainServices, "kubernetes service portals"},
	{"nat", "PREROUTING", chainServices, "kubernetes service portals"},
	{"nat", "POSTROUTING", chainPostrouting, "kubernetes postrouting rules"},
	{"filter", "FORWARD", chainForward, "kubernetes forwarding rules"},
	{"filter", "INPUT", chainNodePort, "kubernetes health check rules"},
	{"filter", "INPUT", chainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "FORWARD", chainProxyFirewall, "kube-proxy firewall rules"},
	{"filter", "INPUT", chainIPVSFilter, "kubernetes ipvs access filter"},
	{"filter", "OUTPUT", chainIPVSOutFilter, "kubernetes ipvs access filter"},
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
	setLoopBack            = "KUBE-LOOP-BACK"
	setClusterIP           = "KUBE-CLUSTER-IP"
	setExternalIP          = "KUBE-EXTERNAL-IP"
	setExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	setLoadBalancer        = "KUBE-LOAD-BALANCER"
	setLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	setLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	setLoadBalancerSrcIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	setLoadBalancerSrcCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	setNodePortTCP         = "KUBE-NODE-PORT-TCP"
	setNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	setNodePortUDP         = "KUBE-NODE-PORT-UDP"
	setNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	setNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	setNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	setHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	setIPVSIPs             = "KUBE-IPVS-IPS"
)

// setInfo is upstream's ipsetInfo: every set, in its order, with its type and the
// comment its iptables rules carry (the sets themselves are created without one).
var setInfo = []struct{ name, typ, comment string }{
	{setLoopBack, HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{setClusterIP, HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	{setExternalIP, HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	{setExternalIPLocal, HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{setLoadBalancer, HashIPPort, "Kubernetes service lb portal"},
	{setLoadBalancerFW, HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{setLoadBalancerLocal, HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{setLoadBalancerSrcIP, HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{setLoadBalancerSrcCIDR, HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{setNodePortTCP, BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	{setNodePortLocalTCP, BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{setNodePortUDP, BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	{setNodePortLocalUDP, BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{setNodePortSCTP, HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{setNodePortLocalSCTP, HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{setHealthCheckNodePort, BitmapPort, "Kubernetes health check node port"},
	{setIPVSIPs, HashIP, "Addresses on the ipvs interface"},
}

// setRules is upstream's ipsetWithIptablesChain: for each set that has entries, a rule
// "-A from [-p proto] -m comment --comment C -m set --match-set NAME match -j to".
// The Local node-port sets come before their plain ones.
var setRules = []struct {
	set, table, from, to, match, proto string
}{
	{setLoopBack, "nat", chainPostrouting, "MASQUERADE", "dst,dst,src", ""},
	{setLoadBalancer, "nat", chainServices, chainLoadBalancer, "dst,dst", ""},
	{setLoadBalancerLocal, "nat", chainLoadBalancer, "RETURN", "dst,dst", ""},
	{setNodePortLocalTCP, "nat", chainNodePort, "RETURN", "dst", "tcp"},
	{setNodePortTCP, "nat", chainNodePort, chainMarkMasq, "dst", "tcp"},
	{setNodePortLocalUDP, "nat", chainNodePort, "RETURN", "dst", "udp"},
	{setNodePortUDP, "nat", chainNodePort, chainMarkMasq, "dst", "udp"},
	{setNodePortLocalSCTP, "nat", chainNodePort, "RETURN", "dst,dst", "sctp"},
	{setNodePortSCTP, "nat", chainNodePort, chainMarkMasq, "dst,dst", "sctp"},
	{setLoadBalancerFW, "filter", chainProxyFirewall, chainSourceRangeFirewall, "dst,dst", ""},
	{setLoadBalancerSrcCIDR, "filter", chainSourceRangeFirewall, "RETURN", "dst,dst,src", ""},
	{setLoadBalancerSrcIP, "filter", chainSourceRangeFirewall, "RETURN", "dst,dst,src", ""},
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
	out := make([]string, len(setInfo))
	for i, si := range setInfo {
		out[i] = si.name
	}
	return out
}
