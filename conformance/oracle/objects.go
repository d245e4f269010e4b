package oracle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	discoveryv1defaults "k8s.io/kubernetes/pkg/apis/discovery/v1"
	networkingv1defaults "k8s.io/kubernetes/pkg/apis/networking/v1"
	"k8s.io/kubernetes/pkg/proxy/apis"
)

// Cluster is the API objects kube-proxy watches, as its informers would hold them.
type Cluster struct {
	Services     []*v1.Service
	Slices       []*discovery.EndpointSlice
	Nodes        []*v1.Node
	ServiceCIDRs []*networkingv1.ServiceCIDR
}

// ReadCluster reads a multi-document YAML (or JSON) stream of Services,
// EndpointSlices, Nodes and ServiceCIDRs: decoded with client-go's scheme, then
// defaulted with the API server's own defaulting functions (pkg/apis/*/v1), as the
// objects a kube-proxy receives have been. Any other kind is an error: the harness
// passes only what svcgen resolve writes.
func ReadCluster(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	defaulter, err := apiServerDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		defaulter.Default(obj)
		if err := c.add(obj); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func (c *Cluster) add(obj runtime.Object) error {
	switch o := obj.(type) {
	case *v1.Service:
		c.Services = append(c.Services, o)
	case *discovery.EndpointSlice:
		c.Slices = append(c.Slices, o)
	case *v1.Node:
		c.Nodes = append(c.Nodes, o)
	case *networkingv1.ServiceCIDR:
		c.ServiceCIDRs = append(c.ServiceCIDRs, o)
	default:
		return fmt.Errorf("a %T: the oracle takes Services, EndpointSlices, Nodes and ServiceCIDRs", obj)
	}
	return nil
}

// apiServerDefaults is a scheme holding only the API server's defaulting functions
// for the kinds the oracle reads (SetObjectDefaults_Service and friends).
func apiServerDefaults() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		scheme.AddToScheme,
		corev1defaults.RegisterDefaults,
		discoveryv1defaults.RegisterDefaults,
		networkingv1defaults.RegisterDefaults,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the defaulting scheme: %w", err)
		}
	}
	return s, nil
}

// proxyable is the informers' filter of cmd/kube-proxy's Run: its label selector
// (no service.kubernetes.io/service-proxy-name, no service.kubernetes.io/headless) on
// Services and EndpointSlices, and its field selector spec.clusterIP != None on
// Services.
type proxyable struct{ selector labels.Selector }

func newProxyable() (proxyable, error) {
	noProxyName, err := labels.NewRequirement(apis.LabelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return proxyable{}, err
	}
	noHeadless, err := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	if err != nil {
		return proxyable{}, err
	}
	return proxyable{labels.NewSelector().Add(*noProxyName, *noHeadless)}, nil
}

func (p proxyable) service(s *v1.Service) bool {
	return p.selector.Matches(labels.Set(s.Labels)) && s.Spec.ClusterIP != v1.ClusterIPNone
}

func (p proxyable) slice(s *discovery.EndpointSlice) bool {
	return p.selector.Matches(labels.Set(s.Labels))
}
