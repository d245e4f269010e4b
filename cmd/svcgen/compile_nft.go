package main

import (
	"io"

	"github.com/svcgen/svcgen/internal/pipeline"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
)

// runCompileNFT writes nftables mode's output: the whole kube-proxy table as one nft
// transaction, the same in stages (--stages), or only what changed since --previous
// (with --minimal, only the chains and elements that differ).
func runCompileNFT(f *compileFlags, res *pipeline.Result, stdin io.Reader, stdout io.Writer) error {
	switch {
	case f.noflush:
		return usagef("--noflush is for iptables mode; the nftables script owns its table and touches nothing else")
	case f.split:
		return usagef("--split needs ipvs mode (-m ipvs)")
	case f.stages && f.previous != "":
		return usagef("--stages writes the whole table; it cannot be combined with --previous")
	}
	var prev *nftsyntax.Ruleset
	if f.previous != "" {
		var err error
		if prev, err = parseInput(f.previous, stdin, nftsyntax.Parse); err != nil {
			return &pipeline.InputError{Err: err}
		}
	}
	err := writeOutput(f.output, stdout, func(w io.Writer) error {
		if prev != nil {
			return nftplan.Write(w, res.Map, nftplan.Options{Previous: prev, Minimal: f.minimal})
		}
		return nftrules.Write(w, res.Map, nftrules.Options{Stages: f.stages})
	})
	if err != nil {
		return err
	}
	if f.lock != "" {
		return writeLock(f.lock, res.Lock)
	}
	return nil
}
