// Package kubeyaml writes svcgen's model of a cluster back as Kubernetes manifests: a
// multi-document YAML stream of ServiceCIDRs, Nodes, Services and EndpointSlices that
// kubectl could apply and any Kubernetes decoder reads. svcgen resolve prints the
// resolved cluster with it, so kube-proxy's own code (the conformance oracle) can be
// fed exactly what svcgen compiled.
//
// The output is deterministic: kinds in that order, objects by namespace and name,
// fields in the order of the Kubernetes API types, map keys sorted. Fields the model
// does not keep are not written; what the API server would have filled in that
// kube-proxy reads (spec.clusterIPs, spec.ipFamilies, the EndpointSlice label naming
// the Service) is.
package kubeyaml

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"

	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// Write writes the cluster's ServiceCIDRs, Nodes, Services and EndpointSlices, one
// document each. Pods, v1 Endpoints, configurations and NodeEnvironments are not
// written: a resolved cluster has turned the first two into EndpointSlices.
func Write(w io.Writer, c *model.Cluster) error {
	var docs []any
	for _, sc := range sorted(c.ServiceCIDRs, func(s *model.ServiceCIDR) string { return s.Name }) {
		docs = append(docs, serviceCIDR(sc))
	}
	for _, n := range sorted(c.Nodes, func(n *model.Node) string { return n.Name }) {
		docs = append(docs, node(n))
	}
	for _, s := range sorted(c.Services, func(s *model.Service) string { return s.Namespace + "/" + s.Name }) {
		docs = append(docs, service(s))
	}
	for _, es := range sorted(c.Slices, func(s *model.EndpointSlice) string { return s.Namespace + "/" + s.Name }) {
		docs = append(docs, endpointSlice(es))
	}
	var buf bytes.Buffer
	for _, d := range docs {
		buf.WriteString("---\n")
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
		if err := enc.Close(); err != nil {
			return fmt.Errorf("writing YAML: %w", err)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// sorted returns a copy of list ordered by key ("/" sorts below every name
// character, so "namespace/name" orders by namespace, then name).
func sorted[T any](list []T, key func(T) string) []T {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}

type typeMeta struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

type objectMeta struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace,omitempty"`
	Labels    map[string]string `yaml:"labels,omitempty"`
}

func strs[T fmt.Stringer](list []T) []string {
	var out []string
	for _, v := range list {
		out = append(out, v.String())
	}
	return out
}

type serviceCIDRDoc struct {
	typeMeta `yaml:",inline"`
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		CIDRs []string `yaml:"cidrs"`
	} `yaml:"spec"`
}

func serviceCIDR(sc *model.ServiceCIDR) serviceCIDRDoc {
	d := serviceCIDRDoc{typeMeta: typeMeta{"networking.k8s.io/v1", "ServiceCIDR"}, Metadata: objectMeta{Name: sc.Name}}
	d.Spec.CIDRs = strs(sc.CIDRs)
	return d
}

type nodeAddressDoc struct {
	Type    string `yaml:"type"`
	Address string `yaml:"address"`
}

type nodeDoc struct {
	typeMeta `yaml:",inline"`
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		PodCIDR  string   `yaml:"podCIDR,omitempty"`
		PodCIDRs []string `yaml:"podCIDRs,omitempty"`
	} `yaml:"spec"`
	Status struct {
		Addresses []nodeAddressDoc `yaml:"addresses,omitempty"`
	} `yaml:"status"`
}

func node(n *model.Node) nodeDoc {
	d := nodeDoc{typeMeta: typeMeta{"v1", "Node"}, Metadata: objectMeta{Name: n.Name, Labels: n.Labels}}
	if len(n.PodCIDRs) > 0 {
		d.Spec.PodCIDR = n.PodCIDRs[0].String()
		d.Spec.PodCIDRs = strs(n.PodCIDRs)
	}
	for _, a := range n.Addresses {
		d.Status.Addresses = append(d.Status.Addresses, nodeAddressDoc{a.Type, a.Address.String()})
	}
	return d
}

// addrString is an address, or "" for the zero value.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
