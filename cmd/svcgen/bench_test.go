package main

import (
	"bytes"
	"os"
	"path/filepath"
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
