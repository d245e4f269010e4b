package verify

import (
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/trace"
)

// Kind is a kind of frontend: an address and port where a Service takes traffic.
type Kind string

// Frontend kinds, in the order kube-proxy looks for them.
const (
	ClusterIP      Kind = "cluster IP"
	ExternalIP     Kind = "external IP"
	LoadBalancerIP Kind = "load-balancer IP"
	NodePort       Kind = "node port"
	HealthCheck    Kind = "health check node port"
)

// Frontend is one place a service port takes traffic.
type Frontend struct {
	Service *ir.Service
	Port    *ir.Port
	Kind    Kind
	Addr    netip.AddrPort
}

func (f Frontend) String() string {
	return string(f.Kind) + " " + f.Addr.String() + "/" + protoOf(f).Lower()
}

func protoOf(f Frontend) model.Protocol {
	if f.Kind == HealthCheck {
		return model.TCP // health checks are HTTP
	}
	return f.Port.Protocol
}

// Expect is what the service map says happens to the first packet of a connection on
// one node: the semantics kube-proxy implements in every mode (its traffic-policy and
// masquerade rules), computed from the IR's decisions without looking at any ruleset.
// It is the truth verify holds each backend's rules to; Differences lists where a mode
// departs from it on purpose.
//
// host holds the node's addresses; a packet whose source is one of them comes from the
// node itself. For many packets, make an Expecter once.
func Expect(sm *ir.ServiceMap, host trace.Host, p trace.Packet) *trace.Result {
	return NewExpecter(sm, host).Expect(p)
}

// ExpectMode is Expect with one mode's documented differences applied; applied names
// the differences that changed the expectation.
func ExpectMode(m compiler.Mode, sm *ir.ServiceMap, host trace.Host, p trace.Packet) (res *trace.Result, applied []string) {
	return NewExpecter(sm, host).ExpectMode(m, p)
}

// Expecter answers Expect for one service map, with its frontends indexed.
type Expecter struct {
	sm   *ir.ServiceMap
	host trace.Host
	// vips are cluster, external and load-balancer IPs by address, port and protocol;
	// the first frontend in map order wins, as kube-proxy's first rule does.
	vips map[vipKey]Frontend
	// nodePorts and health are listed in map order, matched by port and protocol.
	nodePorts, health map[portKey]Frontend
	// virtual are the cluster, external and load-balancer IPs; clusterIPs the first.
	virtual, clusterIPs map[netip.Addr]bool
}

type vipKey struct {
	addr  netip.AddrPort
	proto model.Protocol
}

type portKey struct {
	port  uint16
	proto model.Protocol
}

// NewExpecter indexes a service map's frontends.
func NewExpecter(sm *ir.ServiceMap, host trace.Host) *Expecter {
	x := &Expecter{sm: sm, host: host, vips: map[vipKey]Frontend{}, nodePorts: map[portKey]Frontend{}, health: map[portKey]Frontend{}, virtual: map[netip.Addr]bool{}, clusterIPs: map[netip.Addr]bool{}}
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			f := Frontend{Service: s, Port: p}
			x.clusterIPs[p.ClusterIP] = true
			add := func(k Kind, a netip.Addr) {
				x.virtual[a] = true
				key := vipKey{netip.AddrPortFrom(a, p.Port), p.Protocol}
				if _, dup := x.vips[key]; !dup {
					f.Kind, f.Addr = k, key.addr
					x.vips[key] = f
				}
			}
			add(ClusterIP, p.ClusterIP)
			for _, a := range p.ExternalIPs {
				add(ExternalIP, a)
			}
			for _, a := range p.LoadBalancerIPs {
				add(LoadBalancerIP, a)
			}
			if k := (portKey{p.NodePort, p.Protocol}); p.NodePort != 0 && x.nodePorts[k].Port == nil {
				f.Kind = NodePort
				x.nodePorts[k] = f
			}
			if k := (portKey{p.HealthCheckNodePort, model.TCP}); p.HealthCheckNodePort != 0 && x.health[k].Port == nil {
				f.Kind = HealthCheck
				x.health[k] = f
			}
		}
	}
	return x
}

// Expect is the package-level Expect for this expecter's map.
func (x *Expecter) Expect(p trace.Packet) *trace.Result {
	return x.expect(p, semantics{})
}

