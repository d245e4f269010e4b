package ir

// IPVSRealServers is the endpoint set the ipvs proxier gives a virtual server of this
// port (upstream's syncEndpoint), as indexes into Endpoints (Cluster or Local, not a
// copy: a port's frontends share it). policyLocal is the traffic policy of that frontend:
// InternalPolicyLocal for the cluster IP, ExternalPolicyLocal for external IPs,
// load-balancer IPs and node ports.
//
// It differs from the iptables and nftables modes in one way: when the policy is
// Local and this node has no usable local endpoint, the virtual server falls back to
// the Cluster endpoints instead of dropping traffic (kubernetes PR #97081, so that
// pods on the node can still reach the Service). The Cluster set is nil when no
// traffic uses it (internalTrafficPolicy Local on a Service that is not externally
// accessible), and then the virtual server has no real server.
func (p *Port) IPVSRealServers(policyLocal bool) []int {
	if policyLocal && len(p.Local) > 0 {
		return p.Local
	}
	return p.Cluster
}
