package nft

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
	tableName = "kube-proxy"

	filterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	filterOutputPreDNAT     = "filter-output-pre-dnat"
	filterInput             = "filter-input"
	filterForward           = "filter-forward"
	filterOutput            = "filter-output"
	natPrerouting           = "nat-prerouting"
	natOutput               = "nat-output"
	natPostrouting          = "nat-postrouting"

	servicesChain         = "services"
	serviceIPsMap         = "service-ips"
	serviceNodePortsMap   = "service-nodeports"
	nodePortIPsSet        = "nodeport-ips"
	clusterIPsSet         = "cluster-ips"
	serviceEndpointsCheck = "service-endpoints-check"
	nodePortEndpointCheck = "nodeport-endpoints-check"
	noEndpointServicesMap = "no-endpoint-services"
	noEndpointNodePorts   = "no-endpoint-nodeports"
	rejectChain           = "reject-chain"
	clusterIPsCheck       = "cluster-ips-check"
	firewallIPsMap        = "firewall-ips"
	firewallCheck         = "firewall-check"
	markMasqChain         = "mark-for-masquerade"
	masqueradingChain     = "masquerading"
)

// CommitChain is the chain that each of apply's transactions adds and deletes again at
// its end (see Transactions), so that nf_tables commits the transaction whatever the
// kernel already holds. kube-proxy has no chain of this name, and it never outlives the
// transaction that adds it.
const CommitChain = "svcgen-commit"

// Prefixes of per-service objects. A per-service chain is recognised by the "/" in its
// name (no fixed chain has one), an affinity set by its prefix.
const (
	prefixService  = "service-"  // Cluster traffic policy
	prefixLocal    = "local-"    // Local traffic policy
	prefixExternal = "external-" // external destinations
	prefixFirewall = "firewall-" // loadBalancerSourceRanges
	prefixEndpoint = "endpoint-" // one endpoint
	prefixAffinity = "affinity-" // ClientIP affinity of one endpoint
)

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

// portBase is "HASH-ns/svc/proto/port".
func portBase(ns, svc, proto, port string) string {
	return hashAndTruncate(ns + "/" + svc + "/" + proto + "/" + port)
}

// endpointBase is "HASH-ns/svc/proto/port__IP/PORT", with the colons of an IPv6
// address written as dots ("fd00..1").
func endpointBase(ns, svc, proto, port, endpoint string) string {
	ip, epPort, _ := net.SplitHostPort(endpoint)
	ip = strings.ReplaceAll(ip, ":", ".")
	return hashAndTruncate(ns + "/" + svc + "/" + proto + "/" + port + "__" + ip + "/" + epPort)
}

// IsServiceChain reports a per-service chain.
func IsServiceChain(name string) bool { return strings.Contains(name, "/") }

// IsAffinitySet reports a per-endpoint affinity set.
func IsAffinitySet(name string) bool { return strings.HasPrefix(name, prefixAffinity) }

// PortOf is the service port ("ns/svc:port", or "ns/svc" for an unnamed port) that a
// per-service chain or affinity set belongs to, read from its name: both
// "service-ULMVA6XW-ns1/svc1/tcp/p80" and "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"
// are ns1/svc1:p80. Any other name gives "".
func PortOf(name string) string {
	for _, prefix := range []string{prefixService, prefixLocal, prefixExternal, prefixFirewall, prefixEndpoint, prefixAffinity} {
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
