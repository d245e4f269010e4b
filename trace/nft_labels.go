package trace

import (
	"regexp"
	"strings"

	"github.com/svcgen/svcgen/emit/nft"
)

// nftLabels names the Service port behind each of kube-proxy's per-service nftables
// chains. Their names say it in clear: "service-ULMVA6XW-ns1/svc1/tcp/p80" is
// ns1/svc1:p80, and "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80" is its endpoint,
// whose address the chain's dnat rule gives exactly (the name spells an IPv6 address
// with dots).
func nftLabels(st *nft.State) map[string]string {
	out := map[string]string{}
	for name, c := range st.Chains {
		parts := strings.SplitN(name, "-", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/") {
			continue
		}
		base, _, isEndpoint := strings.Cut(parts[2], "__")
		f := strings.Split(base, "/")
		if len(f) != 4 {
			continue
		}
		label := f[0] + "/" + f[1]
		if f[3] != "" {
			label += ":" + f[3]
		}
		if isEndpoint {
			for _, r := range c.Rules {
				if m := nftDNATTo.FindStringSubmatch(r.Rule); m != nil {
					label += " -> " + m[1]
				}
			}
		}
		out[name] = label
	}
	return out
}

var nftDNATTo = regexp.MustCompile(`dnat (?:ip6? )?to (\S+)`)
