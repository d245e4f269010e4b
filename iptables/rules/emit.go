// Package rules writes a service map as kube-proxy's iptables rules: the rules layer of
// the iptables backend, between the service map (ir) and the text (iptables/syntax).
// The Emitter plans each service port once (chain names, routes) and writes its parts
// (declarations, the rules of its own chains, its rules in the fixed chains) into
// syntax.Buffers: Write streams all of them as one ruleset; iptables/plan compares them
// with the rules on a node.
//
// # Output order
//
// kube-proxy writes services in Go map order, so its raw output differs from run to run;
// its tests sort before comparing. svcgen writes one fixed order, the same shape as
// kube-proxy's restore input:
//
//	*filter
//	  chain lines: KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-FORWARD, KUBE-NODEPORTS,
//	               KUBE-PROXY-FIREWALL[, KUBE-FIREWALL]
//	  rules:       [KUBE-FIREWALL], then per service port its filter rules, then KUBE-FORWARD
//	COMMIT
//	*nat
//	  chain lines: KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ, then per
//	               service port EXT, FW, SVC, SVL, SEP..., then stale chains
//	  rules:       KUBE-POSTROUTING, KUBE-MARK-MASQ, then per service port its
//	               KUBE-SERVICES / KUBE-NODEPORTS rules and its own chains' rules,
//	               then -X of stale chains, then the final KUBE-NODEPORTS jump(s)
//	COMMIT
//
// Service ports come in the service map's order (namespace, name, port name, protocol)
// and endpoints in upstream's order (by "IP:port" string), so the output sorted the
// way upstream's tests sort is the same text as theirs. The Complete format adds the
// built-in chains and kube-proxy's jump rules into KUBE-* chains.
package rules

import (
	"bufio"
	"io"

	"github.com/svcgen/svcgen/iptables/syntax"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// Format is the shape of the output.
type Format int

const (
	// Complete is a whole file for a plain `iptables-restore` on a node (or network
	// namespace) whose nat and filter tables svcgen owns: built-in chains, the jump rules
	// kube-proxy installs into them, and every KUBE-* chain.
	Complete Format = iota
	// NoFlush is exactly kube-proxy's restore payload (KUBE-* chains only), for
	// `iptables-restore --noflush` beside other software's rules.
	NoFlush
)

// Options control the output of a whole ruleset. (A partial sync against the rules on a
// node is iptables/plan's.)
type Options struct {
	Format Format
}

// Fixed chains kube-proxy declares on every sync, in its order.
var (
	filterFixedChains = []string{syntax.ChainServices, syntax.ChainExternalServices, syntax.ChainForward, syntax.ChainNodePorts, syntax.ChainProxyFirewall}
	// NatFixedChains are the nat table's.
	NatFixedChains = []string{syntax.ChainServices, syntax.ChainNodePorts, syntax.ChainPostrouting, syntax.ChainMarkMasq}
)

// Emitter holds what every service port's rules need.
type Emitter struct {
	sm    *ir.ServiceMap
	mark  string
	probs syntax.Probabilities
	plans [][]*Port // per service, per port, once PlanAll has run
}

// NewEmitter returns an Emitter that plans ports when asked (PlanAll, PlanService): a
// partial restore against a known previous map plans only what changed.
func NewEmitter(sm *ir.ServiceMap) *Emitter {
	return &Emitter{sm: sm, mark: sm.MasqueradeMark()}
}

// PlanAll plans every service port. withEndpoints also names the endpoint chains,
// which only the rules of a port's own chains need (hashing them is most of a plan's
// cost); the fixed chains' rules do without.
func (e *Emitter) PlanAll(withEndpoints bool) {
	e.plans = make([][]*Port, len(e.sm.Services))
	for i, s := range e.sm.Services {
		e.plans[i] = e.PlanService(s, withEndpoints)
	}
}

// PlanService plans the ports of one service.
func (e *Emitter) PlanService(s *ir.Service, withEndpoints bool) []*Port {
	plans := make([]*Port, len(s.Ports))
	for j, p := range s.Ports {
		plans[j] = e.planPort(p, withEndpoints)
	}
	return plans
}

// Write writes the service map's whole ruleset, streaming both tables through one
// buffer: the text is never held whole.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	e := NewEmitter(sm)
	e.PlanAll(true)
	bw := bufio.NewWriterSize(out, syntax.FlushSize)
	b := syntax.NewStream(bw, false)
	b.Header(sm.Header("iptables"))
	e.writeFilter(b, opts.Format)
	e.writeNat(b, opts.Format)
	if err := b.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// firewallChain reports whether kube-proxy writes KUBE-FIREWALL's localhost rule.
func (e *Emitter) firewallChain() bool {
	return e.sm.Family == model.IPv4 && e.sm.NodePorts.Localhost
}

// FilterChains lists the filter table's KUBE-* chains in declaration order.
func (e *Emitter) FilterChains() []string {
	chains := append([]string(nil), filterFixedChains...)
	if e.firewallChain() {
		chains = append(chains, syntax.ChainFirewall)
	}
	return chains
}

func (e *Emitter) writeFilter(b *syntax.Buffer, f Format) {
	b.Line("*filter")
	chains := e.FilterChains()
	if f == Complete {
		e.builtinDecls(b, "filter")
		if !e.firewallChain() {
			chains = append(chains, syntax.ChainFirewall) // kubelet's jump target, always there
		}
	}
	for _, c := range chains {
		b.ChainLine(c, "-")
	}
	if f == Complete {
		e.jumps(b, "filter")
	}
	e.FilterRules(b)
	b.Line("COMMIT")
}

// FilterRules writes every filter rule of the payload.
func (e *Emitter) FilterRules(b *syntax.Buffer) {
	if e.firewallChain() {
		b.Start(syntax.ChainFirewall)
		b.Args(syntax.LocalhostBlock)
		b.End()
	}
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.FrontFilter(pp, b)
		}
	}
	e.forwardRules(b)
}

