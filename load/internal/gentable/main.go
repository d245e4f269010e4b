// Command gentable writes load/apitable.go: the kinds of the Kubernetes API, and the
// field names of the objects svcgen reads at the paths where it reads them, from the
// OpenAPI (swagger.json) of each Kubernetes release svcgen supports. The oracle
// modules (conformance/vX.Y) download those releases, so after a build of theirs:
//
//	go generate ./load
//
// A field of any release counts (the union): a manifest written for one of them must
// not be told its fields are unknown.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// reads names the objects svcgen reads, by kind: the definition of the object and
// the paths (from the object, "[]" after a list) at which svcgen reads a mapping's
// fields. Where svcgen reads no field (labels, annotations, a selector), the keys
// are the user's and are not checked.
var reads = []struct {
	kind, definition string
	paths            []string
}{
	{"Service", "io.k8s.api.core.v1.Service", []string{"", "metadata", "spec", "spec.ports[]",
		"spec.sessionAffinityConfig", "spec.sessionAffinityConfig.clientIP",
		"status", "status.loadBalancer", "status.loadBalancer.ingress[]"}},
	{"EndpointSlice", "io.k8s.api.discovery.v1.EndpointSlice", []string{"", "metadata", "ports[]", "endpoints[]",
		"endpoints[].conditions", "endpoints[].hints", "endpoints[].hints.forZones[]", "endpoints[].hints.forNodes[]"}},
	{"Endpoints", "io.k8s.api.core.v1.Endpoints", []string{"", "metadata", "subsets[]", "subsets[].addresses[]",
		"subsets[].notReadyAddresses[]", "subsets[].ports[]"}},
	{"Pod", "io.k8s.api.core.v1.Pod", []string{"", "metadata", "metadata.ownerReferences[]", "spec", "spec.containers[]", "spec.containers[].ports[]",
		"status", "status.podIPs[]", "status.conditions[]"}},
	{"Node", "io.k8s.api.core.v1.Node", []string{"", "metadata", "spec", "spec.taints[]", "status", "status.addresses[]", "status.nodeInfo"}},
	{"Deployment", "io.k8s.api.apps.v1.Deployment", workload("spec", "spec.selector", "spec.selector.matchExpressions[]")},
	{"ReplicaSet", "io.k8s.api.apps.v1.ReplicaSet", workload("spec", "spec.selector", "spec.selector.matchExpressions[]")},
	{"StatefulSet", "io.k8s.api.apps.v1.StatefulSet", workload("spec", "spec.selector", "spec.selector.matchExpressions[]", "spec.ordinals")},
	{"DaemonSet", "io.k8s.api.apps.v1.DaemonSet", workload("spec", "spec.selector", "spec.selector.matchExpressions[]")},
	{"ReplicationController", "io.k8s.api.core.v1.ReplicationController", workload("spec")},
	{"Job", "io.k8s.api.batch.v1.Job", workload("spec", "spec.selector", "spec.selector.matchExpressions[]")},
	{"CronJob", "io.k8s.api.batch.v1.CronJob", workload("spec", "spec.jobTemplate", "spec.jobTemplate.spec",
		"spec.jobTemplate.spec.selector", "spec.jobTemplate.spec.selector.matchExpressions[]")},
	{"ServiceCIDR", "io.k8s.api.networking.v1.ServiceCIDR", []string{"", "metadata", "spec"}},
	// kind: List has no definition of its own; it is as every XxxList is.
	{"List", "io.k8s.api.core.v1.ServiceList", []string{""}},
}

// workload is the paths svcgen reads of a workload: its metadata, the given paths
// of its spec, and its pod template (at spec.template, or for a CronJob at
// spec.jobTemplate.spec.template).
func workload(spec ...string) []string {
	t := "spec.template"
	if slices.Contains(spec, "spec.jobTemplate") {
		t = "spec.jobTemplate.spec.template"
	}
	aff := t + ".spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	paths := []string{"", "metadata", "metadata.ownerReferences[]"}
	paths = append(paths, spec...)
	return append(paths, t, t+".metadata", t+".spec", t+".spec.containers[]", t+".spec.containers[].ports[]",
		t+".spec.tolerations[]", t+".spec.affinity", t+".spec.affinity.nodeAffinity", aff,
		aff+".nodeSelectorTerms[]", aff+".nodeSelectorTerms[].matchExpressions[]", aff+".nodeSelectorTerms[].matchFields[]")
}

