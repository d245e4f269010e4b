package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/svcgen/svcgen/internal/fileutil"
	"github.com/svcgen/svcgen/internal/pipeline"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// runCompileIPVS writes ipvs mode: one script, or with --split its parts as files in
// the folder -o names.
func runCompileIPVS(f *compileFlags, res *pipeline.Result, stdout io.Writer) error {
	if f.noflush || f.previous != "" || f.minimal {
		return usagef("--noflush, --previous and --minimal are for iptables mode; the ipvs script always converges the node")
	}
	node := ipvsrules.Build(res.Map)
	if f.split {
		if f.output == "" || f.output == "-" {
			return usagef("--split writes several files: name their folder with -o DIR")
		}
		if err := os.MkdirAll(f.output, 0o755); err != nil {
			return err
		}
		err := ipvssyntax.WriteSplit(node, func(name string, write func(io.Writer) error) error {
			return fileutil.WriteAtomic(filepath.Join(f.output, name), write)
		})
		if err != nil {
			return err
		}
	} else {
		err := writeOutput(f.output, stdout, func(w io.Writer) error {
			return ipvssyntax.WriteScript(w, node, ipvssyntax.Header{Node: res.Map.Node.Name})
		})
		if err != nil {
			return err
		}
	}
	if f.lock != "" {
		return writeLock(f.lock, res.Lock)
	}
	return nil
}
