// Package release is the one table of the kube-proxy releases svcgen writes rules for:
// for each minor release, what its rules look like (Layout) and the feature gates that
// change them, with that release's defaults. Everything else asks this table; adding a
// release is an entry here (and its oracle module under conformance/).
//
// The facts come from kube-proxy's released sources (k8s.io/kubernetes at the version
// in Module) and are checked by running that proxier on the same input (conformance/).
package release

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Release is one kube-proxy minor release.
type Release struct {
	// Minor is the minor version: 37 for kube-proxy v1.37.
	Minor int
	// Module is the k8s.io/kubernetes version whose proxier is this release's oracle.
	Module string
	// Gates are the feature gates that change this release's rules, with its defaults.
	Gates []Gate
	// Layout is the release's rule layout with every gate at its default.
	Layout Layout
}

// String is "1.37".
func (r Release) String() string { return "1." + strconv.Itoa(r.Minor) }

// Gate is a feature gate that changes rules.
type Gate struct {
	Name    string
	Default bool
	// Locked: the gate is GA or deprecated and locked to its default; setting it to
	// the other value is refused, as kube-proxy refuses it.
	Locked bool
	// apply sets the layout's switches for the gate's value.
	apply func(l *Layout, on bool)
	// unwritten names, by proxy mode ("nftables"), what that mode's kube-proxy
	// programs with the gate on and svcgen does not write: such a target is refused
	// in that mode (Target.Writes) rather than written without it.
	unwritten map[string]string
}

// Layout is what one release (with its gates) writes differently from another. Each
// field names the release that brought the change.
type Layout struct {
	// RandomFullyAlways (v1.37): KUBE-POSTROUTING masquerades with --random-fully
	// without probing iptables for support (iptables and ipvs modes).
	RandomFullyAlways bool
	// NFTInlineMasquerade (v1.36): no mark-for-masquerade chain; the mark is set in
	// the rule (comment "masquerade"); masquerading is a mark rule and a
	// hairpin-connections set rule; the cluster IPs' outside-traffic masquerade is one
	// rule first in the services chain.
	NFTInlineMasquerade bool
	// NFTNumgenDNAT (v1.36): endpoint chains exist only for ClientIP affinity; otherwise
	// the service chain DNATs with "numgen random mod N map { ... }".
	NFTNumgenDNAT bool
	// NFTSingleEndpointDNAT (v1.37): a service chain with one endpoint (and no
	// affinity) DNATs with "dnat to IP:port".
	NFTSingleEndpointDNAT bool
	// NFTElementCommentMax (v1.37): element comments are cut to this many bytes
	// (knftables.CommentLengthMax); 0: not cut.
	NFTElementCommentMax int
	// NFTLocalhostNodePorts (gate KubeProxyNFTablesLocalhostNodePorts, v1.37 alpha):
	// NodePorts on 127.0.0.0/8 and ::1 are rejected through the
	// localhost-nodeport-reject-ports map.
	NFTLocalhostNodePorts bool
	// PreferNonTerminating (v1.36): of two endpoints with the same address and port, the
	// one not terminating wins; before, the one on this node won.
	PreferNonTerminating bool
	// NodePortAddressKeywords (v1.37): nodePortAddresses may mix "primary", "localhost"
	// and "all" with CIDRs (v1.36 and before: "primary" only alone).
	NodePortAddressKeywords bool
	// ExternalIPs (gate AllowServiceExternalIPs, v1.36, on by default): rules for
	// Services' externalIPs; always on before v1.36.
	ExternalIPs bool
	// IPVS (gate KubeProxyIPVS, v1.37, deprecated and on by default): ipvs mode exists.
	IPVS bool
	// PreferSameNode (gate PreferSameTrafficDistribution): endpoints hinted for this
	// node are preferred (trafficDistribution PreferSameNode).
	PreferSameNode bool
}

// Gate names.
const (
	GatePreferSameTrafficDistribution       = "PreferSameTrafficDistribution"
	GateAllowServiceExternalIPs             = "AllowServiceExternalIPs"
	GateKubeProxyNFTablesLocalhostNodePorts = "KubeProxyNFTablesLocalhostNodePorts"
	GateKubeProxyIPVS                       = "KubeProxyIPVS"
)

func preferSame(locked bool) Gate {
	return Gate{Name: GatePreferSameTrafficDistribution, Default: true, Locked: locked,
		apply: func(l *Layout, on bool) { l.PreferSameNode = on }}
}

var (
	externalIPs = Gate{Name: GateAllowServiceExternalIPs, Default: true,
		apply: func(l *Layout, on bool) { l.ExternalIPs = on }}
	localhostNodePorts = Gate{Name: GateKubeProxyNFTablesLocalhostNodePorts,
		apply:     func(l *Layout, on bool) { l.NFTLocalhostNodePorts = on },
		unwritten: map[string]string{"nftables": "the localhost-nodeport-reject-ports map, its counters and chains, and the userspace proxy of localhost NodePorts"}}
	ipvsGate = Gate{Name: GateKubeProxyIPVS, Default: true,
		apply: func(l *Layout, on bool) { l.IPVS = on }}
	// Gates kube-proxy reads that change no rule svcgen writes: known, so that a
	// configuration that sets them is accepted.
	multiCIDR       = Gate{Name: "MultiCIDRServiceAllocator", Default: true, Locked: true}
	lbIPMode        = Gate{Name: "LoadBalancerIPMode", Default: true, Locked: true}
	nftablesNetlink = Gate{Name: "NFTablesNetlink", Default: true}
)

