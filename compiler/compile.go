package compiler

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// Mode is a kube-proxy mode; it picks which section of the configuration
// (iptables or nftables) the masquerade settings come from.
type Mode string

// Modes.
const (
	IPTables Mode = "iptables"
	IPVS     Mode = "ipvs"
	NFTables Mode = "nftables"
)

// Options select what to compile for.
type Options struct {
	// Node names the node the rules are for; empty: the configuration's
	// hostnameOverride, else the only Node in the input.
	Node string
	Mode Mode
	// Families are the IP families asked for (--ip-family), over the
	// NodeEnvironment's; nil: see Families.
	Families []model.IPFamily
	// Host are the families of the host the rules are for, as kube-proxy's
	// platformCheckSupported would find them: apply and the other commands that work
	// on this node give both (a family the host lacks is left out afterwards, see
	// apply.HostFamilies), so that, as kube-proxy, they program both families
	// whatever the input has. Under Families and the NodeEnvironment's ipFamily;
	// nil: the families the input has.
	Host []model.IPFamily
	// Release is the kube-proxy release to write for; the zero Release: the one the
	// Nodes' kubelets run, else the newest (see pickTarget).
	Release release.Release
	// Gates are feature gates set on the command line, over the configuration's.
	Gates map[string]bool
}

// run is what every family of one compile shares: the node, its environment, the
// configuration and the release.
type run struct {
	cfg      *model.Config
	nodeName string
	node     *model.Node
	env      *model.NodeEnvironment
	target   release.Target
	families []model.IPFamily
}

func newRun(c *model.Cluster, opts Options) (*run, error) {
	r := &run{cfg: &model.Config{}}
	if len(c.Configs) > 0 {
		r.cfg = c.Configs[0]
	}
	var err error
	if r.nodeName, r.node, err = pickNode(c, r.cfg, opts.Node); err != nil {
		return nil, err
	}
	r.env = pickEnvironment(c, r.nodeName)
	if r.families, err = families(c, r.node, r.env, opts.Families, opts.Host); err != nil {
		return nil, err
	}
	if r.target, err = pickTarget(c, r.cfg, opts); err != nil {
		return nil, err
	}
	if opts.Mode == IPVS && !r.target.Layout.IPVS {
		return nil, &GateError{Err: fmt.Errorf("mode ipvs: kube-proxy %s with KubeProxyIPVS=false has no ipvs mode (want iptables or nftables)", r.target.Release)}
	}
	return r, nil
}

// Families are the IP families a compile of the resolved cluster writes, in
// model.Families' order; see families.
func Families(c *model.Cluster, opts Options) ([]model.IPFamily, error) {
	r, err := newRun(c, opts)
	if err != nil {
		return nil, err
	}
	return r.families, nil
}

// Compile builds the service map of one node for the first of its run's families
// (the only one of a single-family run; see CompileAll).
func Compile(c *model.Cluster, opts Options) (*ir.ServiceMap, error) {
	r, err := newRun(c, opts)
	if err != nil {
		return nil, err
	}
	return r.compile(c, opts.Mode, r.families[0])
}

