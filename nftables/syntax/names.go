package syntax

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"strings"

	"sigs.k8s.io/knftables"
)

// Table, fixed chains, sets and maps of kube-proxy's nftables mode. Everything lives in
// the kube-proxy table of its family, so no name needs a "kube-" prefix.
const (
	TableName    = "kube-proxy"
	TableComment = "rules for kube-proxy"

	FilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	FilterOutputPreDNAT     = "filter-output-pre-dnat"
	FilterInput             = "filter-input"
	FilterForward           = "filter-forward"
	FilterOutput            = "filter-output"
	NATPrerouting           = "nat-prerouting"
	NATOutput               = "nat-output"
	NATPostrouting          = "nat-postrouting"

	ServicesChain         = "services"
	ServiceIPsMap         = "service-ips"
	ServiceNodePortsMap   = "service-nodeports"
	NodePortIPsSet        = "nodeport-ips"
	ClusterIPsSet         = "cluster-ips"
	ServiceEndpointsCheck = "service-endpoints-check"
	NodePortEndpointCheck = "nodeport-endpoints-check"
	NoEndpointServicesMap = "no-endpoint-services"
	NoEndpointNodePorts   = "no-endpoint-nodeports"
	RejectChain           = "reject-chain"
	ClusterIPsCheck       = "cluster-ips-check"
	FirewallIPsMap        = "firewall-ips"
	FirewallCheck         = "firewall-check"
	MarkMasqChain         = "mark-for-masquerade" // before v1.36
	MasqueradingChain     = "masquerading"
	HairpinSet            = "hairpin-connections" // v1.36
)

// CommitChain is the chain that each of apply's transactions adds and deletes again at
// its end (see nftables/plan's commit mark), so that nf_tables commits the transaction
// whatever the kernel already holds. kube-proxy has no chain of this name, and it never
// outlives the transaction that adds it.
const CommitChain = "svcgen-commit"

// Prefixes of per-service objects. A per-service chain is recognised by the "/" in its
// name (no fixed chain has one), an affinity set by its prefix.
const (
	PrefixService  = "service-"  // Cluster traffic policy
	PrefixLocal    = "local-"    // Local traffic policy
	PrefixExternal = "external-" // external destinations
	PrefixFirewall = "firewall-" // loadBalancerSourceRanges
	PrefixEndpoint = "endpoint-" // one endpoint
	PrefixAffinity = "affinity-" // ClientIP affinity of one endpoint
)

// perServicePrefixes are the prefixes PortOf knows.
var perServicePrefixes = []string{PrefixService, PrefixLocal, PrefixExternal, PrefixFirewall, PrefixEndpoint, PrefixAffinity}

// nameBaseMax is knftables.NameLengthMax less the longest prefix: 240.
const nameBaseMax = knftables.NameLengthMax - 16

// hashAndTruncate prefixes a name with the first 8 characters of base32(sha256(name)).
// Worked example: "ns1/svc1/tcp/p80" hashes to ULMVA6XW, so its Cluster-policy chain is
// service-ULMVA6XW-ns1/svc1/tcp/p80. Names longer than 240 characters (IPv6 endpoints
// of maximal names) are cut to 237 and end in "...".
func hashAndTruncate(name string) string {
	sum := sha256.Sum256([]byte(name))
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	name = string(enc[:8]) + "-" + name
	if len(name) > nameBaseMax {
		name = name[:nameBaseMax-3] + "..."
	}
	return name
}

// PortBase is "HASH-ns/svc/proto/port", the name of a service port's chains without
// their prefix.
func PortBase(ns, svc, proto, port string) string {
	return hashAndTruncate(ns + "/" + svc + "/" + proto + "/" + port)
}

// EndpointBase is "HASH-ns/svc/proto/port__IP/PORT", the name of an endpoint's chain
// and affinity set without their prefix, with the colons of an IPv6 address written as
// dots ("fd00..1").
func EndpointBase(ns, svc, proto, port, endpoint string) string {
	ip, epPort, _ := net.SplitHostPort(endpoint)
	ip = strings.ReplaceAll(ip, ":", ".")
	return hashAndTruncate(ns + "/" + svc + "/" + proto + "/" + port + "__" + ip + "/" + epPort)
}

// IsServiceChain reports a per-service chain.
func IsServiceChain(name string) bool { return strings.Contains(name, "/") }

// IsAffinitySet reports a per-endpoint affinity set.
func IsAffinitySet(name string) bool { return strings.HasPrefix(name, PrefixAffinity) }

// PortOf is the service port ("ns/svc:port", or "ns/svc" for an unnamed port) that a
// per-service chain or affinity set belongs to, read from its name: both
// "service-ULMVA6XW-ns1/svc1/tcp/p80" and "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
// are ns1/svc1:p80. Any other name gives "".
func PortOf(name string) string {
	for _, prefix := range perServicePrefixes {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		hash, base, ok := strings.Cut(rest, "-")
		if !ok || len(hash) != 8 || strings.Trim(hash, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			return ""
		}
		base, _, _ = strings.Cut(base, "__")
		f := strings.Split(base, "/") // namespace, service, protocol, port name
		if len(f) != 4 || f[0] == "" || f[1] == "" {
			return ""
		}
		if f[3] == "" {
			return f[0] + "/" + f[1]
		}
		return f[0] + "/" + f[1] + ":" + f[3]
	}
	return ""
}

// OwnerOf is the Service ("namespace/name") a per-service chain or affinity set
// belongs to, "" for any other name.
func OwnerOf(name string) string {
	svc, _, _ := strings.Cut(PortOf(name), ":")
	return svc
}

// LinePort is the service port of the first per-service name among the words of a
// script line (a rule or an element line, or a line nft names in an error), "" if
// none.
func LinePort(line string) string {
	for w := range strings.FieldsSeq(line) {
		if p := PortOf(w); p != "" {
			return p
		}
	}
	return ""
}

// JoinKey joins the parts of an element's key or value as nft writes them: "a . b".
// Elements are compared and looked up by it.
func JoinKey(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts, " . ")
}
