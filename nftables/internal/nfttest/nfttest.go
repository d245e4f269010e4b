// Package nfttest holds what the tests of the nftables packages share: service maps
// compiled for nftables mode (the examples, edited in memory; manifests given as
// text), and the bytes a writer writes.
package nfttest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/release"
)

// Compile compiles manifests given as text for nftables mode, as the command does,
// for the newest release.
func Compile(tb testing.TB, manifests string) *ir.ServiceMap {
	tb.Helper()
	return CompileFor(tb, "", manifests)
}

// CompileFor is Compile for a kube-proxy release ("1.35"; "" for the newest).
func CompileFor(tb testing.TB, version, manifests string) *ir.ServiceMap {
	tb.Helper()
	s := pipeline.Settings{Mode: compiler.NFTables}
	if version != "" {
		r, err := release.Parse(version)
		if err != nil {
			tb.Fatal(err)
		}
		s.Release = r
	}
	return testkit.Compile(tb, "test.yaml", manifests, s).Map
}

// Examples compiles the repository's examples for nftables mode, each edit (old, new)
// made once in their text first; an edit that finds nothing fails the test (the
// examples changed).
func Examples(tb testing.TB, edits ...[2]string) *ir.ServiceMap {
	tb.Helper()
	return ExamplesFor(tb, "", edits...)
}

// ExamplesFor is Examples for a kube-proxy release ("" for the newest).
func ExamplesFor(tb testing.TB, version string, edits ...[2]string) *ir.ServiceMap {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "../../../examples")
	var text strings.Builder
	for _, name := range []string{"cluster.yaml", "list.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		text.WriteString("---\n")
		text.Write(data)
	}
	manifests := text.String()
	for _, e := range edits {
		if !strings.Contains(manifests, e[0]) {
			tb.Fatalf("examples changed: %q not found", e[0])
		}
		manifests = strings.Replace(manifests, e[0], e[1], 1)
	}
	return CompileFor(tb, version, manifests)
}

// Text is what write writes.
func Text(tb testing.TB, write func(io.Writer) error) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// Body is a script without the header comment that names what it was written for
// (its first line, when it is a comment).
func Body(script []byte) []byte {
	if bytes.HasPrefix(script, []byte("# ")) {
		if i := bytes.IndexByte(script, '\n'); i >= 0 {
			return script[i+1:]
		}
	}
	return script
}
