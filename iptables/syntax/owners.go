package syntax

import (
	"strings"
)

// Owner is the service port (and, for a KUBE-SEP chain, the endpoint) a hashed chain
// belongs to.
type Owner struct {
	Port     string // "ns/svc:port", kube-proxy's service port name
	Endpoint string // "10.0.0.1:80" for KUBE-SEP chains
}

// String is "ns/svc:port", or "ns/svc:port -> 10.0.0.1:80" for an endpoint chain (the
// way kube-proxy's dispatch comments name it).
func (o Owner) String() string {
	if o.Endpoint == "" {
		return o.Port
	}
	return o.Port + " -> " + o.Endpoint
}

// Owners maps hashed chain names to their owners.
type Owners map[string]Owner

// FindOwners names the hashed chains of rulesets from the rulesets alone. kube-proxy's
// rules carry the service port in their comments ("ns1/svc1:p80 cluster IP"); every
// name a comment gives is hashed with each protocol, and a chain whose name comes out is
// that port's. A KUBE-SEP chain is checked against the hash of the endpoint it DNATs
// to with a port that its own rules' comments, the comments of the rules that jump to
// it or the owners of the chains that jump to it name, so names hold even in
// large-cluster mode, where endpoint rules have no comments. A name is taken only when
// the hash gives the chain's name, so a hand-edited comment cannot mislabel a chain;
// a chain no name hashes to has no owner.
func FindOwners(rulesets ...*Ruleset) Owners {
	chains := 0
	for _, rs := range rulesets {
		for _, t := range rs.Tables {
			chains += len(t.Chains)
		}
	}
	// Sized at once: a 10,000-Service ruleset has 100,000 chains, and maps grown a step
	// at a time were a third of the work.
	o := make(Owners, chains)
	exists := make(map[string]bool, chains)
	ports := map[string]bool{}
	jumpers := make(map[string][]string, chains) // endpoint chain -> chains that jump to it
	named := map[string][]string{}               // endpoint chain -> ports its rules and jumps name
	for _, rs := range rulesets {
		for _, t := range rs.Tables {
			for _, c := range t.Chains {
				isService := IsServiceChain(c.Name)
				exists[c.Name] = isService
				for _, r := range c.Rules {
					p := commentPort(r.Args)
					if p != "" {
						ports[p] = true
					}
					if !isService {
						continue
					}
					if strings.HasPrefix(c.Name, PrefixSEP) && p != "" {
						named[c.Name] = append(named[c.Name], p)
					}
					if to := RuleTarget(r.Args); strings.HasPrefix(to, PrefixSEP) {
						jumpers[to] = append(jumpers[to], c.Name)
						if p != "" {
							named[to] = append(named[to], p)
						}
					}
				}
			}
		}
	}
	for p := range ports {
		for _, proto := range []string{"tcp", "udp", "sctp"} {
			c := ServiceChainsFor(p, proto)
			for _, name := range []string{c.SVC, c.SVL, c.EXT, c.FW} {
				if exists[name] {
					o[name] = Owner{Port: p}
				}
			}
		}
	}
	for _, rs := range rulesets {
		for _, t := range rs.Tables {
			for _, c := range t.Chains {
				if strings.HasPrefix(c.Name, PrefixSEP) {
					if _, done := o[c.Name]; !done {
						o.endpointChain(c, named[c.Name], jumpers[c.Name])
					}
				}
			}
		}
	}
	return o
}

// endpointChain names a KUBE-SEP chain from its DNAT target and the ports that could
// own it: the ones named, then the owners of the chains that jump to it.
func (o Owners) endpointChain(c *Chain, named, jumpers []string) {
	var ep, proto string
	for _, r := range c.Rules {
		for i := 0; i+1 < len(r.Args); i++ {
			switch r.Args[i] {
			case "--to-destination":
				ep = r.Args[i+1]
			case "-p", "--protocol":
				proto = ProtocolName(r.Args[i+1])
			}
		}
	}
	if ep == "" {
		return
	}
	candidates := named
	for _, j := range jumpers {
		if owner, ok := o[j]; ok {
			candidates = append(candidates, owner.Port)
		}
	}
	for _, p := range candidates {
		if EndpointChain(p, proto, ep) == c.Name {
			o[c.Name] = Owner{Port: p, Endpoint: ep}
			return
		}
	}
}

// Label is the chain's owner as text, "" when unknown.
func (o Owners) Label(chain string) string {
	if owner, ok := o[chain]; ok {
		return owner.String()
	}
	return ""
}

// RulePort is the service port a rule belongs to: its chain's, or the one its comment
// names (rules of KUBE-SERVICES and the other shared chains); "" for the node's own
// rules.
func (o Owners) RulePort(r Rule) string {
	if owner, ok := o[r.Chain]; ok {
		return owner.Port
	}
	return commentPort(r.Args)
}

// commentPort is the service port name a rule's comment gives, or "". kube-proxy's
// comments name it as their first word ("ns1/svc1:p80 cluster IP", "ns1/svc1:p80 ->
// 10.0.0.1:80") or after "for"/"to" ("masquerade traffic for ns1/svc1:p80 external
// destinations"); the first word shaped like namespace/name[:port] is taken.
func commentPort(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "--comment" {
			continue
		}
		for _, w := range strings.Fields(args[i+1]) {
			if isPortName(w) {
				return w
			}
		}
		return ""
	}
	return ""
}

// isPortName reports "namespace/name" or "namespace/name:port" made of the characters
// names may hold (the minik8s dialect allows upper case and "_").
func isPortName(w string) bool {
	ns, rest, ok := strings.Cut(w, "/")
	if !ok || !nameChars(ns) || strings.Trim(ns, "0123456789.") == "" {
		return false
	}
	name, port, hasPort := strings.Cut(rest, ":")
	return nameChars(name) && (!hasPort || nameChars(port))
}

func nameChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}
