package iptables

import (
	"strconv"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// portPlan is one service port with its chain names and kube-proxy's decisions, made
// once and read by every step that writes its rules.
type portPlan struct {
	p      *ir.Port
	spn    string // "ns/svc:port"
	proto  string // "tcp"
	port   string // service port as text
	cip    string
	chains ServiceChains
	// seps names the endpoint chains, indexed like p.Endpoints; "" for endpoints not
	// reachable from this node.
	seps []string
	// epComment is "<spn> -> <ep>" per endpoint, for dispatch rules.
	internal, external ir.Route
	usesEXT, usesFW    bool
	usesSVC, usesSVL   bool
	intChain           string // chain cluster-IP traffic jumps to (SVC or SVL)
	extPolicyChain     string // chain EXT falls through to (SVC or SVL)
	lbChain            string // chain load-balancer IP traffic jumps to (FW or EXT)
}

// planPort plans a port; without endpoints it leaves the endpoint chains unnamed
// (hashing them is most of a plan's cost), enough for the frontend rules.
func (e *emitter) planPort(p *ir.Port, withEndpoints bool) *portPlan {
	pp := &portPlan{
		p:        p,
		spn:      p.Name.String(),
		proto:    p.Protocol.Lower(),
		port:     strconv.Itoa(int(p.Port)),
		cip:      p.ClusterIP.String(),
		internal: p.Internal(),
		external: p.External(),
	}
	pp.chains = serviceChains(pp.spn, pp.proto)
	if withEndpoints {
		pp.seps = make([]string, len(p.Endpoints))
		for _, i := range p.Reachable {
			pp.seps[i] = EndpointChain(pp.spn, pp.proto, p.Endpoints[i].String())
		}
	}
	pp.usesEXT = p.HasEndpoints && p.ExternallyAccessible()
	pp.usesFW = p.HasEndpoints && p.HasSourceRanges()
	pp.usesSVC = len(p.Cluster) > 0 && p.UsesCluster()
	pp.usesSVL = len(p.Local) > 0 && p.UsesLocal()
	pp.intChain = pp.chains.SVC
	if p.InternalPolicyLocal {
		pp.intChain = pp.chains.SVL
	}
	pp.extPolicyChain = pp.chains.SVC
	if p.ExternalPolicyLocal {
		pp.extPolicyChain = pp.chains.SVL
	}
	pp.lbChain = pp.chains.EXT
	if pp.usesFW {
		pp.lbChain = pp.chains.FW
	}
	return pp
}

func hasRoute(r ir.Route) bool { return r == ir.ToCluster || r == ir.ToLocal }

// verdict is the filter target and comment for traffic with nowhere to go.
func (pp *portPlan) verdict(r ir.Route) (target, comment string) {
	if r == ir.Reject {
		return "REJECT", pp.spn + " has no endpoints"
	}
	return "DROP", pp.spn + " has no local endpoints"
}

// chainNames lists the nat chains the port owns, in the order kube-proxy declares them.
func (pp *portPlan) chainNames(dst []string) []string {
	if pp.usesEXT {
		dst = append(dst, pp.chains.EXT)
	}
	if pp.usesFW {
		dst = append(dst, pp.chains.FW)
	}
	if pp.usesSVC {
		dst = append(dst, pp.chains.SVC)
	}
	if pp.usesSVL {
		dst = append(dst, pp.chains.SVL)
	}
	for _, i := range pp.p.Reachable {
		dst = append(dst, pp.seps[i])
	}
	return dst
}

// match writes "-m tcp -p tcp -d IP --dport PORT".
func (pp *portPlan) match(b *lineBuf, dst, port string) {
	b.w("-m", pp.proto, "-p", pp.proto, "-d", dst, "--dport", port)
}

// frontFilter writes the port's filter-table rules: verdicts for traffic that has no
// endpoint to go to, the firewall drop for load-balancer IPs, the health-check accept
// (kube-proxy's steps "capture clusterIP / externalIPs / load-balancer / nodeports /
// healthCheckNodePorts", filter half).
func (e *emitter) frontFilter(pp *portPlan, b *lineBuf) {
	p := pp.p
	if !hasRoute(pp.internal) {
		target, comment := pp.verdict(pp.internal)
		b.start(chainServices)
		b.comment(comment)
		pp.match(b, pp.cip, pp.port)
		b.w("-j", target)
		b.end()
	}
	extTarget, extComment := pp.verdict(pp.external)
	for _, ip := range p.ExternalIPs {
		if !hasRoute(pp.external) {
			b.start(chainExternalServices)
			b.comment(extComment)
			pp.match(b, ip.String(), pp.port)
			b.w("-j", extTarget)
			b.end()
		}
	}
	for _, ip := range p.LoadBalancerIPs {
		if pp.usesFW {
			b.start(chainProxyFirewall)
			b.comment(pp.spn + " traffic not accepted by " + pp.chains.FW)
			pp.match(b, ip.String(), pp.port)
			b.w("-j", "DROP")
			b.end()
		}
	}
	if !hasRoute(pp.external) {
		for _, ip := range p.LoadBalancerIPs {
			b.start(chainExternalServices)
			b.comment(extComment)
			pp.match(b, ip.String(), pp.port)
			b.w("-j", extTarget)
			b.end()
		}
		if p.NodePort != 0 {
			b.start(chainExternalServices)
			b.comment(extComment)
			b.w("-m", "addrtype", "--dst-type", "LOCAL", "-m", pp.proto, "-p", pp.proto, "--dport", strconv.Itoa(int(p.NodePort)), "-j", extTarget)
			b.end()
		}
	}
	if p.HealthCheckNodePort != 0 {
		b.start(chainNodePorts)
		b.comment(pp.spn + " health check node port")
		b.w("-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(int(p.HealthCheckNodePort)), "-j", "ACCEPT")
		b.end()
	}
}

// nfacctLocalhostNodePorts counts NodePort packets accepted on 127.0.0.0/8.
const nfacctLocalhostNodePorts = "localhost_nps_accepted_pkts"

// nfacctInvalidDropped counts packets KUBE-FORWARD drops as INVALID.
const nfacctInvalidDropped = "ct_state_invalid_dropped_pkts"

// frontNat writes the port's rules in KUBE-SERVICES and KUBE-NODEPORTS (nat half of the
// capture steps). A port with no endpoint anywhere writes none.
func (e *emitter) frontNat(pp *portPlan, b *lineBuf) {
	p := pp.p
	if hasRoute(pp.internal) {
		b.start(chainServices)
		b.comment(pp.spn + " cluster IP")
		pp.match(b, pp.cip, pp.port)
		b.w("-j", pp.intChain)
		b.end()
	}
	if !p.HasEndpoints {
		return
	}
	for _, ip := range p.ExternalIPs {
		b.start(chainServices)
		b.comment(pp.spn + " external IP")
		pp.match(b, ip.String(), pp.port)
		b.w("-j", pp.chains.EXT)
		b.end()
	}
	for _, ip := range p.LoadBalancerIPs {
		b.start(chainServices)
		b.comment(pp.spn + " loadbalancer IP")
		pp.match(b, ip.String(), pp.port)
		b.w("-j", pp.lbChain)
		b.end()
	}
	if p.NodePort == 0 {
		return
	}
	np := strconv.Itoa(int(p.NodePort))
	if e.sm.NodePorts.Localhost && e.sm.Family == model.IPv4 && e.sm.Host.NFAcct {
		b.start(chainNodePorts)
		b.comment(pp.spn)
		b.w("-m", pp.proto, "-p", pp.proto, "-d", "127.0.0.0/8", "--dport", np, "-m", "nfacct", "--nfacct-name", nfacctLocalhostNodePorts, "-j", pp.chains.EXT)
		b.end()
	}
	b.start(chainNodePorts)
	b.comment(pp.spn)
	b.w("-m", pp.proto, "-p", pp.proto, "--dport", np, "-j", pp.chains.EXT)
	b.end()
}

// chainDecls declares the port's own chains.
func (e *emitter) chainDecls(pp *portPlan, b *lineBuf) {
	var names [8]string
	for _, n := range pp.chainNames(names[:0]) {
		b.chainLine(n, "-")
	}
}

// chainRules writes the rules of the port's own chains: internal masquerade, EXT, FW,
// SVC, SVL and every SEP (kube-proxy's steps after the partial-sync cut).
func (e *emitter) chainRules(pp *portPlan, b *lineBuf) {
	p := pp.p
	if hasRoute(pp.internal) && (e.sm.MasqueradeAll || e.sm.LocalDetector.Implemented()) {
		b.start(pp.intChain)
		b.comment(pp.spn + " cluster IP")
		pp.match(b, pp.cip, pp.port)
		if !e.sm.MasqueradeAll {
			e.ifNotLocal(b)
		}
		b.w("-j", chainMarkMasq)
		b.end()
	}
	if pp.usesEXT {
		e.externalRules(pp, b)
	}
	if pp.usesFW {
		e.firewallRules(pp, b)
	}
	if pp.usesSVC {
		e.dispatch(pp, pp.chains.SVC, p.Cluster, b)
	}
	if pp.usesSVL {
		e.dispatch(pp, pp.chains.SVL, p.Local, b)
	}
	for _, i := range p.Reachable {
		e.endpointRules(pp, i, b)
	}
}

func (e *emitter) externalRules(pp *portPlan, b *lineBuf) {
	ext := pp.chains.EXT
	if !pp.p.ExternalPolicyLocal {
		b.start(ext)
		b.comment("masquerade traffic for " + pp.spn + " external destinations")
		b.w("-j", chainMarkMasq)
		b.end()
	} else {
		if e.sm.LocalDetector.Implemented() {
			b.start(ext)
			b.comment("pod traffic for " + pp.spn + " external destinations")
			e.ifLocal(b)
			b.w("-j", pp.chains.SVC)
			b.end()
		}
		b.start(ext)
		b.comment("masquerade LOCAL traffic for " + pp.spn + " external destinations")
		b.w("-m", "addrtype", "--src-type", "LOCAL", "-j", chainMarkMasq)
		b.end()
		b.start(ext)
		b.comment("route LOCAL traffic for " + pp.spn + " external destinations")
		b.w("-m", "addrtype", "--src-type", "LOCAL", "-j", pp.chains.SVC)
		b.end()
	}
	if hasRoute(pp.external) {
		b.start(ext)
		b.w("-j", pp.extPolicyChain)
		b.end()
	}
}

func (e *emitter) firewallRules(pp *portPlan, b *lineBuf) {
	fw, comment := pp.chains.FW, pp.spn+" loadbalancer IP"
	for _, r := range pp.p.SourceRanges {
		b.start(fw)
		b.comment(comment)
		b.w("-s", r.String(), "-j", pp.chains.EXT)
		b.end()
	}
	if pp.p.FirewallAllowsNode(e.sm.Node.IP) {
		for _, ip := range pp.p.LoadBalancerIPs {
			b.start(fw)
			b.comment(comment)
			b.w("-s", ip.String(), "-j", pp.chains.EXT)
			b.end()
		}
	}
	b.start(fw)
	b.comment("other traffic to " + pp.spn + " will be dropped by KUBE-PROXY-FIREWALL")
	b.end()
}

// dispatch spreads a policy chain over endpoints: affinity checks first, then
// "-m statistic" rules with probability 1/(n-i), the last one unconditional.
func (e *emitter) dispatch(pp *portPlan, chain string, idx []int, b *lineBuf) {
	p := pp.p
	if p.AffinitySeconds > 0 {
		secs := strconv.Itoa(p.AffinitySeconds)
		for _, i := range idx {
			b.start(chain)
			e.endpointComment(pp, i, b)
			b.w("-m", "recent", "--name", pp.seps[i], "--rcheck", "--seconds", secs, "--reap", "-j", pp.seps[i])
			b.end()
		}
	}
	n := len(idx)
	for k, i := range idx {
		b.start(chain)
		e.endpointComment(pp, i, b)
		if k < n-1 {
			b.w("-m", "statistic", "--mode", "random", "--probability", e.probs.get(n-k))
		}
		b.w("-j", pp.seps[i])
		b.end()
	}
}

// endpointComment is "<spn> -> <ep>", left out in large-cluster mode.
func (e *emitter) endpointComment(pp *portPlan, i int, b *lineBuf) {
	if !e.sm.LargeCluster {
		b.comment(pp.spn + " -> " + pp.p.Endpoints[i].String())
	}
}

// endpointRules writes a KUBE-SEP chain: masquerade hairpin traffic (the endpoint
// reaching itself through the Service), then DNAT.
func (e *emitter) endpointRules(pp *portPlan, i int, b *lineBuf) {
	ep := pp.p.Endpoints[i]
	sep := pp.seps[i]
	b.start(sep)
	if !e.sm.LargeCluster {
		b.comment(pp.spn)
	}
	b.w("-s", ep.IP.String(), "-j", chainMarkMasq)
	b.end()
	b.start(sep)
	if !e.sm.LargeCluster {
		b.comment(pp.spn)
	}
	if pp.p.AffinitySeconds > 0 {
		b.w("-m", "recent", "--name", sep, "--set")
	}
	b.w("-m", pp.proto, "-p", pp.proto, "-j", "DNAT", "--to-destination", ep.String())
	b.end()
}

// ifLocal and ifNotLocal write the local-traffic detector's match.
func (e *emitter) ifLocal(b *lineBuf) { e.detector(b, false) }

func (e *emitter) ifNotLocal(b *lineBuf) { e.detector(b, true) }

func (e *emitter) detector(b *lineBuf, not bool) {
	d := e.sm.LocalDetector
	if not {
		b.w("!")
	}
	switch d.Mode {
	case "ClusterCIDR", "NodeCIDR":
		b.w("-s", d.CIDR.Masked().String())
	case "BridgeInterface":
		b.w("-i", d.Interface)
	case "InterfaceNamePrefix":
		b.w("-i", d.Interface+"+")
	}
}
