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
	return fmt.Sprintf("%s %s -> %s", p.Proto, p.Src, netip.AddrPortFrom(p.Dst, p.DPort))
}

// Host describes the node the ruleset runs on.
type Host struct {
	// Local are the node's addresses (addrtype LOCAL); loopback is always local.
	Local []netip.Addr
}

// IsLocal reports an address of the node.
func (h Host) IsLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
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

// Result is every outcome of a packet, endpoints first, in endpoint order.
type Result struct {
	Packet   Packet
	Outcomes []Outcome
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
