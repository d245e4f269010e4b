// Package load reads Kubernetes manifests into model values.
//
// It reads files, folders (recursively: *.yaml, *.yml, *.json) and stdin; YAML or JSON;
// several documents per file; and `kind: List` as `kubectl get -o yaml` prints it. Kinds
// that do not shape service rules (Deployment, ConfigMap, ...) are passed over. Every
// problem is reported with its file, document index, object and field path, and the
// loader keeps going so that one run lists all of them.
package load

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/svcgen/svcgen/load/internal/fastyaml"
	"github.com/svcgen/svcgen/load/internal/tree"
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
	bools    [2]bool // false, true: see walker.boolPtr
	text     keeper
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
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return err
	}
	in := bufio.NewReaderSize(fh, 256<<10)
	if !info.Mode().IsRegular() {
		// A pipe is read once: whole.
		text, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		l.Bytes(path, text)
		return nil
	}
	again := func() error {
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return err
		}
		in.Reset(fh)
		return nil
	}
	// JSON and YAML are read as streams (json.go, stream.go). Input that is not
	// JSON after all is read as YAML; YAML that the fast reader gives up on is read
	// again, whole, by yaml.v3.
	if head, _ := in.Peek(512); looksJSON(string(head)) {
		if l.json(path, in) {
			return nil
		}
		if err := again(); err != nil {
			return err
		}
	}
	ok, err := l.streamYAML(path, in, pieceSize)
	switch {
	case ok:
		return nil
	case err != nil && !errors.Is(err, errBinary):
		return err
	}
	if err := again(); err != nil {
		return err
	}
	var text strings.Builder
	text.Grow(int(info.Size()) + 1)
	if _, err := io.Copy(&text, in); err != nil {
		return err
	}
	if !l.binary(path, text.String()) {
		l.slow(path, text.String())
	}
	return nil
}

// Bytes loads the documents of one input named name.
func (l *Loader) Bytes(name string, data []byte) { l.Text(name, string(data)) }

// Text loads the documents of one input named name. Input that looks like JSON is
// read with jsontext (json.go); other input, or JSON that jsontext does not take, by
// the fast reader (fast.go), a large input in pieces on every core; otherwise, or
// when it gives up part way, yaml.v3 reads it again from the start. What a reader
// that gave up did is undone.
func (l *Loader) Text(name, src string) {
	if looksJSON(src) && l.json(name, strings.NewReader(src)) {
		return
	}
	l.yaml(name, src)
}

// json reads one JSON value from in; false (and l as before) when it could not.
func (l *Loader) json(name string, in io.Reader) bool {
	before := l.mark()
	ok, _ := l.readPiece(name, "", 0, func(_ string, fn func(int, *tree.Node), item func(int, int, *tree.Node)) bool {
		return readJSON(in, fn, item)
	})
	if !ok {
		l.rollback(before)
	}
	return ok
}

// yaml reads src as YAML: with the fast reader, else yaml.v3.
func (l *Loader) yaml(name, src string) {
	if !l.binary(name, src) && !l.fastPieces(name, src, runtime.GOMAXPROCS(0), pieceSize) {
		l.slow(name, src)
	}
}

// binary reports (as an error) a NUL byte in src: it is no manifest.
func (l *Loader) binary(name, src string) bool {
	if i := strings.IndexByte(src, 0); i >= 0 {
		l.Errors.Add(model.Origin{File: name, Doc: 1}, "", "not a YAML or JSON manifest: binary data (a NUL byte at offset %d)", i)
		return true
	}
	return false
}

// slow reads src with yaml.v3.
func (l *Loader) slow(name, src string) {
	dec := yaml.NewDecoder(strings.NewReader(src))
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
		tree := tree.FromYAML(&n)
		l.document(origin, &tree)
	}
}

// pieceSize is the least input worth splitting: below it a goroutine costs more than
// it saves.
const pieceSize = 1 << 20

// readFastReuse is fastyaml.Read with its memory reused from one document to the
// next.
func readFastReuse(src string, fn func(doc int, n *tree.Node), item func(doc, i int, n *tree.Node)) bool {
	var slab []tree.Node
	return fastyaml.Read(src, fn, item, &slab)
}

