package trace

import (
	"strings"

	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// nftLabels names the Service port behind each of kube-proxy's per-service nftables
// chains. Their names say it in clear: "service-ULMVA6XW-ns1/svc1/tcp/p80" is
// ns1/svc1:p80, and "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80" is its endpoint,
// whose address the chain's dnat rule gives exactly (the name spells an IPv6 address
// with dots).
func nftLabels(st *nftsyntax.State, rules map[*knftables.Rule]*nftsyntax.Rule) map[string]string {
	out := map[string]string{}
	for name, c := range st.Chains {
		label := nftsyntax.PortOf(name)
		if label == "" {
			continue
		}
		if strings.Contains(name, "__") { // an endpoint's chain
			for _, r := range c.Rules {
				for _, s := range rules[r].Stmts {
					if s.Kind == nftsyntax.StmtDNAT && len(s.To) == 1 {
						label += " -> " + dnatTarget(s.To[0])
					}
				}
			}
		}
		out[name] = label
	}
	return out
}
