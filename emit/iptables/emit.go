// Package iptables writes a service map as kube-proxy's iptables rules and reads
// iptables-restore / iptables-save text back.
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
package iptables

import (
	"bufio"
	"io"
	"slices"

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

// Options control the output.
type Options struct {
	Format Format
	// Previous is the ruleset on the node now (svcgen output or iptables-save). When set,
	// the output is kube-proxy's partial sync against it: fixed chains in full, the
	// chains of services that changed, and stale chains flushed and deleted with -X.
	// It implies NoFlush.
	Previous *Ruleset
	// Minimal (with Previous) also leaves out fixed chains whose rules did not change.
	Minimal bool
	// FullSync (with Previous) rewrites every service's chains, as kube-proxy's full
	// sync does, while still deleting the chains no Service uses any more.
	FullSync bool
	// EnsureJumps (with Previous) also inserts kube-proxy's jumps from the built-in
	// chains into its chains where Previous lacks them, and deletes extra copies, in the
	// same blocks as the chains: what kube-proxy does with EnsureRule before restoring.
	EnsureJumps bool
	// MarkCommits (with Previous) ends each block by declaring and deleting the chain
	// SVCGEN-COMMIT. iptables-nft commits a block as one nf_tables transaction, and
	// the kernel commits it (moving the ruleset generation by one) only when it holds
	// a change: a block that only declares chains as they already are, or flushes
	// empty ones, holds none. The deletion of a chain the block declared always is
	// one, so each block moves the generation by exactly one (see Commits, and
	// apply/generation.go, which relies on it).
	MarkCommits bool
	// MaxChains (with Previous), when more than zero, stages a restore with more chain
	// and -X lines than this into blocks of at most this many (see stage.go).
	MaxChains int
	// PreviousMap (with Previous) is the service map Previous was written from, when the
	// caller knows it (apply keeps the state it loaded in memory). A Service equal in
	// both is taken to have its chains in Previous as written and is neither written
	// nor compared: a one-endpoint change costs one service's rules, not all of them.
	PreviousMap *ir.ServiceMap
	// Changed (with PreviousMap), when not nil, names the Services ("namespace/name")
	// that may differ from PreviousMap, as compiler.Session reports them: every other
	// Service is taken to be the same and is not even compared, so the cost of a
	// restore no longer grows with the size of the map. Nil compares every Service
	// (by pointer first: an incremental compile shares the ones it did not touch).
	Changed []string
}

// Fixed chains kube-proxy declares on every sync, in its order.
var (
	filterFixedChains = []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall}
	natFixedChains    = []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq}
)

// builtinChains are the chains of the Complete format's tables.
var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

// jumpRule is one of the rules kube-proxy (and kubelet) ensure in a built-in chain,
// outside the restore payload.
type jumpRule struct {
	table, from, to string
	ctNew           bool // -m conntrack --ctstate NEW
	comment         string
}

// jumpRules is upstream's iptablesJumpChains followed by iptablesKubeletJumpChains, in
// the order it ensures them. Each is inserted at position 1, so on a fresh node a
// built-in chain lists them in reverse (see orderedJumps).
var jumpRules = []jumpRule{
	{"filter", "INPUT", chainExternalServices, true, "kubernetes externally-visible service portals"},
	{"filter", "FORWARD", chainExternalServices, true, "kubernetes externally-visible service portals"},
	{"filter", "INPUT", chainNodePorts, false, "kubernetes health check service ports"},
	{"filter", "FORWARD", chainServices, true, "kubernetes service portals"},
	{"filter", "OUTPUT", chainServices, true, "kubernetes service portals"},
	{"filter", "FORWARD", chainForward, false, "kubernetes forwarding rules"},
	{"filter", "INPUT", chainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"filter", "OUTPUT", chainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"filter", "FORWARD", chainProxyFirewall, true, "kubernetes load balancer firewall"},
	{"nat", "OUTPUT", chainServices, false, "kubernetes service portals"},
	{"nat", "PREROUTING", chainServices, false, "kubernetes service portals"},
	{"nat", "POSTROUTING", chainPostrouting, false, "kubernetes postrouting rules"},
	{"filter", "INPUT", chainFirewall, false, ""},
	{"filter", "OUTPUT", chainFirewall, false, ""},
}

// Jump is a rule a proxy keeps in a built-in chain, outside its restore payload.
type Jump struct {
	Table, From string
	Args        []string
}

