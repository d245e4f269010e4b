package rules

import (
	"strconv"

	"github.com/svcgen/svcgen/iptables/syntax"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// Port is one service port with its chain names and kube-proxy's decisions, made
// once and read by every step that writes its rules.
type Port struct {
	p      *ir.Port
	spn    string // "ns/svc:port"
	proto  string // "tcp"
	port   string // service port as text
	cip    string
	chains syntax.ServiceChains
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
func (e *Emitter) planPort(p *ir.Port, withEndpoints bool) *Port {
	pp := &Port{
		p:        p,
		spn:      p.Name.String(),
		proto:    p.Protocol.Lower(),
		port:     strconv.Itoa(int(p.Port)),
		cip:      p.ClusterIP.String(),
		internal: p.Internal(),
		external: p.External(),
	}
	pp.chains = syntax.ServiceChainsFor(pp.spn, pp.proto)
	if withEndpoints {
		pp.seps = make([]string, len(p.Endpoints))
		for _, i := range p.Reachable {
			pp.seps[i] = syntax.EndpointChain(pp.spn, pp.proto, p.Endpoints[i].String())
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
func (pp *Port) verdict(r ir.Route) (target, comment string) {
	if r == ir.Reject {
		return "REJECT", pp.spn + " has no endpoints"
	}
	return "DROP", pp.spn + " has no local endpoints"
}

// ChainNames lists the nat chains the port owns, in the order kube-proxy declares them.
func (pp *Port) ChainNames(dst []string) []string {
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
func (pp *Port) match(b *syntax.Buffer, dst, port string) {
	b.Words("-m", pp.proto, "-p", pp.proto, "-d", dst, "--dport", port)
}

// FrontFilter writes the port's filter-table rules: verdicts for traffic that has no
// endpoint to go to, the firewall drop for load-balancer IPs, the health-check accept
// (kube-proxy's steps "capture clusterIP / externalIPs / load-balancer / nodeports /
// healthCheckNodePorts", filter half).
func (e *Emitter) FrontFilter(pp *Port, b *syntax.Buffer) {
	p := pp.p
	if !hasRoute(pp.internal) {
		target, comment := pp.verdict(pp.internal)
		b.Start(syntax.ChainServices)
		b.Comment(comment)
		pp.match(b, pp.cip, pp.port)
		b.Words("-j", target)
		b.End()
	}
	extTarget, extComment := pp.verdict(pp.external)
	for _, ip := range p.ExternalIPs {
		if !hasRoute(pp.external) {
			b.Start(syntax.ChainExternalServices)
			b.Comment(extComment)
			pp.match(b, ip.String(), pp.port)
			b.Words("-j", extTarget)
			b.End()
		}
	}
	for _, ip := range p.LoadBalancerIPs {
		if pp.usesFW {
			b.Start(syntax.ChainProxyFirewall)
			b.Comment(pp.spn + " traffic not accepted by " + pp.chains.FW)
			pp.match(b, ip.String(), pp.port)
			b.Words("-j", "DROP")
			b.End()
		}
	}
	if !hasRoute(pp.external) {
		for _, ip := range p.LoadBalancerIPs {
			b.Start(syntax.ChainExternalServices)
			b.Comment(extComment)
			pp.match(b, ip.String(), pp.port)
			b.Words("-j", extTarget)
			b.End()
		}
		if p.NodePort != 0 {
			b.Start(syntax.ChainExternalServices)
			b.Comment(extComment)
			b.Words("-m", "addrtype", "--dst-type", "LOCAL", "-m", pp.proto, "-p", pp.proto, "--dport", strconv.Itoa(int(p.NodePort)), "-j", extTarget)
			b.End()
		}
	}
	if p.HealthCheckNodePort != 0 {
		b.Start(syntax.ChainNodePorts)
		b.Comment(pp.spn + " health check node port")
		b.Words("-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(int(p.HealthCheckNodePort)), "-j", "ACCEPT")
		b.End()
	}
}

// nfacctLocalhostNodePorts counts NodePort packets accepted on 127.0.0.0/8.
const nfacctLocalhostNodePorts = "localhost_nps_accepted_pkts"

// nfacctInvalidDropped counts packets KUBE-FORWARD drops as INVALID.
const nfacctInvalidDropped = "ct_state_invalid_dropped_pkts"

// Counters are the nfacct counters the rules may name (with the NodeEnvironment's
// nfacct, the default): a node where kube-proxy ran has them, and apply makes them.
var Counters = []string{nfacctInvalidDropped, nfacctLocalhostNodePorts}

// FrontNat writes the port's rules in KUBE-SERVICES and KUBE-NODEPORTS (nat half of the
// capture steps). A port with no endpoint anywhere writes none.
func (e *Emitter) FrontNat(pp *Port, b *syntax.Buffer) {
	p := pp.p
	if hasRoute(pp.internal) {
		b.Start(syntax.ChainServices)
		b.Comment(pp.spn + " cluster IP")
		pp.match(b, pp.cip, pp.port)
		b.Words("-j", pp.intChain)
		b.End()
	}
	if !p.HasEndpoints {
		return
	}
	for _, ip := range p.ExternalIPs {
		b.Start(syntax.ChainServices)
		b.Comment(pp.spn + " external IP")
		pp.match(b, ip.String(), pp.port)
		b.Words("-j", pp.chains.EXT)
		b.End()
	}
	for _, ip := range p.LoadBalancerIPs {
		b.Start(syntax.ChainServices)
		b.Comment(pp.spn + " loadbalancer IP")
		pp.match(b, ip.String(), pp.port)
		b.Words("-j", pp.lbChain)
		b.End()
	}
	if p.NodePort == 0 {
		return
	}
	np := strconv.Itoa(int(p.NodePort))
	if e.sm.NodePorts.Localhost && e.sm.Family == model.IPv4 && e.sm.Host.NFAcct {
		b.Start(syntax.ChainNodePorts)
		b.Comment(pp.spn)
		b.Words("-m", pp.proto, "-p", pp.proto, "-d", "127.0.0.0/8", "--dport", np, "-m", "nfacct", "--nfacct-name", nfacctLocalhostNodePorts, "-j", pp.chains.EXT)
		b.End()
	}
	b.Start(syntax.ChainNodePorts)
	b.Comment(pp.spn)
	b.Words("-m", pp.proto, "-p", pp.proto, "--dport", np, "-j", pp.chains.EXT)
	b.End()
}

// ChainDecls declares the port's own chains.
func (e *Emitter) ChainDecls(pp *Port, b *syntax.Buffer) {
	var names [8]string
	for _, n := range pp.ChainNames(names[:0]) {
		b.ChainLine(n, "-")
	}
}

// ChainRules writes the rules of the port's own chains: internal masquerade, EXT, FW,
// SVC, SVL and every SEP (kube-proxy's steps after the partial-sync cut).
func (e *Emitter) ChainRules(pp *Port, b *syntax.Buffer) {
	p := pp.p
	if hasRoute(pp.internal) && (e.sm.MasqueradeAll || e.sm.LocalDetector.Implemented()) {
		b.Start(pp.intChain)
		b.Comment(pp.spn + " cluster IP")
		pp.match(b, pp.cip, pp.port)
		if !e.sm.MasqueradeAll {
			e.ifNotLocal(b)
		}
		b.Words("-j", syntax.ChainMarkMasq)
		b.End()
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

func (e *Emitter) externalRules(pp *Port, b *syntax.Buffer) {
	ext := pp.chains.EXT
	if !pp.p.ExternalPolicyLocal {
		b.Start(ext)
		b.Comment("masquerade traffic for " + pp.spn + " external destinations")
		b.Words("-j", syntax.ChainMarkMasq)
		b.End()
	} else {
		if e.sm.LocalDetector.Implemented() {
			b.Start(ext)
			b.Comment("pod traffic for " + pp.spn + " external destinations")
			e.ifLocal(b)
			b.Words("-j", pp.chains.SVC)
			b.End()
		}
		b.Start(ext)
		b.Comment("masquerade LOCAL traffic for " + pp.spn + " external destinations")
		b.Words("-m", "addrtype", "--src-type", "LOCAL", "-j", syntax.ChainMarkMasq)
		b.End()
		b.Start(ext)
		b.Comment("route LOCAL traffic for " + pp.spn + " external destinations")
		b.Words("-m", "addrtype", "--src-type", "LOCAL", "-j", pp.chains.SVC)
		b.End()
	}
	if hasRoute(pp.external) {
		b.Start(ext)
		b.Words("-j", pp.extPolicyChain)
		b.End()
	}
}

func (e *Emitter) firewallRules(pp *Port, b *syntax.Buffer) {
	fw, comment := pp.chains.FW, pp.spn+" loadbalancer IP"
	for _, r := range pp.p.SourceRanges {
		b.Start(fw)
		b.Comment(comment)
		b.Words("-s", r.String(), "-j", pp.chains.EXT)
		b.End()
	}
	if pp.p.FirewallAllowsNode(e.sm.Node.IP) {
		for _, ip := range pp.p.LoadBalancerIPs {
			b.Start(fw)
			b.Comment(comment)
			b.Words("-s", ip.String(), "-j", pp.chains.EXT)
			b.End()
		}
	}
	b.Start(fw)
	b.Comment("other traffic to " + pp.spn + " will be dropped by KUBE-PROXY-FIREWALL")
	b.End()
}

// dispatch spreads a policy chain over endpoints: affinity checks first, then
// "-m statistic" rules with probability 1/(n-i), the last one unconditional.
func (e *Emitter) dispatch(pp *Port, chain string, idx []int, b *syntax.Buffer) {
	p := pp.p
	if p.AffinitySeconds > 0 {
		secs := strconv.Itoa(p.AffinitySeconds)
		for _, i := range idx {
			b.Start(chain)
			e.endpointComment(pp, i, b)
			b.Words("-m", "recent", "--name", pp.seps[i], "--rcheck", "--seconds", secs, "--reap", "-j", pp.seps[i])
			b.End()
		}
	}
	n := len(idx)
	for k, i := range idx {
		b.Start(chain)
		e.endpointComment(pp, i, b)
		if k < n-1 {
			b.Words("-m", "statistic", "--mode", "random", "--probability", e.probs.Get(n-k))
		}
		b.Words("-j", pp.seps[i])
		b.End()
	}
}

// endpointComment is "<spn> -> <ep>", left out in large-cluster mode.
func (e *Emitter) endpointComment(pp *Port, i int, b *syntax.Buffer) {
	if !e.sm.LargeCluster {
		b.Comment(pp.spn + " -> " + pp.p.Endpoints[i].String())
	}
}

// endpointRules writes a KUBE-SEP chain: masquerade hairpin traffic (the endpoint
// reaching itself through the Service), then DNAT.
func (e *Emitter) endpointRules(pp *Port, i int, b *syntax.Buffer) {
	ep := pp.p.Endpoints[i]
	sep := pp.seps[i]
	b.Start(sep)
	if !e.sm.LargeCluster {
		b.Comment(pp.spn)
	}
	b.Words("-s", ep.IP.String(), "-j", syntax.ChainMarkMasq)
	b.End()
	b.Start(sep)
	if !e.sm.LargeCluster {
		b.Comment(pp.spn)
	}
	if pp.p.AffinitySeconds > 0 {
		b.Words("-m", "recent", "--name", sep, "--set")
	}
	b.Words("-m", pp.proto, "-p", pp.proto, "-j", "DNAT", "--to-destination", ep.String())
	b.End()
}

// ifLocal and ifNotLocal write the local-traffic detector's match.
func (e *Emitter) ifLocal(b *syntax.Buffer) { e.detector(b, false) }

func (e *Emitter) ifNotLocal(b *syntax.Buffer) { e.detector(b, true) }

func (e *Emitter) detector(b *syntax.Buffer, not bool) {
	d := e.sm.LocalDetector
	if not {
		b.Words("!")
	}
	switch d.Mode {
	case "ClusterCIDR", "NodeCIDR":
		b.Words("-s", d.CIDR.Masked().String())
	case "BridgeInterface":
		b.Words("-i", d.Interface)
	case "InterfaceNamePrefix":
		b.Words("-i", d.Interface+"+")
	}
}