type definition struct {
	Properties map[string]property     `json:"properties"`
	GVK        []struct{ Kind string } `json:"x-kubernetes-group-version-kind"`
}

type property struct {
	Ref   string `json:"$ref"`
	Items struct {
		Ref string `json:"$ref"`
	} `json:"items"`
}

func main() {
	out := flag.String("o", "apitable.go", "the file to write")
	flag.Parse()
	specs := flag.Args()
	if len(specs) == 0 {
		log.Fatal("usage: gentable [-o FILE] SWAGGER.json...")
	}
	src, err := generate(specs)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// generate is the source of apitable.go from the swagger.json of each release.
func generate(specs []string) ([]byte, error) {
	var releases []string
	var all []map[string]definition
	for _, path := range specs {
		defs, release, err := read(path)
		if err != nil {
			return nil, err
		}
		all, releases = append(all, defs), append(releases, release)
	}
	return format.Source(write(releases, all))
}

// read reads the definitions of one release's swagger.json, and the release from
// its path in the module cache.
func read(path string) (map[string]definition, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var doc struct{ Definitions map[string]definition }
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	release := filepath.Base(path)
	if m := regexp.MustCompile(`kubernetes@(v[0-9.]+)`).FindStringSubmatch(path); m != nil {
		release = m[1]
	}
	return doc.Definitions, release, nil
}

func write(releases []string, all []map[string]definition) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by load/internal/gentable from the OpenAPI of Kubernetes %s. DO NOT EDIT.\n\n", strings.Join(releases, ", "))
	b.WriteString("package load\n\n")
	b.WriteString("// apiKinds are the kinds of the Kubernetes API: an object of one of these that svcgen\n// does not read is passed over in silence.\nvar apiKinds = map[string]bool{\n")
	kinds := map[string]bool{}
	for _, defs := range all {
		for _, d := range defs {
			for _, g := range d.GVK {
				kinds[g.Kind] = true
			}
		}
	}
	for _, k := range sortedKeys(kinds) {
		fmt.Fprintf(&b, "\t%q: true,\n", k)
	}
	b.WriteString("}\n\n")
	b.WriteString("// apiFields are the fields of the objects svcgen reads, by kind and path (\"[]\"\n// after a list), where it reads a mapping's fields: see fields.go.\nvar apiFields = map[string][]string{\n")
	for _, r := range reads {
		for _, path := range r.paths {
			fields := map[string]bool{}
			for _, defs := range all {
				if d, ok := resolve(defs, r.definition, path); ok {
					for f := range d.Properties {
						fields[f] = true
					}
				}
			}
			if len(fields) == 0 {
				log.Fatalf("%s %q: no fields in any release", r.kind, path)
			}
			key := r.kind
			if path != "" {
				key += "." + path
			}
			fmt.Fprintf(&b, "\t%q: {", key)
			for i, f := range sortedKeys(fields) {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q", f)
			}
			b.WriteString("},\n")
		}
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// resolve follows path from the definition named root; false when a release does
// not have it.
func resolve(defs map[string]definition, root, path string) (definition, bool) {
	d, ok := defs[root]
	if path == "" || !ok {
		return d, ok
	}
	for _, step := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(step, "[]")
		p, ok := d.Properties[name]
		if !ok {
			return definition{}, false
		}
		ref := p.Ref
		if list {
			ref = p.Items.Ref
		}
		if d, ok = defs[strings.TrimPrefix(ref, "#/definitions/")]; !ok {
			return definition{}, false
		}
	}
	return d, true
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Compact(keys)
}
