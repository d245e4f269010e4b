package verify

import (
	"github.com/svcgen/svcgen/compiler"
)

// Difference is a documented way one mode departs from the service map's common
// semantics (Expect), because upstream kube-proxy's mode does. Each switches on one
// rule of the expectation; verify holds a mode to the expectation with all of its
// differences on, and counts a difference as applied to a probe when turning it off
// alone would change what the probe expects.
type Difference struct {
	Mode compiler.Mode
	// Name is short and stable, for reports.
	Name string
	// Reason says what the mode does and why, with the upstream source.
	Reason string
	set    func(*semantics)
}

// semantics are the switches of the expectation; the zero value is the semantics
// every mode shares.
type semantics struct {
	noExternalRejectFromNode        bool
	noLocalhostNodePorts            bool
	localFallback                   bool
	externalLocalForAll             bool
	nodeConnectsFromClusterIP       bool
	healthCheckNeedsNodePortAddress bool
	hairpinLocalOnly                bool
	firewallWithoutEndpoints        bool
	firewallAlways                  bool
	noHealthCheckRules              bool
	clusterIPsCheck                 bool
}

// Differences is every documented difference, in one place.
var Differences = []Difference{
	{
		Mode: compiler.IPTables,
		Name: "no reject for the node's own traffic to external IPs without endpoints",
		Reason: "iptables mode rejects traffic to the external IPs and load-balancer IPs of a " +
			"Service without endpoints in filter KUBE-EXTERNAL-SERVICES, which only INPUT and " +
			"FORWARD jump to (pkg/proxy/iptables/proxier.go, iptablesJumpChains): a connection " +
			"the node itself opens to such an address that is not one of the node's own " +
			"passes unchanged instead of being refused.",
		set: func(s *semantics) { s.noExternalRejectFromNode = true },
	},
	{
		Mode: compiler.NFTables,
		Name: "no node ports on localhost",
		Reason: "nftables mode matches node ports on the node's addresses but not on loopback " +
			"(pkg/proxy/nftables/proxier.go: the match-all rule adds \"ip daddr != 127.0.0.0/8\" " +
			"and nodeport-ips leaves loopback out), so 127.0.0.1:NODEPORT reaches no Service; " +
			"iptables mode serves it with localhostNodePorts.",
		set: func(s *semantics) { s.noLocalhostNodePorts = true },
	},
	{
		Mode: compiler.NFTables,
		Name: "loadBalancerSourceRanges apply to Services without endpoints",
		Reason: "nftables mode fills firewall-ips for every load-balancer IP with source ranges " +
			"whatever the endpoints, and checks it before DNAT for traffic from the network " +
			"and from the node alike (firewall-check, from filter-prerouting-pre-dnat and " +
			"filter-output-pre-dnat), so a source the ranges do not allow is dropped even " +
			"when the Service has no endpoints; iptables mode rejects it.",
		set: func(s *semantics) { s.firewallAlways = true },
	},
	{
		Mode: compiler.NFTables,
		Name: "no rule for health-check node ports",
		Reason: "nftables mode writes nothing for healthCheckNodePort (kube-proxy's table has " +
			"no filter policy to open it against), so a packet to it passes through no rule; " +
			"iptables mode accepts it in filter KUBE-NODEPORTS.",
		set: func(s *semantics) { s.noHealthCheckRules = true },
	},
	{
		Mode: compiler.NFTables,
		Name: "other ports of cluster IPs are rejected, unallocated cluster IPs dropped",
		Reason: "nftables mode rejects traffic to a cluster IP on a port no Service has and " +
			"drops traffic to addresses of the ServiceCIDRs that no Service holds " +
			"(cluster-ips-check); iptables mode lets both pass unchanged.",
		set: func(s *semantics) { s.clusterIPsCheck = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "no node ports on localhost",
		Reason: "ipvs mode makes node-port virtual servers on the node's addresses but never on " +
			"loopback (pkg/proxy/ipvs/proxier.go: loopback is not a valid address for a set or " +
			"a virtual server), and KUBE-SERVICES returns traffic from 127.0.0.0/8 at once, so " +
			"127.0.0.1:NODEPORT reaches no Service.",
		set: func(s *semantics) { s.noLocalhostNodePorts = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "Local traffic policy falls back to every endpoint",
		Reason: "With internalTrafficPolicy or externalTrafficPolicy Local and no usable endpoint " +
			"on this node, ipvs mode gives the virtual server the Cluster endpoints instead of " +
			"dropping the traffic, so pods on the node can still reach the Service (kubernetes " +
			"PR #97081, syncEndpoint). Where there are no Cluster endpoints either " +
			"(internalTrafficPolicy Local on a Service that is not externally accessible) the " +
			"virtual server has no real server, and IPVS answers with ICMP port unreachable.",
		set: func(s *semantics) { s.localFallback = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "externalTrafficPolicy Local holds for pods and the node too",
		Reason: "ipvs mode gives external IPs, load-balancer IPs and node ports of an " +
			"externalTrafficPolicy Local Service only this node's endpoints, for every source, " +
			"and does not masquerade (KUBE-EXTERNAL-IP-LOCAL, KUBE-LOAD-BALANCER-LOCAL and " +
			"KUBE-NODE-PORT-LOCAL-* return before KUBE-MARK-MASQ). The iptables and nftables " +
			"modes send pods and the node to every endpoint, the node's traffic masqueraded.",
		set: func(s *semantics) { s.externalLocalForAll = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "the node's own connections to cluster IPs are masqueraded",
		Reason: "A cluster IP is bound to kube-ipvs0, so a connection the node opens to it " +
			"leaves with the cluster IP as its source, which no local-traffic detector counts " +
			"as a pod's, and without a detector ipvs mode masquerades exactly that " +
			"(KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ). The iptables and nftables modes " +
			"judge the node's own address: not masqueraded without a detector, nor when the " +
			"node's address is inside the cluster CIDR.",
		set: func(s *semantics) { s.nodeConnectsFromClusterIP = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "no health-check node port without a node-port address",
		Reason: "When a service port has a node port and no address of the node other than " +
			"loopback takes node ports, the ipvs proxier skips the rest of the port " +
			"(syncProxyRules continues its loop), its health-check node port included: it is " +
			"not in KUBE-HEALTH-CHECK-NODE-PORT and no rule accepts it.",
		set: func(s *semantics) { s.healthCheckNeedsNodePortAddress = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "hairpin masquerade only for endpoints on this node",
		Reason: "ipvs mode masquerades an endpoint that reaches itself through its Service " +
			"through the KUBE-LOOP-BACK set, which holds only this node's endpoints; the " +
			"iptables and nftables modes masquerade it for every endpoint.",
		set: func(s *semantics) { s.hairpinLocalOnly = true },
	},
	{
		Mode: compiler.IPVS,
		Name: "loadBalancerSourceRanges apply to Services without endpoints",
		Reason: "ipvs mode fills KUBE-LOAD-BALANCER-FW and its source sets whatever the " +
			"endpoints, so traffic from the network that loadBalancerSourceRanges do not allow " +
			"is dropped (filter INPUT) even when the Service has no endpoints; iptables mode " +
			"writes its firewall chain only for a Service with endpoints and rejects such " +
			"traffic. The node's own traffic, which leaves from the load-balancer IP bound to " +
			"kube-ipvs0, meets no firewall before IPVS and is rejected there.",
		set: func(s *semantics) { s.firewallWithoutEndpoints = true },
	},
}

// DifferencesOf lists the differences of one mode.
func DifferencesOf(m compiler.Mode) []Difference {
	var out []Difference
	for _, d := range Differences {
		if d.Mode == m {
			out = append(out, d)
		}
	}
	return out
}
