// Command diffbench compares unified-diff libraries on two large rulesets: time,
// allocation, output size, and whether GNU patch turns OLD into NEW with the output.
// It is its own module, so the libraries that lost stay out of svcgen's go.mod.
//
//	svcgen gen --services 10000 --seed 1 > a.yaml && svcgen compile -f a.yaml --noflush > a.rules
//	svcgen gen --services 10000 --seed 2 > b.yaml && svcgen compile -f b.yaml --noflush > b.rules
//	go run . a.rules b.rules
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/hexops/gotextdiff"
	"github.com/hexops/gotextdiff/myers"
	"github.com/hexops/gotextdiff/span"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/rogpeppe/go-internal/diff"
)

var libs = []struct {
	name string
	diff func(a, b []byte) []byte
}{
	{"rogpeppe/go-internal/diff", func(a, b []byte) []byte { return diff.Diff("a", a, "b", b) }},
	{"aymanbagabas/go-udiff", func(a, b []byte) []byte { return []byte(udiff.Unified("a", "b", string(a), string(b))) }},
	{"hexops/gotextdiff", func(a, b []byte) []byte {
		edits := myers.ComputeEdits(span.URIFromPath("a"), string(a), string(b))
		return []byte(fmt.Sprint(gotextdiff.ToUnified("a", "b", string(a), edits)))
	}},
	{"pmezard/go-difflib", func(a, b []byte) []byte {
		out, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)), FromFile: "a", ToFile: "b", Context: 3})
		return []byte(out)
	}},
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: diffbench OLD NEW")
		os.Exit(2)
	}
	a, err := os.ReadFile(os.Args[1])
	check(err)
	b, err := os.ReadFile(os.Args[2])
	check(err)
	dir, err := os.MkdirTemp("", "diffbench-")
	check(err)
	defer os.RemoveAll(dir)
	for _, lib := range libs {
		var out []byte
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		start := time.Now()
		done := make(chan struct{})
		go func() { out = lib.diff(a, b); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			fmt.Printf("%-28s gave up after 2 minutes\n", lib.name)
			continue
		}
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		fmt.Printf("%-28s %7.2fs  %6d MB allocated  %9d bytes of diff  patch gives NEW: %v\n",
			lib.name, took.Seconds(), (m1.TotalAlloc-m0.TotalAlloc)>>20, len(out), patches(dir, a, b, out))
	}
}

// patches applies the diff to OLD with GNU patch and compares the result with NEW.
func patches(dir string, a, b, d []byte) bool {
	target, patch := filepath.Join(dir, "target"), filepath.Join(dir, "patch")
	check(os.WriteFile(target, a, 0o644))
	check(os.WriteFile(patch, d, 0o644))
	if exec.Command("patch", "-s", "-f", target, patch).Run() != nil {
		return false
	}
	got, err := os.ReadFile(target)
	return err == nil && bytes.Equal(got, b)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