// ExpectMode is the package-level ExpectMode for this expecter's map. A difference
// counts as applied when turning it off alone would change the expectation.
func (x *Expecter) ExpectMode(m compiler.Mode, p trace.Packet) (res *trace.Result, applied []string) {
	diffs := DifferencesOf(m)
	var sem semantics
	for _, d := range diffs {
		d.set(&sem)
	}
	res = x.expect(p, sem)
	sum := Summary(res)
	if len(diffs) == 0 || Summary(x.expect(p, semantics{})) == sum {
		return res, nil // no difference changes this probe
	}
	for i, d := range diffs {
		var without semantics
		for j, o := range diffs {
			if j != i {
				o.set(&without)
			}
		}
		if Summary(x.expect(p, without)) != sum {
			applied = append(applied, d.Name)
		}
	}
	return res, applied
}

func (x *Expecter) expect(p trace.Packet, sem semantics) *trace.Result {
	res := &trace.Result{Packet: p, Mode: "service map"}
	f, ok := x.frontend(p)
	switch {
	case ok:
	case sem.clusterIPsCheck && x.clusterIPs[p.Dst]:
		res.Outcomes = verdict(trace.Reject)
		return res
	case sem.clusterIPsCheck && slices.ContainsFunc(x.sm.ServiceCIDRs, func(c netip.Prefix) bool { return c.Contains(p.Dst) }):
		res.Outcomes = verdict(trace.Drop)
		return res
	default:
		res.Outcomes = verdict(trace.None)
		return res
	}
	res.Outcomes = x.outcomes(f, p, sem)
	return res
}

// frontend finds the frontend a packet is for: a cluster, external or load-balancer
// IP, else a node port, else a health-check node port (kube-proxy's KUBE-SERVICES
// order, its last rule handing local destinations to KUBE-NODEPORTS).
func (x *Expecter) frontend(p trace.Packet) (Frontend, bool) {
	proto := model.Protocol(strings.ToUpper(p.Proto))
	dst := netip.AddrPortFrom(p.Dst, p.DPort)
	if f, ok := x.vips[vipKey{dst, proto}]; ok {
		return f, true
	}
	if f, ok := x.nodePorts[portKey{p.DPort, proto}]; ok && x.acceptsNodePorts(p.Dst) {
		f.Addr = dst
		return f, true
	}
	if f, ok := x.health[portKey{p.DPort, proto}]; ok && x.host.IsLocal(p.Dst) {
		f.Addr = dst
		return f, true
	}
	return Frontend{}, false
}

// acceptsNodePorts: nodePortAddresses selects the node's addresses (every local one
// when it matches all), loopback only for IPv4 with localhost node ports.
func (x *Expecter) acceptsNodePorts(a netip.Addr) bool {
	npa := x.sm.NodePorts
	if a.IsLoopback() && (x.sm.Family == model.IPv6 || !npa.Localhost) {
		return false
	}
	if npa.MatchAll {
		return x.host.IsLocal(a)
	}
	return slices.Contains(npa.Addresses, a)
}

// outcomes applies the port's decisions to a packet for one of its frontends, with
// a mode's documented differences (sem) switched on.
func (x *Expecter) outcomes(f Frontend, p trace.Packet, sem semantics) []trace.Outcome {
	port := f.Port
	switch {
	case f.Kind == HealthCheck && sem.healthCheckNeedsNodePortAddress && port.NodePort != 0 && !x.nodePortAddressBeyondLoopback():
		return verdict(trace.None)
	case f.Kind == HealthCheck && sem.noHealthCheckRules:
		return verdict(trace.None)
	case f.Kind == HealthCheck:
		return verdict(trace.Accept)
	case f.Kind == NodePort && p.Dst.IsLoopback() && sem.noLocalhostNodePorts:
		return verdict(trace.None)
	case f.Kind == ClusterIP:
		return x.clusterIP(port, p, sem)
	}
	if !port.HasEndpoints {
		switch {
		case f.Kind == LoadBalancerIP && port.HasSourceRanges() && !x.sourceAllowed(port, f, p.Src) &&
			(sem.firewallAlways || (sem.firewallWithoutEndpoints && !x.host.IsLocal(p.Src) && !x.virtual[p.Src])):
			return verdict(trace.Drop)
		case f.Kind != NodePort && sem.noExternalRejectFromNode && x.host.IsLocal(p.Src) && !x.host.IsLocal(p.Dst):
			return verdict(trace.None)
		}
		return verdict(trace.Reject)
	}
	if f.Kind == LoadBalancerIP && port.HasSourceRanges() && !x.sourceAllowed(port, f, p.Src) {
		return verdict(trace.Drop)
	}
	if !port.ExternalPolicyLocal {
		return x.spread(port, port.ClusterEndpoints(), p, true, sem)
	}
	if sem.externalLocalForAll {
		return x.local(port, p, false, sem)
	}
	// externalTrafficPolicy Local: traffic from pods and from the node itself is
	// short-circuited to every endpoint (the node's is masqueraded, so replies come
	// back); the rest stays on this node, keeping its source address.
	switch {
	case x.sm.LocalDetector.Implemented() && x.fromPod(p):
		return x.spread(port, port.ClusterEndpoints(), p, false, sem)
	case x.host.IsLocal(p.Src):
		return x.spread(port, port.ClusterEndpoints(), p, true, sem)
	}
	return x.local(port, p, false, sem)
}

