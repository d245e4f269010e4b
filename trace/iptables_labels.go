package trace

import (
	"strings"

	"github.com/svcgen/svcgen/emit/iptables"
)

// serviceLabels names the Service port behind each of kube-proxy's hashed chains
// (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW-, KUBE-SEP-) from the rules alone.
//
// A candidate name comes from the comments of the chain's own rules or of the rules that
// jump to it (kube-proxy writes the service port name, "ns/svc:port", in most of them),
// or from the label of a chain that jumps to it (in large-cluster mode KUBE-SEP rules
// have no comments). A candidate is kept only when hashing it gives the chain's name, so
// a hand-edited comment cannot mislabel a chain; a chain no candidate hashes to stays
// unlabelled. Endpoint chains are labelled "ns/svc:port -> IP:port", the endpoint taken
// from their DNAT rule.
func serviceLabels(tb *iptables.Table, specs map[*iptables.Rule]*iptables.Spec) map[string]string {
	labels := map[string]string{}
	candidates := map[string][]string{}
	parents := map[string][]string{}
	dnat := map[string]string{}
	for _, c := range tb.Chains {
		for i := range c.Rules {
			s := specs[&c.Rules[i]]
			names := commentNames(s.Comment())
			if iptables.IsServiceChain(c.Name) {
				candidates[c.Name] = append(candidates[c.Name], names...)
			}
			if iptables.IsServiceChain(s.Target) {
				candidates[s.Target] = append(candidates[s.Target], names...)
				parents[s.Target] = append(parents[s.Target], c.Name)
			}
			if s.Target == "DNAT" {
				if o, ok := s.TargetOpt("to-destination"); ok {
					dnat[c.Name] = o.Value()
				}
			}
		}
	}
	// Labels flow down jumps (KUBE-SERVICES -> KUBE-EXT -> KUBE-SVL -> KUBE-SEP), at most
	// one step per round.
	for round := 0; round < 4; round++ {
		changed := false
		for _, c := range tb.Chains {
			if labels[c.Name] != "" || !iptables.IsServiceChain(c.Name) {
				continue
			}
			names := candidates[c.Name]
			for _, p := range parents[c.Name] {
				if l := labels[p]; l != "" {
					spn, _, _ := strings.Cut(l, " -> ")
					names = append(names, spn)
				}
			}
			if l := labelFor(c.Name, names, dnat[c.Name]); l != "" {
				labels[c.Name] = l
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return labels
}

// commentNames picks the words of a comment that look like a service port name.
func commentNames(comment string) []string {
	var out []string
	for _, w := range strings.Fields(comment) {
		if strings.Contains(w, "/") {
			out = append(out, w)
		}
	}
	return out
}

// labelFor returns the first candidate whose hash is the chain's name.
func labelFor(chain string, names []string, endpoint string) string {
	sep := strings.HasPrefix(chain, "KUBE-SEP-")
	for _, spn := range names {
		for _, proto := range []string{"tcp", "udp", "sctp"} {
			if sep {
				if endpoint != "" && iptables.EndpointChain(spn, proto, endpoint) == chain {
					return spn + " -> " + endpoint
				}
				continue
			}
			c := iptables.ServiceChainsFor(spn, proto)
			if chain == c.SVC || chain == c.SVL || chain == c.EXT || chain == c.FW {
				return spn
			}
		}
	}
	return ""
}
