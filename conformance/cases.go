package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Case is one input the oracle and svcgen both compile: manifests (Services,
// EndpointSlices, Endpoints, Pods, Nodes, ServiceCIDRs, a NodeEnvironment) and a
// KubeProxyConfiguration, either among the manifests or in a file of its own.
type Case struct {
	Name   string
	Input  []byte
	Config []byte   // nil: the configuration is among the manifests, or there is none
	Modes  []string // the modes the case is for
	// NodePortRange is svcgen's --node-port-range: kube-proxy's own test objects use
	// node ports such as 3001, which an API server with the default range refuses.
	NodePortRange string
	// Release, when set, is the only release ("v1.37") the case is run through.
	Release string
}

// AllModes are kube-proxy's three modes on Linux.
var AllModes = []string{"iptables", "nftables", "ipvs"}

// GoldenCases reads every case under dir (svcgen's golden/): input.yaml and
// config.yaml, in the modes of the README's "modes:" line, else all. Multi-step cases
// (step-NN folders, compiled with --previous) are returned by name in steps: the
// oracle runs one first sync, not a sequence.
func GoldenCases(dir string) (cases []Case, steps []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		input, err := os.ReadFile(filepath.Join(path, "input.yaml"))
		if errors.Is(err, os.ErrNotExist) {
			if m, _ := filepath.Glob(filepath.Join(path, "step-*")); len(m) > 0 {
				steps = append(steps, e.Name())
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		c := Case{Name: "golden/" + e.Name(), Input: input, Modes: AllModes, NodePortRange: "1-65535"}
		if c.Config, err = os.ReadFile(filepath.Join(path, "config.yaml")); errors.Is(err, os.ErrNotExist) {
			c.Config = nil
		} else if err != nil {
			return nil, nil, err
		}
		readme, _ := os.ReadFile(filepath.Join(path, "README"))
		for _, line := range strings.Split(string(readme), "\n") {
			if rest, ok := strings.CutPrefix(line, "modes:"); ok {
				c.Modes = strings.Fields(strings.ReplaceAll(rest, ",", " "))
			}
		}
		cases = append(cases, c)
	}
	return cases, steps, nil
}

// TestdataCases reads the oracle's own cases, conformance/testdata/*.yaml: each one
// file with the KubeProxyConfiguration among the manifests, run in every mode. They
// cover what neither the golden cases nor the random clusters do (feature gates,
// nodePortAddresses keywords).
func TestdataCases(dir string) ([]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		cases = append(cases, Case{Name: "testdata/" + name, Input: data, Modes: AllModes})
	}
	return cases, nil
}

// Env is what a case's NodeEnvironment (svcgen/v1alpha1) says about the node, as the
// harness needs it to build the node's namespaces.
type Env struct {
	Present      bool
	Family       string // IPv4, IPv6 or DualStack
	TCPBeLiberal bool
	Interfaces   []Interface // nil: the Node's InternalIPs
}

// Interface is a network interface with its addresses.
type Interface struct {
	Name      string
	Addresses []netip.Prefix
}

// Prepared is a case made ready for one mode: svcgen's input (its NodeEnvironment
// saying what kube-proxy probes on this node), the configuration kube-proxy reads
// (with the mode), and the node environment.
type Prepared struct {
	Input, Config []byte
	Env           Env
	// EnvAdjusted: the case's NodeEnvironment said otherwise about --random-fully or
	// nfacct than kube-proxy finds here, and was changed.
	EnvAdjusted bool
}

// Prepare rewrites a case for one mode. The NodeEnvironment's iptables section is set
// to what kube-proxy probes on this node (probe): svcgen must describe the node the
// oracle runs on. A case without a NodeEnvironment keeps svcgen's defaults, so a
// default that differs from a stock node shows as a difference. The configuration
// kube-proxy reads is the case's (from its own file or among the manifests, else an
// empty one) with mode set.
func Prepare(c Case, mode string, probe Probe) (*Prepared, error) {
	docs, err := decodeDocs(c.Input)
	if err != nil {
		return nil, fmt.Errorf("%s: input: %w", c.Name, err)
	}
	p := &Prepared{Env: Env{Family: "IPv4"}}
	var cfg *yaml.Node
	for _, d := range docs {
		switch kindOf(d) {
		case "NodeEnvironment":
			if err := readEnv(d, &p.Env); err != nil {
				return nil, fmt.Errorf("%s: NodeEnvironment: %w", c.Name, err)
			}
			p.EnvAdjusted = setProbe(d, probe)
		case "KubeProxyConfiguration":
			cfg = d
		}
	}
	if p.Input, err = encodeDocs(docs); err != nil {
		return nil, err
	}
	if c.Config != nil {
		cdocs, err := decodeDocs(c.Config)
		if err != nil || len(cdocs) != 1 {
			return nil, fmt.Errorf("%s: config: want one document (%v)", c.Name, err)
		}
		cfg = cdocs[0]
	}
	if cfg == nil {
		cfg = &yaml.Node{}
		if err := yaml.Unmarshal([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"), cfg); err != nil {
			return nil, err
		}
		cfg = cfg.Content[0]
	}
	setScalar(cfg, "mode", mode)
	if p.Config, err = encodeDocs([]*yaml.Node{cfg}); err != nil {
		return nil, err
	}
	return p, nil
}

func decodeDocs(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 1 && n.Content[0].Kind == yaml.MappingNode {
			docs = append(docs, n.Content[0])
		}
	}
}

func encodeDocs(docs []*yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	for _, d := range docs {
		buf.WriteString("---\n")
		enc := yaml.NewEncoder(&buf)
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
		enc.Close()
	}
	return buf.Bytes(), nil
}

// get is the value of key in a mapping node, nil if absent.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func kindOf(doc *yaml.Node) string {
	if k := get(doc, "kind"); k != nil {
		return k.Value
	}
	return ""
}