// clusterIP: off-cluster traffic to a cluster IP is masqueraded (all of it with
// masqueradeAll); without a local-traffic detector, none is.
func (x *Expecter) clusterIP(port *ir.Port, p trace.Packet, sem semantics) []trace.Outcome {
	det := x.sm.LocalDetector.Implemented()
	src := p
	if sem.nodeConnectsFromClusterIP && x.host.IsLocal(p.Src) {
		src.Src, src.InIface = port.ClusterIP, ""
	}
	masq := x.sm.MasqueradeAll || (det && !x.fromPod(src)) ||
		(!det && sem.nodeConnectsFromClusterIP && x.host.IsLocal(p.Src))
	switch port.Internal() {
	case ir.Reject:
		return verdict(trace.Reject)
	case ir.ToCluster:
		return x.spread(port, port.ClusterEndpoints(), p, masq, sem)
	}
	return x.local(port, p, masq, sem)
}

// local sends Local-policy traffic to this node's endpoints; without one it is dropped,
// or, where the mode falls back, sent to the Cluster endpoints (rejected when there
// are none).
func (x *Expecter) local(port *ir.Port, p trace.Packet, masq bool, sem semantics) []trace.Outcome {
	switch {
	case len(port.Local) > 0:
		return x.spread(port, port.LocalEndpoints(), p, masq, sem)
	case !sem.localFallback:
		return verdict(trace.Drop)
	case len(port.Cluster) > 0:
		return x.spread(port, port.ClusterEndpoints(), p, masq, sem)
	}
	return verdict(trace.Reject)
}

// nodePortAddressBeyondLoopback: some address other than loopback (and IPv6
// link-local) takes node ports.
func (x *Expecter) nodePortAddressBeyondLoopback() bool {
	ok := func(a netip.Addr) bool { return !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast()) }
	if x.sm.NodePorts.MatchAll {
		return slices.ContainsFunc(x.host.Local, ok)
	}
	return slices.ContainsFunc(x.sm.NodePorts.Addresses, ok)
}

// fromPod is the local-traffic detector's answer for a packet.
func (x *Expecter) fromPod(p trace.Packet) bool {
	d := x.sm.LocalDetector
	switch d.Mode {
	case "ClusterCIDR", "NodeCIDR":
		return d.CIDR.Contains(p.Src)
	case "BridgeInterface":
		return p.InIface != "" && p.InIface == d.Interface
	case "InterfaceNamePrefix":
		return p.InIface != "" && strings.HasPrefix(p.InIface, d.Interface)
	}
	return false
}

// sourceAllowed: loadBalancerSourceRanges admit the source, or the node reaches its own
// load-balancer IP (which then is the source) and a range holds the node's IP.
func (x *Expecter) sourceAllowed(port *ir.Port, f Frontend, src netip.Addr) bool {
	for _, r := range port.SourceRanges {
		if r.Contains(src) {
			return true
		}
	}
	return port.FirewallAllowsNode(x.sm.Node.IP) && src == f.Addr.Addr()
}

func verdict(v trace.Verdict) []trace.Outcome {
	return []trace.Outcome{{Verdict: v, Probability: big.NewRat(1, 1)}}
}

// spread sends the packet to each endpoint with the same chance; an endpoint reaching
// itself through the Service (hairpin) is always masqueraded (where the mode does
// that only for endpoints on this node, only those). A packet from elsewhere whose
// endpoint is one of the node's own addresses (a hostNetwork pod of this node) is
// delivered here and never passes nat POSTROUTING, where masquerading happens, so it
// keeps its source whatever it was marked for (the kernel does so in every mode).
func (x *Expecter) spread(port *ir.Port, eps []ir.Endpoint, p trace.Packet, masq bool, sem semantics) []trace.Outcome {
	if len(eps) == 0 {
		return verdict(trace.Drop)
	}
	out := make([]trace.Outcome, len(eps))
	for i, e := range eps {
		out[i] = trace.Outcome{
			Verdict:     trace.DNAT,
			Endpoint:    e.String(),
			Probability: big.NewRat(1, int64(len(eps))),
			Masquerade: (masq || (e.IP == p.Src && (e.Local || !sem.hairpinLocalOnly))) &&
				!(x.host.IsLocal(e.IP) && !x.host.IsLocal(p.Src)),
			Affinity: port.AffinitySeconds > 0,
		}
	}
	return out
}
