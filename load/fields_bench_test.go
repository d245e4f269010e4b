package load

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/load/internal/tree/treetest"
	"github.com/svcgen/svcgen/model"
)

// BenchmarkCheckFields holds the objects of a generated cluster (100 Services, 10
// endpoints each) to their fields, as the loader does every object it reads.
func BenchmarkCheckFields(b *testing.B) {
	docs := generatedTrees(b)
	var schemas []*schema
	for i := range docs {
		schemas = append(schemas, kindOf(tree.ScalarText(tree.Get(&docs[i], "apiVersion")), tree.ScalarText(tree.Get(&docs[i], "kind"))).fields)
	}
	l := &Loader{}
	w := &walker{errs: &l.Errors, warns: &l.Warnings}
	b.ReportAllocs()
	for b.Loop() {
		for i := range docs {
			w.checkFields(&docs[i], schemas[i], tree.Path{})
		}
	}
	if l.Warnings.Len() > 0 {
		b.Fatal(l.Warnings.List()[0])
	}
}

// BenchmarkObjects decodes the same objects as BenchmarkCheckFields, the check of
// their fields included: what the check costs is its share of this.
func BenchmarkObjects(b *testing.B) {
	docs := generatedTrees(b)
	b.ReportAllocs()
	for b.Loop() {
		l := &Loader{}
		for i := range docs {
			l.document(model.Origin{File: "x", Doc: i + 1}, &docs[i])
		}
	}
}

// generatedTrees are the documents of a generated cluster (100 Services, 10
// endpoints each), read by yaml.v3.
func generatedTrees(b *testing.B) []tree.Node {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 100, Endpoints: 10, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	docs, err := treetest.Reference(buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	return docs
}
