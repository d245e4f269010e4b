package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/benchdata"
)

// BenchmarkCompile runs the whole command in the process, file in and file out, as
// scripts/bench.sh runs the binary: go test -run - -bench Compile ./cmd/svcgen
func BenchmarkCompile(b *testing.B) {
	dir := b.TempDir()
	for _, n := range benchdata.Sizes {
		for _, c := range []struct {
			format gen.Format
			mode   string
		}{{gen.YAML, "iptables"}, {gen.JSON, "iptables"}, {gen.YAML, "ipvs"}, {gen.YAML, "nftables"}} {
			b.Run(benchdata.Name(n)+"/"+string(c.format)+"/"+c.mode, func(b *testing.B) {
				in := filepath.Join(dir, benchdata.Name(n)+"."+string(c.format))
				if _, err := os.Stat(in); err != nil {
					if err := os.WriteFile(in, benchdata.Manifests(b, n, c.format), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				args := []string{"compile", "-m", c.mode, "-f", in, "-o", filepath.Join(dir, "out")}
				b.ReportAllocs()
				defer benchdata.CPU(b)()
				for b.Loop() {
					var stderr bytes.Buffer
					if code := run(args, nil, nil, &stderr); code != 0 {
						b.Fatalf("exit %d: %s", code, stderr.String())
					}
				}
			})
		}
	}
}

// BenchmarkDiff runs diff of two compiled rulesets (one endpoint moved between them)
// and audit of the moved manifests against the first, in the process, in every mode
// diff reads: go test -run - -bench Diff ./cmd/svcgen (-bench 'Diff/10k/diff/iptables'
// makes the inputs of that size only).
func BenchmarkDiff(b *testing.B) {
	dir := b.TempDir()
	moved := regexp.MustCompile(`(?m)^( *- )10\.128\.1\.1$`)
	for _, n := range benchdata.Sizes {
		name := benchdata.Name(n)
		b.Run(name, func(b *testing.B) {
			in, movedIn := filepath.Join(dir, name+".yaml"), filepath.Join(dir, name+"-moved.yaml")
			data := benchdata.Manifests(b, n, gen.YAML)
			if err := os.WriteFile(in, data, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(movedIn, moved.ReplaceAll(data, []byte("${1}10.99.0.1")), 0o644); err != nil {
				b.Fatal(err)
			}
			for _, mode := range []string{"iptables", "nftables", "ipvs"} {
				benchmarkDiffMode(b, mode, in, movedIn, filepath.Join(dir, name))
			}
		})
	}
}

// benchmarkDiffMode compiles in and movedIn in one mode and runs diff and audit of them.
func benchmarkDiffMode(b *testing.B, mode, in, movedIn, prefix string) {
	old, new := prefix+"."+mode, prefix+"-moved."+mode
	compiled := false
	cases := [][]string{{"diff", old, new}}
	if mode != "ipvs" {
		cases = append(cases, []string{"audit", "-m", mode, "-f", movedIn, "--rules", old})
	}
	for _, args := range cases {
		b.Run(args[0]+"/"+mode, func(b *testing.B) {
			if !compiled {
				for _, c := range [][]string{{"compile", "-m", mode, "-f", in, "-o", old}, {"compile", "-m", mode, "-f", movedIn, "-o", new}} {
					var stderr bytes.Buffer
					if code := run(c, nil, nil, &stderr); code != 0 {
						b.Fatalf("exit %d: %s", code, stderr.String())
					}
				}
				compiled = true
			}
			b.ReportAllocs()
			defer benchdata.CPU(b)()
			for b.Loop() {
				var stdout, stderr bytes.Buffer
				if code := run(args, nil, &stdout, &stderr); code != 3 {
					b.Fatalf("exit %d, want 3 (differences): %s", code, stderr.String())
				}
			}
		})
	}
}
