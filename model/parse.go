package model

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseAddr parses an IP address the way kube-proxy does (netutils.ParseIPSloppy): an
// IPv4 octet with leading zeros is read as decimal, so "172.30.0.041" is 172.30.0.41.
// IPv4-mapped IPv6 addresses are unmapped, as Go's net.IP.String prints them.
func ParseAddr(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("%q is not an IP address (zones are not allowed)", s)
		}
		return a.Unmap(), nil
	}
	if a, ok := parseSloppyIPv4(s); ok {
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
}

func parseSloppyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// ParsePrefix parses a CIDR sloppily (see ParseAddr). Host bits are kept; callers that
// print a network use Masked, as kube-proxy prints net.IPNet.
func ParsePrefix(s string) (netip.Prefix, error) {
	addr, bits, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	a, err := ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	// Like the address, the length is read as decimal even with leading zeros ("/025").
	n, err := strconv.ParseUint(bits, 10, 8)
	if err != nil || len(bits) > 3 || int(n) > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (bad prefix length)", s)
	}
	return netip.PrefixFrom(a, int(n)), nil
}

// ParseProtocol accepts TCP, UDP and SCTP. The minik8s dialect also accepts lower case.
func ParseProtocol(s string, lowerOK bool) (Protocol, error) {
	p := Protocol(s)
	if lowerOK {
		p = Protocol(strings.ToUpper(s))
	}
	switch p {
	case TCP, UDP, SCTP:
		return p, nil
	}
	return "", fmt.Errorf("unknown protocol %q (want TCP, UDP or SCTP)", s)
}

// ErrUnsafeName is wrapped by CheckName for text that must never reach a rule line.
var ErrUnsafeName = errors.New("has characters that cannot go into rules (only letters, digits, '-', '.' and '_' are allowed)")

// NameRule says which Kubernetes naming rule a name must follow.
type NameRule int

// Naming rules.
const (
	DNS1035Label     NameRule = iota // Service names
	DNS1123Label                     // namespaces
	DNS1123Subdomain                 // most object names
	IANASvcName                      // port names
)

// CheckName validates text that ends up in rule comments and chain-name hashes.
// It returns an error (wrapping ErrUnsafeName) for any character outside letters,
// digits, '-', '.' and '_', or longer than the rule allows (Kubernetes never holds
// such a name, and rule comments made of it can pass what the kernel keeps), and a
// warning for names made of those characters that still break the Kubernetes rule
// (the course projects' "HelloService"): such a name is safe in a rule but would not
// pass an API server.
func CheckName(s string, rule NameRule) (warning string, err error) {
	if s == "" {
		return "", errors.New("must not be empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '-' || c == '.' || c == '_') {
			return "", fmt.Errorf("%q %w", s, ErrUnsafeName)
		}
	}
	if len(s) > 253 {
		return "", fmt.Errorf("%q is longer than 253 characters", s)
	}
	if max := maxLen[rule]; max > 0 && len(s) > max {
		// A longer name reaches rules no cluster has: kube-proxy never sees one, and
		// the comments it would make can pass what the kernel keeps.
		return "", fmt.Errorf("%q is longer than %d characters, which Kubernetes does not allow", s, max)
	}
	if msg := kubeNameRule(s, rule); msg != "" {
		return fmt.Sprintf("%q %s", s, msg), nil
	}
	return "", nil
}

// maxLen is the length each rule allows: names of these kinds reach rule comments,
// chain and set names.
var maxLen = map[NameRule]int{DNS1035Label: 63, DNS1123Label: 63, IANASvcName: 15}

// CheckNodeName checks a node name (--node, hostnameOverride) as the API server
// checks a Node's: a DNS-1123 subdomain.
func CheckNodeName(name string) error {
	warning, err := CheckName(name, DNS1123Subdomain)
	if err != nil {
		return err
	}
	if warning != "" {
		return errors.New(warning)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func kubeNameRule(s string, rule NameRule) string {
	switch rule {
	case DNS1035Label, DNS1123Label:
		if !labelChars(s) {
			return "is not a valid Kubernetes name: use lower-case letters, digits and '-', starting and ending with a letter or digit"
		}
		if rule == DNS1035Label && !(s[0] >= 'a' && s[0] <= 'z') {
			return "is not a valid Service name: it must start with a lower-case letter"
		}
	case DNS1123Subdomain:
		for _, part := range strings.Split(s, ".") {
			if part == "" || !labelChars(part) {
				return "is not a valid Kubernetes name: use lower-case letters, digits, '-' and '.'"
			}
		}
	case IANASvcName:
		if !labelChars(s) || strings.Contains(s, "--") || !strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz") {
			return "is not a valid port name: use lower-case letters, digits and single '-', with at least one letter"
		}
	}
	return ""
}

func labelChars(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(isLowerAlnum(s[i]) || s[i] == '-') {
			return false
		}
	}
	return true
}

// CheckInterfaceName validates a Linux interface name or prefix that goes into a rule
// (detectLocal.bridgeInterface, detectLocal.interfaceNamePrefix): at most 15 bytes of
// letters, digits, '-', '.', '_'.
func CheckInterfaceName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > 15 {
		return fmt.Errorf("%q is longer than 15 characters", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%q %w", s, ErrUnsafeName)
		}
	}
	return nil
}