// reader is the shape of the fast readers (readFastReuse, readJSON): they call
// fn with each document and item with each item of a top-level "items" list, and
// report whether they could read src.
type reader func(src string, fn func(doc int, n *tree.Node), item func(doc, i int, n *tree.Node)) bool

// readPiece reads one piece of an input (whose first document is number first+1)
// into l with read; it reports whether the reader managed and how many documents it
// read.
func (l *Loader) readPiece(name, piece string, first int, read reader) (ok bool, docs int) {
	var items mark
	ok = read(piece, func(doc int, n *tree.Node) {
		docs++
		if list := tree.Get(n, "items"); list != nil && list.Streamed && !isList(n) {
			l.rollback(items) // not a List after all: its items mean nothing
		}
		l.document(model.Origin{File: name, Doc: first + doc}, n)
	}, func(doc, j int, item *tree.Node) {
		if j == 0 {
			items = l.mark()
		}
		l.listItem(model.Origin{File: name, Doc: first + doc}, j, item)
	})
	return ok, docs
}

func (l *Loader) fastPieces(name, src string, n, min int) bool {
	before := l.mark()
	pieces, first := splitDocuments(src, n, min)
	subs := make([]*Loader, len(pieces))
	ok := make([]bool, len(pieces))
	read := func(i int) {
		var docs int
		ok[i], docs = subs[i].readPiece(name, pieces[i], first[i], readFastReuse)
		// The later pieces are numbered from the split's count: check it.
		if i+1 < len(pieces) && docs != first[i+1]-first[i] {
			ok[i] = false
		}
	}
	subs[0] = l
	for i := 1; i < len(pieces); i++ {
		subs[i] = &Loader{Dialect: l.Dialect}
	}
	if len(pieces) == 1 {
		read(0)
	} else {
		var wg sync.WaitGroup
		for i := range pieces {
			wg.Go(func() { read(i) })
		}
		wg.Wait()
	}
	if slices.Contains(ok, false) {
		l.rollback(before)
		return false
	}
	for _, sub := range subs[1:] {
		l.Cluster.Append(&sub.Cluster)
		l.Errors.Merge(&sub.Errors)
		l.Warnings.Merge(&sub.Warnings)
	}
	return true
}

// splitDocuments cuts src into at most n pieces of at least min bytes, each after the
// first starting at a "---" line, and numbers their documents as yaml.v3 would:
// first[i] documents come before piece i.
func splitDocuments(src string, n, min int) (pieces []string, first []int) {
	if n > 1 && len(src) >= 2*min {
		size := max(len(src)/n, min)
		start := 0
		for len(pieces) < n-1 {
			cut := nextMarker(src, start+size)
			if cut < 0 || len(src)-cut < min {
				break
			}
			pieces = append(pieces, src[start:cut])
			start = cut
		}
		pieces = append(pieces, src[start:])
	} else {
		pieces = []string{src}
	}
	first = make([]int, len(pieces))
	for i := 1; i < len(pieces); i++ {
		first[i] = first[i-1] + countDocuments(pieces[i-1], i == 1)
	}
	return pieces, first
}

// nextMarker finds the first "---" line starting at or after from.
func nextMarker(src string, from int) int {
	for from < len(src) {
		i := strings.Index(src[from:], "\n---")
		if i < 0 {
			return -1
		}
		at := from + i + 1
		if isMarker(src[at:]) {
			return at
		}
		from = at
	}
	return -1
}

func isMarker(s string) bool {
	return strings.HasPrefix(s, "---") && (len(s) == 3 || s[3] == ' ' || s[3] == '\n')
}

// countDocuments counts the documents of a piece: one per "---" line, and in the
// first piece one more when content comes before the first "---".
func countDocuments(piece string, firstPiece bool) int {
	n := 0
	implicit := false
	for line := range strings.Lines(piece) {
		switch t := strings.TrimLeft(line, " "); {
		case isMarker(line):
			n++
		case n == 0 && firstPiece && t != "\n" && t != "" && t[0] != '#':
			implicit = true
		}
	}
	if implicit {
		n++
	}
	return n
}

