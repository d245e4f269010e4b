// Package trace follows a packet through a ruleset and says where it can go: each
// rule that matched, the endpoints it can reach with their probabilities as exact
// fractions, whether it is masqueraded, and the verdict.
package trace

import (
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strings"
)

// Packet is the first packet of a new connection.
type Packet struct {
	Src, Dst netip.Addr
	DPort    uint16
	Proto    string // tcp, udp or sctp
	// InIface is the interface the packet arrives on, for interface-based local-traffic
	// detection; empty when unknown or irrelevant.
	InIface string
}

func (p Packet) String() string {
	return fmt.Sprintf("%s %s -> %s", p.Proto, p.Src, p.dst())
}

func (p Packet) dst() string { return netip.AddrPortFrom(p.Dst, p.DPort).String() }

// Host describes the node the ruleset runs on.
type Host struct {
	// Local are the node's addresses (addrtype LOCAL); loopback is always local.
	Local []netip.Addr
	// index holds Local when it is long (in ipvs mode every Service address is
	// local): see indexed.
	index map[netip.Addr]bool
}

// indexed returns the host with its addresses in a map, for hosts with many.
func (h Host) indexed() Host {
	h.index = make(map[netip.Addr]bool, len(h.Local))
	for _, a := range h.Local {
		h.index[a] = true
	}
	return h
}

// IsLocal reports an address of the node.
func (h Host) IsLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	if h.index != nil {
		return h.index[a]
	}
	for _, l := range h.Local {
		if l == a {
			return true
		}
	}
	return false
}

// Verdict is what finally happens to the packet.
type Verdict string

// Verdicts.
const (
	DNAT   Verdict = "DNAT"   // delivered to an endpoint
	Reject Verdict = "REJECT" // refused at once
	Drop   Verdict = "DROP"   // dropped silently
	Accept Verdict = "ACCEPT" // accepted by a rule, not translated
	None   Verdict = ""       // no rule decided; the packet goes on unchanged
)

// Step is one rule that matched on the way.
type Step struct {
	Table, Chain string
	Rule         string
	// Service names the Service port behind a chain that belongs to one ("ns/svc:port",
	// or "ns/svc:port -> IP:port" for an endpoint's chain); empty for shared chains.
	Service string
	// P is the chance that the rule matched once the packet reached it: 1 for a plain
	// match, 1/k for kube-proxy's "-m statistic" and "numgen" spreading. Tracers may
	// share the value between steps: read it, never change it.
	P *big.Rat
}

// Outcome is one way the packet can go.
type Outcome struct {
	Verdict     Verdict
	Endpoint    string   // "IP:port" after DNAT
	Probability *big.Rat // of this outcome
	Masquerade  bool
	// Marked: the nat rules set a mark (kube-proxy's masquerade mark), whether or not
	// the packet got as far as POSTROUTING.
	Marked bool
	// Affinity: the endpoint is remembered for the client (ClientIP session affinity).
	Affinity bool
	Path     []Step
}

// Result is every outcome of a packet, in endpoint order (outcomes without an endpoint
// first).
type Result struct {
	Packet Packet
	// Mode is the ruleset's kind: iptables, nftables or ipvs.
	Mode string
	// Source describes the packet's source; the caller fills it in when it knows.
	Source   Source
	Outcomes []Outcome
}

// Locality is where a packet's source is, as the node sees it.
type Locality string

// Localities.
const (
	Unknown   Locality = ""
	FromNode  Locality = "node"       // the node itself: the packet starts in nat OUTPUT
	LocalPod  Locality = "local-pod"  // a pod on this node: it arrives on a pod interface
	RemotePod Locality = "remote-pod" // a pod on another node: it arrives from the network
	Outside   Locality = "outside"    // another host, not a pod: it arrives from the network
)

// Source says where a traced packet comes from, for people reading a trace.
type Source struct {
	Locality Locality
	// Name is the Pod or Node the address belongs to ("default/web-1", "node1").
	Name string
}

func (s Source) String() string {
	var d string
	switch s.Locality {
	case FromNode:
		d = "the node itself"
	case LocalPod:
		d = "a pod on this node"
	case RemotePod:
		d = "a pod on another node"
	case Outside:
		d = "another host"
	default:
		return ""
	}
	if s.Name != "" {
		d += " (" + s.Name + ")"
	}
	return d
}

// Tracer follows packets through one node's ruleset. Every backend's tracer (iptables,
// nftables, ipvs) answers with the same Result, so trace output, verify and graph work
// the same for all of them.
type Tracer interface {
	Trace(Packet) (*Result, error)
}

// WithoutPaths returns a tracer of the same rules whose results leave out each
// outcome's Path (nil); everything else is the same. verify compares outcomes only,
// and recording the steps (each rule's text, its Service, a copy of the path at every
// fork) cost more than the rest of a trace: at 10,000 Services most of its
// allocations. The tracers of this package share their rules with the copy; any
// other tracer is returned as it is.
func WithoutPaths(t Tracer) Tracer {
	switch t := t.(type) {
	case *IPTables:
		c := *t
		c.noPaths = true
		return &c
	case *NFT:
		c := *t
		c.noPaths = true
		return &c
	case *IPVS:
		c := *t
		c.ipt = WithoutPaths(t.ipt).(*IPTables)
		return &c
	case familyTracer:
		if t.v4 != nil {
			t.v4 = WithoutPaths(t.v4)
		}
		if t.v6 != nil {
			t.v6 = WithoutPaths(t.v6)
		}
		return t
	}
	return t
}

// Endpoints lists the endpoints the packet can reach, sorted.
func (r *Result) Endpoints() []string {
	var eps []string
	for _, o := range r.Outcomes {
		if o.Verdict == DNAT {
			eps = append(eps, o.Endpoint)
		}
	}
	sort.Strings(eps)
	return eps
}

// Summary is upstream's flow-test form: the endpoints joined with ", ", or the verdict.
func (r *Result) Summary() string {
	if eps := r.Endpoints(); len(eps) > 0 {
		return strings.Join(eps, ", ")
	}
	if len(r.Outcomes) > 0 {
		return string(r.Outcomes[0].Verdict)
	}
	return ""
}

// Masquerade reports whether every outcome is masqueraded; mixed reports outcomes that
// disagree.
func (r *Result) Masquerade() (masq, mixed bool) {
	for i, o := range r.Outcomes {
		if i == 0 {
			masq = o.Masquerade
		} else if o.Masquerade != masq {
			mixed = true
		}
	}
	return masq, mixed
}

// merge sums outcomes that end the same way (the same endpoint reached by several
// paths), keeping the first path.
func merge(outs []Outcome) []Outcome {
	var merged []Outcome
	index := map[string]int{}
	for _, o := range outs {
		key := fmt.Sprintf("%s|%s|%v|%v|%v", o.Verdict, o.Endpoint, o.Masquerade, o.Marked, o.Affinity)
		if i, ok := index[key]; ok {
			merged[i].Probability = new(big.Rat).Add(merged[i].Probability, o.Probability)
			continue
		}
		index[key] = len(merged)
		merged = append(merged, o)
	}
	sort.SliceStable(merged, func(i, j int) bool { return merged[i].Endpoint < merged[j].Endpoint })
	return merged
}
