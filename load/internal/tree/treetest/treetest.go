// Package treetest helps the readers' tests compare the trees they build with the
// reference reader's (yaml.v3). Only _test.go files import it.
package treetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
	"go.yaml.in/yaml/v3"
)

// Reference reads every document of data with yaml.v3, the reference; an error
// when yaml.v3 cannot, or the trees would have a problem (see tree.FromYAML).
func Reference(data []byte) ([]tree.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []tree.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		var bad error
		t, _ := tree.FromYAML(&n, func(at tree.Path, msg string) {
			bad = errors.Join(bad, fmt.Errorf("%s: %s", at, msg))
		})
		if bad != nil {
			return out, bad
		}
		out = append(out, t)
	}
}

// Reader is the shape of the fast readers: they call doc with each document of src
// and report whether they could read it.
type Reader func(src string, doc func(doc int, n *tree.Node)) bool

// Collect reads data with read and keeps every document's tree.
func Collect(read Reader, data []byte) ([]tree.Node, bool) {
	var out []tree.Node
	ok := read(string(data), func(doc int, n *tree.Node) {
		if doc != len(out)+1 {
			panic(fmt.Sprintf("document %d after %d", doc, len(out)))
		}
		out = append(out, *n)
	})
	return out, ok
}

// NullDocuments makes ref's empty documents (yaml.v3 gives a node of no kind) the
// null scalars fast has in their place: both are null to the walker.
func NullDocuments(ref, fast []tree.Node) {
	for i := range ref {
		if ref[i].Kind == tree.None && i < len(fast) && tree.IsNull(&fast[i]) {
			ref[i] = fast[i]
		}
	}
}

// Dump writes trees out for a test's message.
func Dump(ns []tree.Node) string {
	var b strings.Builder
	for _, n := range ns {
		dump(&b, &n)
		b.WriteString(" | ")
	}
	return b.String()
}

func dump(b *strings.Builder, n *tree.Node) {
	switch n.Kind {
	case tree.Scalar:
		fmt.Fprintf(b, "%d:%q", n.Tag, n.Value)
	case tree.Mapping, tree.Sequence:
		open, end := "{", "}"
		if n.Kind == tree.Sequence {
			open, end = "[", "]"
		}
		b.WriteString(open)
		for i := range n.Content {
			dump(b, &n.Content[i])
			b.WriteByte(' ')
		}
		b.WriteString(end)
	default:
		b.WriteString("<none>")
	}
}
