package load

import (
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
)

// kindInfo is all the loader knows of a kind it reads: adding a kind is an entry in
// kinds, its decoder, and its fields (apiFields, from the Kubernetes API, or
// ownFields).
type kindInfo struct {
	name     string   // as manifests spell it: "Service"
	versions []string // the apiVersions svcgen reads
	plural   string   // for counts: "Services"; "" for List, whose items count
	decode   func(*Loader, *walker, *tree.Node)
	fields   *schema // see fields.go
	index    int     // in kinds
}

var kinds = []*kindInfo{
	{name: "Service", versions: []string{"v1"}, plural: "Services", decode: (*Loader).service},
	{name: "EndpointSlice", versions: []string{"discovery.k8s.io/v1"}, plural: "EndpointSlices", decode: (*Loader).endpointSlice},
	{name: "Endpoints", versions: []string{"v1"}, plural: "Endpoints", decode: (*Loader).endpoints},
	{name: "Pod", versions: []string{"v1"}, plural: "Pods", decode: (*Loader).pod},
	{name: "Node", versions: []string{"v1"}, plural: "Nodes", decode: (*Loader).node},
	{name: "ServiceCIDR", versions: []string{"networking.k8s.io/v1", "networking.k8s.io/v1beta1"}, plural: "ServiceCIDRs", decode: (*Loader).serviceCIDR},
	{name: "Deployment", versions: []string{"apps/v1"}, plural: "Deployments", decode: (*Loader).workload},
	{name: "StatefulSet", versions: []string{"apps/v1"}, plural: "StatefulSets", decode: (*Loader).workload},
	{name: "DaemonSet", versions: []string{"apps/v1"}, plural: "DaemonSets", decode: (*Loader).workload},
	{name: "ReplicaSet", versions: []string{"apps/v1"}, plural: "ReplicaSets", decode: (*Loader).workload},
	{name: "ReplicationController", versions: []string{"v1"}, plural: "ReplicationControllers", decode: (*Loader).workload},
	{name: "Job", versions: []string{"batch/v1"}, plural: "Jobs", decode: (*Loader).workload},
	{name: "CronJob", versions: []string{"batch/v1"}, plural: "CronJobs", decode: (*Loader).workload},
	{name: "KubeProxyConfiguration", versions: []string{"kubeproxy.config.k8s.io/v1alpha1"}, plural: "KubeProxyConfigurations", decode: (*Loader).config},
	{name: "NodeEnvironment", versions: []string{"svcgen/v1alpha1"}, plural: "NodeEnvironments", decode: (*Loader).environment},
	// A kind: List as kubectl prints one, and every v1 XxxList of a kind svcgen
	// does not read for itself.
	{name: "List", versions: []string{"v1"}, decode: (*Loader).list},
}

type kindKey struct{ apiVersion, kind string }

var (
	byKey  = map[kindKey]*kindInfo{}
	byName = map[string]*kindInfo{}
	// kindNames are the kinds svcgen reads, as a typo may have meant them.
	kindNames []string
)

func init() {
	for i, k := range kinds {
		k.index = i
		for _, v := range k.versions {
			byKey[kindKey{v, k.name}] = k
		}
		byName[k.name] = k
		kindNames = append(kindNames, k.name)
		k.fields = schemaOf(k.name)
	}
}

// kindOf is the kind svcgen reads an object of apiVersion and kind as; nil when it
// passes the object over.
func kindOf(apiVersion, kind string) *kindInfo {
	if k, ok := byKey[kindKey{apiVersion, kind}]; ok {
		return k
	}
	if strings.HasSuffix(kind, "List") && apiVersion == "v1" {
		return byName["List"]
	}
	return nil
}

// isList reports whether object decodes as a kind: List (see object).
func isList(n *tree.Node) bool {
	str := func(key string) string {
		if v := tree.Get(n, key); v != nil && v.Kind == tree.Scalar && v.Tag == tree.Str {
			return v.Value
		}
		return ""
	}
	k := kindOf(str("apiVersion"), str("kind"))
	return k != nil && k.name == "List"
}
