package verify

import (
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/trace"
)

// Difference is a documented way one mode departs from the service map's semantics
// (Expect), because upstream kube-proxy's mode does. verify holds a mode to the
// expectation with its differences applied, and reports how often each applied.
type Difference struct {
	Mode compiler.Mode
	// Name is short and stable, for reports.
	Name string
	// Reason says what the mode does and why, with the upstream source.
	Reason string
	// adjust rewrites the expectation for a probe the difference applies to, and
	// reports whether it applied.
	adjust func(c *probeContext, want *trace.Result) bool
}

// probeContext is what a difference may look at: the packet, the frontend it is for
// (found is false when it is for none) and the node's addresses.
type probeContext struct {
	frontend Frontend
	found    bool
	packet   trace.Packet
	host     trace.Host
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
		adjust: func(c *probeContext, want *trace.Result) bool {
			k := c.frontend.Kind
			if !c.found || (k != ExternalIP && k != LoadBalancerIP) || c.frontend.Port.HasEndpoints ||
				!c.host.IsLocal(c.packet.Src) || c.host.IsLocal(c.packet.Dst) {
				return false
			}
			want.Outcomes = verdict(trace.None)
			return true
		},
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