// mark is how much a Loader holds, so that a failed fast read can be undone.
type mark struct {
	cluster       model.Cluster
	errors, warns int
}

func (l *Loader) mark() mark {
	return mark{cluster: l.Cluster, errors: l.Errors.Len(), warns: l.Warnings.Len()}
}

// rollback forgets everything loaded since m. The lists get back the headers they
// had (what was appended since lies beyond their length).
func (l *Loader) rollback(m mark) {
	l.Cluster = m.cluster
	l.Errors.Truncate(m.errors)
	l.Warnings.Truncate(m.warns)
}

// yamlError drops the "yaml: " prefix; the message says YAML syntax instead.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return "YAML syntax error: " + msg
}

func (l *Loader) document(o model.Origin, n *tree.Node) {
	if tree.IsNull(n) {
		return
	}
	if n.Kind != tree.Mapping {
		l.Errors.Add(o, "", "expected a Kubernetes object (a mapping with apiVersion and kind), got %s", tree.Describe(n))
		return
	}
	l.object(o, n)
}

// object decodes one object (or a List of them) of a known kind.
func (l *Loader) object(o model.Origin, n *tree.Node) {
	l.bools[1] = true
	w := &walker{origin: o, errs: &l.Errors, warns: &l.Warnings, dialect: l.Dialect, bools: &l.bools, text: &l.text}
	apiVersion := w.str(n, "apiVersion")
	kind := w.str(n, "kind")
	if kind == "" {
		w.errorf(tree.At("kind"), "missing: every object needs apiVersion and kind")
		return
	}
	w.origin.Kind = kind
	if meta := tree.Get(n, "metadata"); meta != nil && meta.Kind == tree.Mapping {
		w.origin.Name = w.text.keep(tree.ScalarText(tree.Get(meta, "name")))
		w.origin.Namespace = w.text.keep(tree.ScalarText(tree.Get(meta, "namespace")))
	}
	decode, ok := decoders[kindKey{apiVersion, kind}]
	if !ok {
		if strings.HasSuffix(kind, "List") && kind != "List" && apiVersion == "v1" {
			decode, ok = decoders[kindKey{"v1", "List"}]
		}
	}
	if !ok {
		if known[kind] {
			w.warnf(tree.At("apiVersion"), "%s %s is not a version svcgen reads; the object is passed over", apiVersion, kind)
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

var decoders map[kindKey]func(*Loader, *walker, *tree.Node)

func init() {
	decoders = map[kindKey]func(*Loader, *walker, *tree.Node){
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
func (l *Loader) list(w *walker, n *tree.Node) {
	items := tree.Get(n, "items")
	if tree.IsNull(items) {
		return
	}
	if items.Kind != tree.Sequence {
		w.errorf(tree.At("items"), "expected a list, got %s", tree.Describe(items))
		return
	}
	if items.Streamed {
		return // the fast reader handed them to listItem as it read them
	}
	for i := range items.Content {
		l.listItem(w.origin, i, &items.Content[i])
	}
}

// listItem decodes item i of a List whose origin is o.
func (l *Loader) listItem(o model.Origin, i int, item *tree.Node) {
	o.Kind, o.Name, o.Namespace = "", "", ""
	o.Item = o.Field("items[" + strconv.Itoa(i) + "]")
	if item.Kind != tree.Mapping {
		l.Errors.Add(o, "", "expected a Kubernetes object, got %s", tree.Describe(item))
		return
	}
	l.object(o, item)
}

// isList reports whether object decodes as a kind: List (see object).
func isList(n *tree.Node) bool {
	str := func(key string) string {
		if v := tree.Get(n, key); v != nil && v.Kind == tree.Scalar && v.Tag == tree.Str {
			return v.Value
		}
		return ""
	}
	apiVersion, kind := str("apiVersion"), str("kind")
	if apiVersion != "v1" || !strings.HasSuffix(kind, "List") {
		return false
	}
	_, other := decoders[kindKey{apiVersion, kind}]
	return kind == "List" || !other
}
