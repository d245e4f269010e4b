package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
)

// Chain names kube-proxy owns. iptables chain names are at most 28 characters.
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainForward          = "KUBE-FORWARD"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainFirewall         = "KUBE-FIREWALL" // kubelet's; kube-proxy writes a copy
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
)

// chainCommitMark is the chain that each block of a restore written with
// Options.MarkCommits declares and deletes again before its COMMIT, so that
// iptables-nft commits the block whatever the kernel already holds. Neither kube-proxy
// nor anything else svcgen writes has a chain of this name, and it never outlives the
// block.
const chainCommitMark = "SVCGEN-COMMIT"

// Prefixes of the per-service-port chains.
const (
	prefixSVC = "KUBE-SVC-" // Cluster traffic policy: all usable endpoints
	prefixSVL = "KUBE-SVL-" // Local traffic policy: this node's endpoints
	prefixEXT = "KUBE-EXT-" // external destinations (node port, external IP, LB IP)
	prefixFW  = "KUBE-FW-"  // loadBalancerSourceRanges check
	prefixSEP = "KUBE-SEP-" // one endpoint: hairpin masquerade and DNAT
)

// IsServiceChain reports a per-service chain name, the ones kube-proxy deletes when no
// Service uses them any more (upstream's isServiceChainName).
func IsServiceChain(name string) bool {
	for _, p := range []string{prefixSVC, prefixSVL, prefixSEP, prefixFW, prefixEXT} {
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
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	var enc [56]byte // base32 of 32 bytes
	base32.StdEncoding.Encode(enc[:], sum[:])
	return string(enc[:16])
}

// ServiceChains are the per-service-port chain names of one port ("ns/svc:port", "tcp").
type ServiceChains struct {
	SVC, SVL, EXT, FW string
}

// serviceChains names a service port's chains.
func serviceChains(spn, proto string) ServiceChains {
	h := hash16(spn, proto)
	return ServiceChains{SVC: prefixSVC + h, SVL: prefixSVL + h, EXT: prefixEXT + h, FW: prefixFW + h}
}

// EndpointChain names the KUBE-SEP chain of an endpoint ("10.180.0.1:80", "[fd00::1]:80").
func EndpointChain(spn, proto, endpoint string) string {
	return prefixSEP + hash16(spn, proto, endpoint)
}

// ServiceChainsFor names the chains of a service port; exported for trace and diff,
// which annotate hashed names with their Service.
func ServiceChainsFor(spn, proto string) ServiceChains { return serviceChains(spn, proto) }

// probabilities caches 1/n printed as upstream does: "%0.10f", so 1/3 is 0.3333333333
// and 1/100001 is 0.0000099999.
type probabilities []string

func (c *probabilities) get(n int) string {
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

// kubeProxyChains are the fixed chains kube-proxy makes in any mode (iptables and ipvs,
// this version and older ones), in any table: what cleanup removes, with every
// per-service chain (cleanupPrefixes).
var kubeProxyChains = []string{
	chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall,
	chainPostrouting, chainMarkMasq, "KUBE-PROXY-CANARY",
	// ipvs mode
	"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-SOURCE-RANGES-FIREWALL",
	"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER",
}

// cleanupPrefixes name per-service chains, with KUBE-XLB- of kube-proxy before 1.24.
var cleanupPrefixes = []string{prefixSVC, prefixSVL, prefixEXT, prefixFW, prefixSEP, "KUBE-XLB-"}

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