// EnsureJumps changes a ruleset as a proxy's EnsureRule with Prepend changes the
// kernel: each jump missing from its built-in chain is inserted at position 1, in the
// order given (so on a fresh node the last one comes first).
func EnsureJumps(rs *Ruleset, jumps []Jump) {
	for _, j := range jumps {
		t := rs.Table(j.Table)
		if t == nil {
			t = &Table{Name: j.Table, index: map[string]*Chain{}}
			rs.Tables = append(rs.Tables, t)
		}
		c := t.chain(j.From)
		if c.find(j.Args) < 0 {
			c.Rules = slices.Insert(c.Rules, 0, Rule{Chain: j.From, Args: j.Args})
		}
	}
}

// JumpRules returns the jump rules of one table in the order a node that kube-proxy set
// up lists them: for each built-in chain, the last one ensured comes first.
func JumpRules(table string) []Rule {
	var out []Rule
	for _, from := range builtinChains[table] {
		for i := len(jumpRules) - 1; i >= 0; i-- {
			j := jumpRules[i]
			if j.table == table && j.from == from {
				out = append(out, Rule{Chain: from, Args: j.args()})
			}
		}
	}
	return out
}

func (j jumpRule) args() []string {
	var a []string
	if j.ctNew {
		a = append(a, "-m", "conntrack", "--ctstate", "NEW")
	}
	if j.comment != "" {
		a = append(a, "-m", "comment", "--comment", j.comment)
	}
	return append(a, "-j", j.to)
}

// emitter holds what every service port's rules need.
type emitter struct {
	sm    *ir.ServiceMap
	mark  string
	probs probabilities
	plans [][]*portPlan // per service, per port, once planAll has run
}

// newEmitter returns an emitter that plans ports when asked (planAll, planService): a
// partial restore against a known previous map plans only what changed.
func newEmitter(sm *ir.ServiceMap) *emitter {
	return &emitter{sm: sm, mark: sm.MasqueradeMark()}
}

// planAll plans every service port. withEndpoints also names the endpoint chains,
// which only the rules of a port's own chains need (hashing them is most of a plan's
// cost); the fixed chains' rules do without.
func (e *emitter) planAll(withEndpoints bool) {
	e.plans = make([][]*portPlan, len(e.sm.Services))
	for i, s := range e.sm.Services {
		e.plans[i] = e.planService(s, withEndpoints)
	}
}

// planService plans the ports of one service.
func (e *emitter) planService(s *ir.Service, withEndpoints bool) []*portPlan {
	plans := make([]*portPlan, len(s.Ports))
	for j, p := range s.Ports {
		plans[j] = e.planPort(p, withEndpoints)
	}
	return plans
}

// Write writes the service map's rules.
func Write(out io.Writer, sm *ir.ServiceMap, opts Options) error {
	e := newEmitter(sm)
	if opts.Previous != nil {
		return e.writePartial(out, opts)
	}
	return e.write(out, opts.Format)
}

// write streams both tables through one buffer: the text is never held whole.
func (e *emitter) write(out io.Writer, f Format) error {
	e.planAll(true)
	bw := bufio.NewWriterSize(out, flushSize)
	b := &lineBuf{out: bw}
	e.writeFilter(b, f)
	e.writeNat(b, f)
	b.flush()
	if b.err != nil {
		return b.err
	}
	return bw.Flush()
}

// firewallChain reports whether kube-proxy writes KUBE-FIREWALL's localhost rule.
func (e *emitter) firewallChain() bool {
	return e.sm.Family == model.IPv4 && e.sm.NodePorts.Localhost
}

// filterChains lists the filter table's KUBE-* chains in declaration order.
func (e *emitter) filterChains() []string {
	chains := append([]string(nil), filterFixedChains...)
	if e.firewallChain() {
		chains = append(chains, chainFirewall)
	}
	return chains
}

func (e *emitter) writeFilter(b *lineBuf, f Format) {
	b.line("*filter")
	chains := e.filterChains()
	if f == Complete {
		e.builtinDecls(b, "filter")
		if !e.firewallChain() {
			chains = append(chains, chainFirewall) // kubelet's jump target, always there
		}
	}
	for _, c := range chains {
		b.chainLine(c, "-")
	}
	if f == Complete {
		e.jumps(b, "filter")
	}
	e.filterRules(b)
	b.line("COMMIT")
}