// table lists the releases, oldest first. Layout holds what the release writes apart
// from its gates; a Target adds the gates' values.
var table = []Release{
	{Minor: 34, Module: "v1.34.4", Gates: []Gate{preferSame(false), multiCIDR, lbIPMode},
		Layout: Layout{ExternalIPs: true, IPVS: true}},
	{Minor: 35, Module: "v1.35.4", Gates: []Gate{preferSame(true), multiCIDR},
		Layout: Layout{ExternalIPs: true, IPVS: true}},
	{Minor: 36, Module: "v1.36.3", Gates: []Gate{preferSame(true), multiCIDR, externalIPs},
		Layout: Layout{NFTInlineMasquerade: true, NFTNumgenDNAT: true, PreferNonTerminating: true, IPVS: true}},
	{Minor: 37, Module: "v1.37.2", Gates: []Gate{preferSame(true), multiCIDR, externalIPs, localhostNodePorts, ipvsGate, nftablesNetlink},
		Layout: Layout{RandomFullyAlways: true, NFTInlineMasquerade: true, NFTNumgenDNAT: true,
			NFTSingleEndpointDNAT: true, NFTElementCommentMax: 128, PreferNonTerminating: true,
			NodePortAddressKeywords: true}},
}

// All returns the supported releases, oldest first.
func All() []Release { return slices.Clone(table) }

// Newest is the newest supported release, the default.
func Newest() Release { return table[len(table)-1] }

// Names lists the supported releases: "1.34, 1.35, 1.36 or 1.37".
func Names() string {
	names := make([]string, len(table))
	for i, r := range table {
		names[i] = r.String()
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Parse reads a release as "1.37", "v1.37", or a full version ("v1.37.2", also a
// kubelet's "v1.37.2-eks-1a2b3c"): the minor release it names, if supported.
func Parse(s string) (Release, error) {
	minor, err := parseMinor(s)
	if err != nil {
		return Release{}, err
	}
	for _, r := range table {
		if r.Minor == minor {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("kube-proxy %q is not a supported release (want %s)", s, Names())
}

func parseMinor(s string) (int, error) {
	v := strings.TrimPrefix(s, "v")
	major, rest, ok := strings.Cut(v, ".")
	minorText, _, _ := strings.Cut(rest, ".")
	if i := strings.IndexAny(minorText, "-+"); i >= 0 {
		minorText = minorText[:i]
	}
	minor, err := strconv.Atoi(minorText)
	if !ok || major != "1" || err != nil || minor < 0 {
		return 0, fmt.Errorf("%q is not a kube-proxy version (want %s)", s, Names())
	}
	return minor, nil
}

// GateNames lists the gates the release knows, sorted.
func (r Release) GateNames() []string {
	names := make([]string, len(r.Gates))
	for i, g := range r.Gates {
		names[i] = g.Name
	}
	sort.Strings(names)
	return names
}

func (r Release) gate(name string) (Gate, bool) {
	for _, g := range r.Gates {
		if g.Name == name {
			return g, true
		}
	}
	return Gate{}, false
}

// Target is a release with the value of each of its gates: what one compile writes for.
type Target struct {
	Release Release
	// Gates holds every gate of the release with its value.
	Gates map[string]bool
	// Layout is the release's layout with the gates' values applied.
	Layout Layout
}

// UnknownGateError is a gate the release does not know.
type UnknownGateError struct {
	Release Release
	Name    string
}

func (e *UnknownGateError) Error() string {
	return fmt.Sprintf("kube-proxy %s has no feature gate %q that svcgen knows (known: %s)", e.Release, e.Name, strings.Join(e.Release.GateNames(), ", "))
}

// Target applies gate values (nil: every gate at its default). A gate the release does
// not know is an *UnknownGateError; a locked gate set to the other value is refused, as
// kube-proxy refuses it.
func (r Release) Target(set map[string]bool) (Target, error) {
	t := Target{Release: r, Gates: make(map[string]bool, len(r.Gates)), Layout: r.Layout}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same every run
	for _, name := range names {
		g, ok := r.gate(name)
		if !ok {
			return Target{}, &UnknownGateError{Release: r, Name: name}
		}
		if g.Locked && set[name] != g.Default {
			return Target{}, fmt.Errorf("feature gate %s is locked to %v in kube-proxy %s", name, g.Default, r)
		}
	}
	for _, g := range r.Gates {
		on, ok := set[g.Name]
		if !ok {
			on = g.Default
		}
		t.Gates[g.Name] = on
		if g.apply != nil {
			g.apply(&t.Layout, on)
		}
	}
	return t, nil
}

// Writes says whether svcgen writes what the target's kube-proxy programs in a proxy
// mode ("iptables", "nftables", "ipvs"): an error naming the first gate that is on
// and changes rules of the mode svcgen does not write, else nil.
func (t Target) Writes(mode string) error {
	for _, g := range t.Release.Gates {
		if what, ok := g.unwritten[mode]; ok && t.Gates[g.Name] {
			return fmt.Errorf("%s=true: svcgen does not write this gate's %s rules yet (%s)", g.Name, mode, what)
		}
	}
	return nil
}

// String names the release and the gates set away from their defaults, as output
// headers do: "kube-proxy v1.37" or "kube-proxy v1.37 (feature gates
// AllowServiceExternalIPs=false)".
func (t Target) String() string {
	var changed []string
	for _, g := range t.Release.Gates {
		if on := t.Gates[g.Name]; on != g.Default {
			changed = append(changed, g.Name+"="+strconv.FormatBool(on))
		}
	}
	s := "kube-proxy v" + t.Release.String()
	if len(changed) > 0 {
		s += " (feature gates " + strings.Join(changed, ",") + ")"
	}
	return s
}
