// Package load reads Kubernetes manifests into model values.
//
// It reads files, folders (recursively: *.yaml, *.yml, *.json) and stdin; YAML or JSON;
// several documents per file; and `kind: List` as `kubectl get -o yaml` prints it. Kinds
// that do not shape service rules (Deployment, ConfigMap, ...) are passed over. Every
// problem is reported with its file, document index, object and field path, and the
// loader keeps going so that one run lists all of them.
package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// Dialect selects how strictly manifests are read.
type Dialect string

// Dialects.
const (
	// Kubernetes reads manifests as the API server would accept them.
	Kubernetes Dialect = ""
	// MiniK8s also accepts the course-project YAML of shared/seed-systems:
	// selector.matchLabels on a Service, lower-case protocols, a NodePort port without
	// `port`, node ports outside the default range.
	MiniK8s Dialect = "minik8s"
)

// Loader accumulates objects from several inputs.
type Loader struct {
	Dialect  Dialect
	Cluster  model.Cluster
	Errors   model.Problems
	Warnings model.Problems
}

// StdinName is how stdin is named in messages.
const StdinName = "<stdin>"

// Path loads a file or a folder; "-" reads stdin.
func (l *Loader) Path(path string, stdin io.Reader) error {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		l.Bytes(StdinName, data)
		return nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return l.file(path)
	}
	files, err := manifestFiles(path)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no *.yaml, *.yml or *.json files in this folder", path)
	}
	for _, f := range files {
		if err := l.file(f); err != nil {
			return err
		}
	}
	return nil
}

// manifestFiles lists the manifest files under dir, sorted, skipping hidden folders.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if IsManifest(p) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// IsManifest reports whether a file in a folder is read: *.yaml, *.yml, *.json.
func IsManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func (l *Loader) file(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	l.Bytes(path, data)
	return nil
}

// Bytes loads the documents of one input named name. The fast reader (fast.go) reads
// it when it can; otherwise, or when it gives up part way, yaml.v3 reads it again
// from the start and what the fast reader did is undone.
func (l *Loader) Bytes(name string, data []byte) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		l.Errors.Add(model.Origin{File: name, Doc: 1}, "", "not a YAML or JSON manifest: binary data (a NUL byte at offset %d)", i)
		return
	}
	before := l.mark()
	fast := readFast(string(data), func(doc int, n *node) {
		l.document(model.Origin{File: name, Doc: doc}, n)
	})
	if fast {
		return
	}
	l.rollback(before)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return
		}
		origin := model.Origin{File: name, Doc: doc}
		if err != nil {
			// The decoder cannot resynchronise after a syntax error.
			l.Errors.Add(origin, "", "%s", yamlError(err))
			return
		}
		tree := fromYAML(&n)
		l.document(origin, &tree)
	}
}

// mark is how much a Loader holds, so that a failed fast read can be undone.
type mark struct {
	cluster       model.Cluster
	errors, warns int
}

func (l *Loader) mark() mark {
	return mark{cluster: l.Cluster, errors: l.Errors.Len(), warns: l.Warnings.Len()}
}

// rollback forgets everything loaded since m.
func (l *Loader) rollback(m mark) {
	c := &l.Cluster
	c.Services = c.Services[:len(m.cluster.Services)]
	c.Slices = c.Slices[:len(m.cluster.Slices)]
	c.Endpoints = c.Endpoints[:len(m.cluster.Endpoints)]
	c.Pods = c.Pods[:len(m.cluster.Pods)]
	c.Nodes = c.Nodes[:len(m.cluster.Nodes)]
	c.ServiceCIDRs = c.ServiceCIDRs[:len(m.cluster.ServiceCIDRs)]
	c.Configs = c.Configs[:len(m.cluster.Configs)]
	c.Environments = c.Environments[:len(m.cluster.Environments)]
	l.Errors.Truncate(m.errors)
	l.Warnings.Truncate(m.warns)
}

// yamlError drops the "yaml: " prefix; the message says YAML syntax instead.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return "YAML syntax error: " + msg
}

func (l *Loader) document(o model.Origin, n *node) {
	if isNull(n) {
		return
	}
	if n.kind != mappingNode {
		l.Errors.Add(o, "", "expected a Kubernetes object (a mapping with apiVersion and kind), got %s", describe(n))
		return
	}
	l.object(o, n)
}

// object decodes one object (or a List of them) of a known kind.
func (l *Loader) object(o model.Origin, n *node) {
	w := &walker{origin: o, errs: &l.Errors, warns: &l.Warnings, dialect: l.Dialect}
	apiVersion := w.str(n, "apiVersion")
	kind := w.str(n, "kind")
	if kind == "" {
		w.errorf("kind", "missing: every object needs apiVersion and kind")
		return
	}
	w.origin.Kind = kind
	if meta := get(n, "metadata"); meta != nil && meta.kind == mappingNode {
		w.origin.Name = scalar(get(meta, "name"))
		w.origin.Namespace = scalar(get(meta, "namespace"))
	}
	decode, ok := decoders[kindKey{apiVersion, kind}]
	if !ok {
		if strings.HasSuffix(kind, "List") && kind != "List" && apiVersion == "v1" {
			decode, ok = decoders[kindKey{"v1", "List"}]
		}
	}
	if !ok {
		if known[kind] {
			w.warnf("apiVersion", "%s %s is not a version svcgen reads; the object is passed over", apiVersion, kind)
		}
		return
	}
	decode(l, w, n)
}

type kindKey struct{ apiVersion, kind string }

// known kinds: a different apiVersion of one of these gets a warning, not silence.
var known = map[string]bool{
	"Service": true, "EndpointSlice": true, "Endpoints": true, "Pod": true, "Node": true,
	"ServiceCIDR": true, "KubeProxyConfiguration": true, "NodeEnvironment": true,
}

var decoders map[kindKey]func(*Loader, *walker, *node)

func init() {
	decoders = map[kindKey]func(*Loader, *walker, *node){
		{"v1", "List"}:                               (*Loader).list,
		{"v1", "Service"}:                            (*Loader).service,
		{"v1", "Endpoints"}:                          (*Loader).endpoints,
		{"v1", "Pod"}:                                (*Loader).pod,
		{"v1", "Node"}:                               (*Loader).node,
		{"discovery.k8s.io/v1", "EndpointSlice"}:     (*Loader).endpointSlice,
		{"networking.k8s.io/v1", "ServiceCIDR"}:      (*Loader).serviceCIDR,
		{"networking.k8s.io/v1beta1", "ServiceCIDR"}: (*Loader).serviceCIDR,
		{"kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration"}: (*Loader).config,
		{"svcgen/v1alpha1", "NodeEnvironment"}:                         (*Loader).environment,
	}
}

// list decodes a kind: List; each item is an object of its own, named items[i].
func (l *Loader) list(w *walker, n *node) {
	items := get(n, "items")
	if isNull(items) {
		return
	}
	if items.kind != sequenceNode {
		w.errorf("items", "expected a list, got %s", describe(items))
		return
	}
	for i := range items.content {
		item := &items.content[i]
		o := w.origin
		o.Kind, o.Name, o.Namespace = "", "", ""
		o.Item = w.origin.Field(fmt.Sprintf("items[%d]", i))
		if item.kind != mappingNode {
			l.Errors.Add(o, "", "expected a Kubernetes object, got %s", describe(item))
			continue
		}
		l.object(o, item)
	}
}