// CompileAll builds the service map of one node for each family of the run (see
// families), in model.Families' order: kube-proxy's dual-stack proxier runs one
// proxier per family, and each map is what one of them programs.
func CompileAll(c *model.Cluster, opts Options) ([]*ir.ServiceMap, error) {
	r, err := newRun(c, opts)
	if err != nil {
		return nil, err
	}
	out := make([]*ir.ServiceMap, 0, len(r.families))
	for _, f := range r.families {
		sm, err := r.compile(c, opts.Mode, f)
		if err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, nil
}

// compile builds the service map of one family.
func (r *run) compile(c *model.Cluster, mode Mode, family model.IPFamily) (*ir.ServiceMap, error) {
	var errs model.Problems
	sm := &ir.ServiceMap{Family: family, Target: r.target}
	sm.Node = nodeInfo(r.nodeName, r.node, r.env, r.cfg, family)
	applyConfig(sm, r.cfg, r.node, mode, &errs)
	env := r.env
	sm.Host = ir.Host{RandomFully: env.RandomFully || r.target.Layout.RandomFullyAlways, NFAcct: env.NFAcct, TCPBeLiberal: env.TCPBeLiberal}
	for _, sc := range c.ServiceCIDRs {
		for _, p := range sc.CIDRs {
			if model.FamilyOf(p.Addr()) == family {
				sm.ServiceCIDRs = append(sm.ServiceCIDRs, p)
			}
		}
	}
	b := &builder{sm: sm, slices: slicesByService(c.Slices, family)}
	for _, s := range c.Services {
		b.service(s)
	}
	sortServices(sm.Services)
	sm.LargeCluster = b.totalEndpoints > ir.LargeClusterThreshold
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return sm, nil
}

// pickNode finds the node the rules are for: the one named (--node), else the
// configuration's hostnameOverride (lower-cased and trimmed, as kube-proxy takes it),
// else the only Node in the input. A name that is not a Kubernetes node name, or that
// names no Node of an input that has Nodes, is an error.
func pickNode(c *model.Cluster, cfg *model.Config, name string) (string, *model.Node, error) {
	var errs model.Problems
	if name == "" && cfg.HostnameOverride != "" {
		name = strings.ToLower(strings.TrimSpace(cfg.HostnameOverride))
		if err := model.CheckNodeName(name); err != nil {
			errs.Add(cfg.Origin, "hostnameOverride", "%v", err)
			return "", nil, errs.Err()
		}
	}
	if name == "" {
		switch {
		case len(c.Nodes) == 0:
			return "", nil, nil
		case len(c.Nodes) == 1 || c.Nodes[0].Made:
			// The Nodes svcgen made (--nodes) are node-1 ... node-N: the rules are
			// for node-1 unless --node says otherwise.
			return c.Nodes[0].Name, c.Nodes[0], nil
		default:
			return "", nil, fmt.Errorf("the input has %d Nodes; say which one the rules are for with --node (or hostnameOverride)", len(c.Nodes))
		}
	}
	for _, n := range c.Nodes {
		if n.Name == name {
			return name, n, nil
		}
	}
	if len(c.Nodes) > 0 {
		return "", nil, fmt.Errorf("node %q is not among the input's %d Nodes (%s)", name, len(c.Nodes), nodeNames(c.Nodes))
	}
	return name, nil, nil
}

// nodeNames lists up to five Nodes' names.
func nodeNames(nodes []*model.Node) string {
	var names []string
	for i, n := range nodes {
		if i == 5 {
			names = append(names, "...")
			break
		}
		names = append(names, strconv.Quote(n.Name))
	}
	return strings.Join(names, ", ")
}

func pickEnvironment(c *model.Cluster, node string) *model.NodeEnvironment {
	for _, e := range c.Environments {
		if e.Node == node {
			return e
		}
	}
	if len(c.Environments) == 1 && node == "" {
		return c.Environments[0]
	}
	return &model.NodeEnvironment{RandomFully: true, NFAcct: true}
}

// nodeInfo collects the node's identity and addresses of one family.
func nodeInfo(name string, node *model.Node, env *model.NodeEnvironment, cfg *model.Config, family model.IPFamily) ir.Node {
	n := ir.Node{Name: name}
	if node != nil {
		n.Zone = node.Zone()
		for _, t := range []string{"InternalIP", "ExternalIP"} {
			for _, a := range node.Addresses {
				if a.Type == t && model.FamilyOf(a.Address) == family && !n.IP.IsValid() {
					n.IP = a.Address
				}
			}
		}
	}
	if b := cfg.BindAddress; b.IsValid() && !b.IsUnspecified() && model.FamilyOf(b) == family {
		n.IP = b
	}
	if !n.IP.IsValid() {
		// kube-proxy's detectNodeIPs: a family of which the node has no IP (every
		// family, without a Node) has the loopback address as its node IP.
		n.IP = ipv4Loopback
		if family == model.IPv6 {
			n.IP = netip.IPv6Loopback()
		}
	}
	if env.Interfaces != nil {
		for _, itf := range env.Interfaces {
			for _, p := range itf.Addresses {
				if model.FamilyOf(p.Addr()) == family {
					n.Addresses = append(n.Addresses, p)
				}
			}
		}
	} else if node != nil {
		for _, a := range node.Addresses {
			if a.Type == "InternalIP" && model.FamilyOf(a.Address) == family {
				n.Addresses = append(n.Addresses, netip.PrefixFrom(a.Address, a.Address.BitLen()))
			}
		}
	}
	return n
}

func sortServices(ss []*ir.Service) {
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].Namespace != ss[j].Namespace {
			return ss[i].Namespace < ss[j].Namespace
		}
		return ss[i].Name < ss[j].Name
	})
	for _, s := range ss {
		sort.Slice(s.Ports, func(i, j int) bool {
			a, b := s.Ports[i], s.Ports[j]
			if a.Name.Port != b.Name.Port {
				return a.Name.Port < b.Name.Port
			}
			return a.Protocol < b.Protocol
		})
	}
}
