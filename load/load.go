// Package load reads Kubernetes manifests into model values.
//
// It reads files, folders (recursively: their regular *.yaml, *.yml and *.json
// files), stdin, FIFOs and devices; YAML or JSON; several documents per file; and
// `kind: List` as `kubectl get -o yaml` prints it. Kinds that do not shape service
// rules (Deployment, ConfigMap, ...) are passed over, and counted (Tally). Every
// problem is reported with its file, document index, object and field path, and the
// loader keeps going so that one run lists all of them (Err).
//
// One place for each job:
//
//   - input.go: what an input is (a file, a folder's files, a stream) and how it is
//     opened; check.go: what is checked of every input before a reader trusts it
//     (size, binary data, UTF-8);
//   - read.go: which reader reads an input: jsontext for JSON (json.go), the fast
//     YAML reader (load/internal/fastyaml, one call) in pieces cut by the one
//     splitter (split.go), and yaml.v3 for whatever they give up on, or for
//     everything with Reader set to Reference (SVCGEN_YAML=reference). Every reader
//     gives the same trees (load/internal/tree), and FuzzLoaders holds the loader to
//     yaml.v3 alone on every path;
//   - kinds.go: the kinds svcgen reads, one entry each; the decoders (service.go,
//     endpoints.go, objects.go) read a tree through the walker (walk.go); fields.go
//     holds every object to the fields the Kubernetes API has (apitable.go).
package load

import (
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

// Dialect selects how strictly manifests are read.
type Dialect string

// Dialects.
const (
	// Kubernetes reads manifests as the API server would accept them.
	Kubernetes Dialect = ""
	// MiniK8s also accepts the course-project YAML of testdata/minik8s:
	// selector.matchLabels on a Service, lower-case protocols, a NodePort port without
	// `port`, node ports outside the default range.
	MiniK8s Dialect = "minik8s"
)

// Reader chooses how manifests are read.
type Reader string

// Readers.
const (
	// Fast reads JSON with jsontext and YAML with the fast reader (in pieces, on
	// every core), and whatever they give up on with yaml.v3: the default.
	Fast Reader = ""
	// Reference reads everything with yaml.v3 alone, the reference the fast readers
	// are held to: for triage (svcgen reads it from SVCGEN_YAML=reference).
	Reference Reader = "reference"
)

// Loader accumulates objects from several inputs.
type Loader struct {
	Dialect Dialect
	Reader  Reader
	// Strict makes what looks like a typo an error: an unknown field of an object
	// svcgen reads, a kind near one it reads (see fields.go).
	Strict bool
	// MaxInput is how many bytes one input may hold; 0 is DefaultMaxInput.
	MaxInput int64

	Cluster model.Cluster
	// Errors and Warnings are the problems of documents: of a field, or of a
	// whole object.
	Errors   model.Problems
	Warnings model.Problems
	// InputErrors are the inputs that could not be read, and why: missing,
	// unreadable, too large, binary. Nothing of such an input is loaded.
	InputErrors []error
	// InputWarnings are the files of folders that were passed over, and why.
	InputWarnings []error
	// Tally counts the objects of each input, read and passed over.
	Tally Tally

	files map[fileID]bool // the files read, so that one named twice is read once
	count counts          // the objects this Loader met, for Tally
	bools [2]bool         // false, true: see walker.boolPtr
	text  keeper
	// pieces is the size of the pieces YAML is read in (0: pieceSize); tests set it.
	pieces int
}

// Err is every error the Loader met, nil when none: the inputs that could not be
// read, in the order they were given, then the documents' problems, by file and
// document (model.Problems.Sort).
func (l *Loader) Err() error {
	l.Errors.Sort()
	errs := l.InputErrors
	if err := l.Errors.Err(); err != nil {
		errs = append(errs[:len(errs):len(errs)], err)
	}
	return errors.Join(errs...)
}

func (l *Loader) maxInput() int64 {
	if l.MaxInput > 0 {
		return l.MaxInput
	}
	return DefaultMaxInput
}

func (l *Loader) pieceSize() int {
	if l.pieces > 0 {
		return l.pieces
	}
	return pieceSize
}

// child is an empty Loader that reads as l does, for part of an input: what it
// loads joins l (merge) once the part is read, or is dropped.
func (l *Loader) child() *Loader {
	return &Loader{Dialect: l.Dialect, Reader: l.Reader, Strict: l.Strict, MaxInput: l.MaxInput, pieces: l.pieces}
}

// merge appends what sub loaded; sub is not used after.
func (l *Loader) merge(sub *Loader) {
	if reflect.ValueOf(l.Cluster).IsZero() {
		l.Cluster = sub.Cluster // the lists as they are: no copy
	} else {
		l.Cluster.Append(&sub.Cluster)
	}
	l.Errors.Merge(&sub.Errors)
	l.Warnings.Merge(&sub.Warnings)
	l.count.add(&sub.count)
}

// yamlError drops the "yaml: " prefix; the message says YAML syntax instead. The
// message may quote the input: it is escaped.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return "YAML syntax error: " + textutil.Escape(msg)
}

// shown is how an origin (model.Origin) shows a name from the input or the file
// system: quoted where it is not plain (textutil.Quote); "" when there is none.
func shown(name string) string {
	if name == "" {
		return ""
	}
	return textutil.Quote(name)
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
	w := &walker{origin: o, errs: &l.Errors, warns: &l.Warnings, dialect: l.Dialect, strict: l.Strict, bools: &l.bools, text: &l.text}
	apiVersion := w.str(n, "apiVersion")
	kind := w.str(n, "kind")
	if kind == "" {
		w.errorf(tree.At("kind"), "missing: every object needs apiVersion and kind")
		return
	}
	w.origin.Kind = shown(kind)
	if meta := tree.Get(n, "metadata"); meta != nil && meta.Kind == tree.Mapping {
		w.origin.Name = shown(w.text.keep(tree.ScalarText(tree.Get(meta, "name"))))
		w.origin.Namespace = shown(w.text.keep(tree.ScalarText(tree.Get(meta, "namespace"))))
	}
	k := kindOf(apiVersion, kind)
	if k == nil {
		l.count.pass(w.origin.Kind)
		l.passOver(w, apiVersion, kind)
		return
	}
	if k.plural != "" {
		l.count.readOne(k)
	}
	k.decode(l, w, n)
	w.checkFields(n, k.fields, tree.Path{})
}

// passOver passes over an object of a kind svcgen does not read: in silence when
// it is of another kind of the Kubernetes API, or of one svcgen does not know (a
// custom resource); with a warning when it is a kind svcgen reads in another
// apiVersion, or a kind svcgen reads but mistyped.
func (l *Loader) passOver(w *walker, apiVersion, kind string) {
	switch {
	case byName[kind] != nil:
		w.warnf(tree.At("apiVersion"), "%s %s is not a version svcgen reads; the object is passed over", textutil.Quote(apiVersion), kind)
	case apiKinds[kind]:
	default:
		if meant := nearest(kind, kindNames); meant != "" {
			w.typo(tree.At("kind"), "unknown kind %s, passed over (did you mean %s?)", textutil.Quote(kind), meant)
		}
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