// setScalar sets key of a mapping to a plain scalar, adding the key when absent.
func setScalar(m *yaml.Node, key, value string) {
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	if value == "true" || value == "false" {
		v.Tag = "!!bool"
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// setProbe sets the NodeEnvironment's iptables.randomFully and iptables.nfacct to the
// probe's, and reports whether either changed (svcgen's defaults: both true).
func setProbe(env *yaml.Node, probe Probe) bool {
	ipt := get(env, "iptables")
	if ipt == nil || ipt.Kind != yaml.MappingNode {
		ipt = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setNode(env, "iptables", ipt)
	}
	was := func(key string, def bool) bool {
		if v := get(ipt, key); v != nil {
			return v.Value == "true"
		}
		return def
	}
	changed := was("randomFully", true) != probe.RandomFully || was("nfacct", true) != probe.NFAcct
	ipt.Style = 0
	setScalar(ipt, "randomFully", fmt.Sprint(probe.RandomFully))
	setScalar(ipt, "nfacct", fmt.Sprint(probe.NFAcct))
	return changed
}

func setNode(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func readEnv(d *yaml.Node, env *Env) error {
	var raw struct {
		IPFamily  string `yaml:"ipFamily"`
		Conntrack struct {
			TCPBeLiberal bool `yaml:"tcpBeLiberal"`
		} `yaml:"conntrack"`
		Interfaces []struct {
			Name      string   `yaml:"name"`
			Addresses []string `yaml:"addresses"`
		} `yaml:"interfaces"`
	}
	if err := d.Decode(&raw); err != nil {
		return err
	}
	env.Present = true
	if raw.IPFamily != "" {
		env.Family = raw.IPFamily
	}
	env.TCPBeLiberal = raw.Conntrack.TCPBeLiberal
	for _, itf := range raw.Interfaces {
		out := Interface{Name: itf.Name}
		for _, a := range itf.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return fmt.Errorf("interface %s: %w", itf.Name, err)
			}
			out.Addresses = append(out.Addresses, p)
		}
		env.Interfaces = append(env.Interfaces, out)
	}
	return nil
}

// ResolvedNode is a Node of svcgen resolve's output, as far as the harness needs it.
type ResolvedNode struct {
	Name      string
	Addresses []netip.Addr // InternalIP and ExternalIP, in order
}

// ResolvedNodes reads the Nodes of svcgen resolve's output.
func ResolvedNodes(resolved []byte) ([]ResolvedNode, error) {
	docs, err := decodeDocs(resolved)
	if err != nil {
		return nil, err
	}
	var out []ResolvedNode
	for _, d := range docs {
		if kindOf(d) != "Node" {
			continue
		}
		var n struct {
			Metadata struct{ Name string } `yaml:"metadata"`
			Status   struct {
				Addresses []struct{ Type, Address string } `yaml:"addresses"`
			} `yaml:"status"`
		}
		if err := d.Decode(&n); err != nil {
			return nil, err
		}
		rn := ResolvedNode{Name: n.Metadata.Name}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				rn.Addresses = append(rn.Addresses, ip)
			}
		}
		out = append(out, rn)
	}
	return out, nil
}

// HostnameOverride is the configuration's hostnameOverride ("" if none).
func HostnameOverride(config []byte) string {
	docs, err := decodeDocs(config)
	if err != nil || len(docs) == 0 {
		return ""
	}
	if v := get(docs[0], "hostnameOverride"); v != nil {
		return v.Value
	}
	return ""
}

// Probe is what kube-proxy finds on this node (the oracle's "probe" command).
type Probe struct {
	RandomFully bool `json:"randomFully"`
	NFAcct      bool `json:"nfacct"`
}

// netipPrefixHost is a as a host prefix (/32 or /128).
func netipPrefixHost(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
