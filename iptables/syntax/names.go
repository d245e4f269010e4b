package syntax

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
)

// Chain names kube-proxy owns. iptables chain names are at most 28 characters.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainForward          = "KUBE-FORWARD"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainFirewall         = "KUBE-FIREWALL" // kubelet's; kube-proxy writes a copy
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
)

// CommitMark is the chain that each block of a restore written with
// Options.MarkCommits declares and deletes again before its COMMIT, so that
// iptables-nft commits the block whatever the kernel already holds. Neither kube-proxy
// nor anything else svcgen writes has a chain of this name, and it never outlives the
// block.
const CommitMark = "SVCGEN-COMMIT"

// LocalhostBlock is KUBE-FIREWALL's one rule (kubelet writes the same): packets to
// 127.0.0.0/8 from elsewhere are dropped unless they belong to a connection.
var LocalhostBlock = []string{
	"-m", "comment", "--comment", "block incoming localnet connections",
	"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8",
	"-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP",
}

// Prefixes of the per-service-port chains.
const (
	PrefixSVC = "KUBE-SVC-" // Cluster traffic policy: all usable endpoints
	PrefixSVL = "KUBE-SVL-" // Local traffic policy: this node's endpoints
	PrefixEXT = "KUBE-EXT-" // external destinations (node port, external IP, LB IP)
	PrefixFW  = "KUBE-FW-"  // loadBalancerSourceRanges check
	PrefixSEP = "KUBE-SEP-" // one endpoint: hairpin masquerade and DNAT
)

// IsServiceChain reports a per-service chain name, the ones kube-proxy deletes when no
// Service uses them any more (upstream's isServiceChainName).
func IsServiceChain(name string) bool {
	for _, p := range []string{PrefixSVC, PrefixSVL, PrefixSEP, PrefixFW, PrefixEXT} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// hash16 is the first 16 characters of base32(sha256(s)), as upstream's portProtoHash.
//
// Worked example: hash16("ns1/svc1:p80" + "tcp") = "XPGD46QRK7WJZT7O", so the service
// port ns1/svc1:p80/TCP owns KUBE-SVC-XPGD46QRK7WJZT7O (25 characters),
// KUBE-SVL-, KUBE-EXT- and KUBE-FW-XPGD46QRK7WJZT7O (24). Its endpoint 10.180.0.1:80
// owns KUBE-SEP- + hash16("ns1/svc1:p80" + "tcp" + "10.180.0.1:80") =
// KUBE-SEP-SXIVWICOYRO3J4NJ. Nothing separates the parts.
func hash16(parts ...string) string {
	var buf [16]byte
	return string(appendHash16(buf[:0], parts...))
}

// appendHash16 appends hash16 of the parts to dst. It hashes from a buffer on the
// stack and allocates nothing itself: a 50,000-Service ruleset names about 700,000
// chains, and sha256.New's digest and a string per part were most of their cost.
func appendHash16(dst []byte, parts ...string) []byte {
	var buf [256]byte
	in := buf[:0]
	for _, p := range parts {
		in = append(in, p...)
	}
	sum := sha256.Sum256(in)
	var enc [56]byte // base32 of 32 bytes
	base32.StdEncoding.Encode(enc[:], sum[:])
	return append(dst, enc[:16]...)
}

// ServiceChains are the per-service-port chain names of one port ("ns/svc:port", "tcp").
type ServiceChains struct {
	SVC, SVL, EXT, FW string
}

// ServiceChainsFor names the chains of a service port ("ns/svc:port", "tcp"). The four
// names are cut from one string.
func ServiceChainsFor(spn, proto string) ServiceChains {
	var buf [128]byte
	b := append(buf[:0], PrefixSVC...)
	b = appendHash16(b, spn, proto)
	h := string(b[len(PrefixSVC):])
	b = append(append(b, PrefixSVL...), h...)
	b = append(append(b, PrefixEXT...), h...)
	b = append(append(b, PrefixFW...), h...)
	all := string(b)
	svc := len(PrefixSVC) + len(h)
	svl := svc + len(PrefixSVL) + len(h)
	ext := svl + len(PrefixEXT) + len(h)
	return ServiceChains{SVC: all[:svc], SVL: all[svc:svl], EXT: all[svl:ext], FW: all[ext:]}
}

// EndpointChain names the KUBE-SEP chain of an endpoint ("10.180.0.1:80", "[fd00::1]:80").
func EndpointChain(spn, proto, endpoint string) string {
	var buf [32]byte
	return string(appendHash16(append(buf[:0], PrefixSEP...), spn, proto, endpoint))
}

// Probabilities caches 1/n printed as upstream does: "%0.10f", so 1/3 is 0.3333333333
// and 1/100001 is 0.0000099999.
type Probabilities []string

// Get is 1/n as upstream prints it.
func (c *Probabilities) Get(n int) string {
	for len(*c) <= n {
		k := len(*c)
		if k == 0 {
			*c = append(*c, "")
			continue
		}
		*c = append(*c, fmt.Sprintf("%0.10f", 1.0/float64(k)))
	}
	return (*c)[n]
}

// ChainCanary is the empty chain kube-proxy's iptables monitor (pkg/util/iptables
// Monitor) makes in mangle, nat and filter to notice that the tables were flushed; it
// holds no rule and nothing jumps to it.
const ChainCanary = "KUBE-PROXY-CANARY"

// kubeProxyChains are the fixed chains kube-proxy makes in any mode (iptables and ipvs,
// this version and older ones), in any table: what cleanup removes, with every
// per-service chain (cleanupPrefixes).
var kubeProxyChains = []string{
	ChainServices, ChainExternalServices, ChainForward, ChainNodePorts, ChainProxyFirewall,
	ChainPostrouting, ChainMarkMasq, ChainCanary,
	// ipvs mode
	"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-SOURCE-RANGES-FIREWALL",
	"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER",
}

// cleanupPrefixes name per-service chains, with KUBE-XLB- of kube-proxy before 1.24.
var cleanupPrefixes = []string{PrefixSVC, PrefixSVL, PrefixEXT, PrefixFW, PrefixSEP, "KUBE-XLB-"}

// IsKubeProxyChain reports a chain that kube-proxy (or svcgen) made in some mode and
// that cleanup removes. KUBE-FIREWALL is kubelet's as well and is judged by its rules
// (see Cleaned).
func IsKubeProxyChain(name string) bool {
	if slices.Contains(kubeProxyChains, name) {
		return true
	}
	for _, p := range cleanupPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