// filterRules writes every filter rule of the payload.
func (e *emitter) filterRules(b *lineBuf) {
	if e.firewallChain() {
		b.start(chainFirewall)
		localhostBlock(b)
		b.end()
	}
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.frontFilter(pp, b)
		}
	}
	e.forwardRules(b)
}

// localhostBlock writes KUBE-FIREWALL's one rule (kubelet writes the same): packets to
// 127.0.0.0/8 from elsewhere are dropped unless they belong to a connection.
func localhostBlock(b *lineBuf) {
	b.comment("block incoming localnet connections")
	b.w("-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
}

func (e *emitter) forwardRules(b *lineBuf) {
	if !e.sm.Host.TCPBeLiberal {
		b.start(chainForward)
		b.w("-m", "conntrack", "--ctstate", "INVALID")
		if e.sm.Host.NFAcct {
			b.w("-m", "nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		b.w("-j", "DROP")
		b.end()
	}
	b.start(chainForward)
	b.comment("kubernetes forwarding rules")
	b.w("-m", "mark", "--mark", e.mark+"/"+e.mark, "-j", "ACCEPT")
	b.end()
	b.start(chainForward)
	b.comment("kubernetes forwarding conntrack rule")
	b.w("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	b.end()
}

func (e *emitter) writeNat(b *lineBuf, f Format) {
	b.line("*nat")
	if f == Complete {
		e.builtinDecls(b, "nat")
	}
	for _, c := range natFixedChains {
		b.chainLine(c, "-")
	}
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.chainDecls(pp, b)
		}
	}
	if f == Complete {
		e.jumps(b, "nat")
	}
	e.natFixedRules(b)
	for _, ports := range e.plans {
		for _, pp := range ports {
			e.frontNat(pp, b)
			e.chainRules(pp, b)
		}
	}
	e.nodePortsJump(b)
	b.line("COMMIT")
}

// natFixedRules writes KUBE-POSTROUTING and KUBE-MARK-MASQ.
func (e *emitter) natFixedRules(b *lineBuf) {
	m := e.mark
	b.start(chainPostrouting)
	b.w("-m", "mark", "!", "--mark", m+"/"+m, "-j", "RETURN")
	b.end()
	b.start(chainPostrouting)
	b.w("-j", "MARK", "--xor-mark", m)
	b.end()
	b.start(chainPostrouting)
	b.comment("kubernetes service traffic requiring SNAT")
	b.w("-j", "MASQUERADE")
	if e.sm.Host.RandomFully {
		b.w("--random-fully")
	}
	b.end()
	b.start(chainMarkMasq)
	b.w("-j", "MARK", "--or-mark", m)
	b.end()
}

const nodePortsComment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"

// nodePortsJump writes the last rule(s) of KUBE-SERVICES: node-port traffic goes on to
// KUBE-NODEPORTS, for every local address or for the addresses nodePortAddresses selects.
func (e *emitter) nodePortsJump(b *lineBuf) {
	npa := e.sm.NodePorts
	ipv6 := e.sm.Family == model.IPv6
	if npa.MatchAll {
		b.start(chainServices)
		b.comment(nodePortsComment)
		b.w("-m", "addrtype", "--dst-type", "LOCAL")
		if ipv6 {
			b.w("!", "-d", "::1/128")
		} else if !npa.Localhost {
			b.w("!", "-d", "127.0.0.0/8")
		}
		b.w("-j", chainNodePorts)
		b.end()
		return
	}
	for _, ip := range npa.Addresses {
		if ip.IsLoopback() && (ipv6 || !npa.Localhost) {
			continue
		}
		b.start(chainServices)
		b.comment(nodePortsComment)
		b.w("-d", ip.String(), "-j", chainNodePorts)
		b.end()
	}
}

func (e *emitter) builtinDecls(b *lineBuf, table string) {
	for _, c := range builtinChains[table] {
		b.chainLine(c, "ACCEPT")
	}
}

func (e *emitter) jumps(b *lineBuf, table string) {
	for _, r := range JumpRules(table) {
		b.start(r.Chain)
		writeArgs(b, r.Args)
		b.end()
	}
}

// writeArgs writes parsed words back, quoting comments through the line writer.
func writeArgs(b *lineBuf, args []string) {
	for i := 0; i < len(args); i++ {
		if i+3 < len(args) && args[i] == "-m" && args[i+1] == "comment" && args[i+2] == "--comment" {
			b.comment(args[i+3])
			i += 3
			continue
		}
		b.w(args[i])
	}
}