func (e *Emitter) forwardRules(b *syntax.Buffer) {
	if !e.sm.Host.TCPBeLiberal {
		b.Start(syntax.ChainForward)
		b.Words("-m", "conntrack", "--ctstate", "INVALID")
		if e.sm.Host.NFAcct {
			b.Words("-m", "nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		b.Words("-j", "DROP")
		b.End()
	}
	b.Start(syntax.ChainForward)
	b.Comment("kubernetes forwarding rules")
	b.Words("-m", "mark", "--mark", e.mark+"/"+e.mark, "-j", "ACCEPT")
	b.End()
	b.Start(syntax.ChainForward)
	b.Comment("kubernetes forwarding conntrack rule")
	b.Words("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	b.End()
}

func (e *Emitter) writeNat(b *syntax.Buffer, f Format) {
	b.Line("*nat")
	if f == Complete {
		e.builtinDecls(b, "nat")
	}
	for _, c := range NatFixedChains {
		b.ChainLine(c, "-")
	}
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.ChainDecls(pp, b)
		}
	}
	if f == Complete {
		e.jumps(b, "nat")
	}
	e.NatFixedRules(b)
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.FrontNat(pp, b)
			e.ChainRules(pp, b)
		}
	}
	e.NodePortsJump(b)
	b.Line("COMMIT")
}

// NatFixedRules writes KUBE-POSTROUTING and KUBE-MARK-MASQ.
func (e *Emitter) NatFixedRules(b *syntax.Buffer) {
	m := e.mark
	b.Start(syntax.ChainPostrouting)
	b.Words("-m", "mark", "!", "--mark", m+"/"+m, "-j", "RETURN")
	b.End()
	b.Start(syntax.ChainPostrouting)
	b.Words("-j", "MARK", "--xor-mark", m)
	b.End()
	b.Start(syntax.ChainPostrouting)
	b.Comment("kubernetes service traffic requiring SNAT")
	b.Words("-j", "MASQUERADE")
	if e.sm.Host.RandomFully {
		b.Words("--random-fully")
	}
	b.End()
	b.Start(syntax.ChainMarkMasq)
	b.Words("-j", "MARK", "--or-mark", m)
	b.End()
}

const nodePortsComment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"

// NodePortsJump writes the last rule(s) of KUBE-SERVICES: node-port traffic goes on to
// KUBE-NODEPORTS, for every local address or for the addresses nodePortAddresses selects.
func (e *Emitter) NodePortsJump(b *syntax.Buffer) {
	npa := e.sm.NodePorts
	ipv6 := e.sm.Family == model.IPv6
	if npa.MatchAll {
		b.Start(syntax.ChainServices)
		b.Comment(nodePortsComment)
		b.Words("-m", "addrtype", "--dst-type", "LOCAL")
		if ipv6 {
			b.Words("!", "-d", "::1/128")
		} else if !npa.Localhost {
			b.Words("!", "-d", "127.0.0.0/8")
		}
		b.Words("-j", syntax.ChainNodePorts)
		b.End()
		return
	}
	for _, ip := range npa.Addresses {
		if ip.IsLoopback() && (ipv6 || !npa.Localhost) {
			continue
		}
		b.Start(syntax.ChainServices)
		b.Comment(nodePortsComment)
		b.Words("-d", ip.String(), "-j", syntax.ChainNodePorts)
		b.End()
	}
}

func (e *Emitter) builtinDecls(b *syntax.Buffer, table string) {
	for _, c := range syntax.BuiltinChains(table) {
		b.ChainLine(c, "ACCEPT")
	}
}

func (e *Emitter) jumps(b *syntax.Buffer, table string) {
	for _, r := range syntax.JumpRules(table) {
		b.Start(r.Chain)
		b.Args(r.Args)
		b.End()
	}
}

// MapOwners names the chains of every service port and endpoint of a service map, exactly
// (the names are hashes of what the map holds).
func MapOwners(sm *ir.ServiceMap) syntax.Owners {
	n := 0
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			n += 4 + len(p.Endpoints)
		}
	}
	o := make(syntax.Owners, n) // sized at once: 140,000 names at 10,000 Services
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			spn, proto := p.Name.String(), p.Protocol.Lower()
			c := syntax.ServiceChainsFor(spn, proto)
			for _, name := range []string{c.SVC, c.SVL, c.EXT, c.FW} {
				o[name] = syntax.Owner{Port: spn}
			}
			for _, e := range p.Endpoints {
				ep := e.String()
				o[syntax.EndpointChain(spn, proto, ep)] = syntax.Owner{Port: spn, Endpoint: ep}
			}
		}
	}
	return o
}

// Map is the service map the emitter writes.
func (e *Emitter) Map() *ir.ServiceMap { return e.sm }

// Plans are the plans of every service's ports, once PlanAll has run.
func (e *Emitter) Plans() [][]*Port { return e.plans }
