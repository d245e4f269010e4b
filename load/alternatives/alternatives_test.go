// Package alternatives measures libraries that could read svcgen's manifests instead
// of load's fast reader, on the generated 10,000-Service cluster. It is a module of
// its own so that the libraries it measures do not become svcgen's dependencies:
//
//	cd load/alternatives && go test -run - -bench . -count 5
//
// Each benchmark only parses into the library's own generic form (yaml.v3's Node,
// go-yaml's AST, map[string]any, jsontext tokens); building svcgen's model from that
// would come on top, so each figure is a lower bound of what the library would cost.
// The same cluster through svcgen's whole load is BenchmarkReader in ../.
package alternatives

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"

	jsonv2 "github.com/go-json-experiment/json/jsontext"
	goyaml "github.com/goccy/go-yaml/parser"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/benchdata"
	"go.yaml.in/yaml/v3"
)

const services = 10000

// documents splits multi-document YAML into about n pieces at "---" lines.
func documents(src []byte, n int) [][]byte {
	var out [][]byte
	size := len(src) / n
	for len(out) < n-1 {
		i := bytes.Index(src[min(size, len(src)):], []byte("\n---\n"))
		if i < 0 {
			break
		}
		cut := size + i + 1
		out = append(out, src[:cut])
		src = src[cut:]
	}
	return append(out, src)
}

// everyCore runs parse over the pieces of src, one goroutine each.
func everyCore(b *testing.B, src []byte, parse func([]byte) error) {
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for i, p := range documents(src, len(errs)) {
		wg.Go(func() { errs[i] = parse(p) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

func yamlV3(src []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func goccy(src []byte) error {
	_, err := goyaml.ParseBytes(src, 0)
	return err
}

func bench(b *testing.B, format gen.Format, parse func(b *testing.B, src []byte)) {
	src := benchdata.Manifests(b, services, format)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	defer benchdata.CPU(b)()
	for b.Loop() {
		parse(b, src)
	}
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkYAML(b *testing.B) {
	b.Run("yaml.v3", func(b *testing.B) {
		bench(b, gen.YAML, func(b *testing.B, src []byte) { must(b, yamlV3(src)) })
	})
	b.Run("yaml.v3-every-core", func(b *testing.B) {
		bench(b, gen.YAML, func(b *testing.B, src []byte) { everyCore(b, src, yamlV3) })
	})
	b.Run("goccy-go-yaml", func(b *testing.B) {
		bench(b, gen.YAML, func(b *testing.B, src []byte) { must(b, goccy(src)) })
	})
	b.Run("goccy-go-yaml-every-core", func(b *testing.B) {
		bench(b, gen.YAML, func(b *testing.B, src []byte) { everyCore(b, src, goccy) })
	})
}

func BenchmarkJSON(b *testing.B) {
	b.Run("encoding-json", func(b *testing.B) {
		bench(b, gen.JSON, func(b *testing.B, src []byte) {
			var v map[string]any
			must(b, json.Unmarshal(src, &v))
		})
	})
	b.Run("jsontext-tokens", func(b *testing.B) {
		bench(b, gen.JSON, func(b *testing.B, src []byte) {
			dec := jsonv2.NewDecoder(bytes.NewReader(src))
			for {
				if _, err := dec.ReadToken(); err == io.EOF {
					return
				} else if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("yaml.v3", func(b *testing.B) {
		bench(b, gen.JSON, func(b *testing.B, src []byte) { must(b, yamlV3(src)) })
	})
	b.Run("goccy-go-yaml", func(b *testing.B) {
		bench(b, gen.JSON, func(b *testing.B, src []byte) { must(b, goccy(src)) })
	})
}
