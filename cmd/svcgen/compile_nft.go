package main

import (
	"io"

	"github.com/svcgen/svcgen/emit/nft"
	"github.com/svcgen/svcgen/internal/pipeline"
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
	opts := nft.Options{Stages: f.stages, Minimal: f.minimal}
	if f.previous != "" {
		prev, err := parseInput(f.previous, stdin, nft.Parse)
		if err != nil {
			return &pipeline.InputError{Err: err}
		}
		opts.Previous = prev
	}
	err := writeOutput(f.output, stdout, func(w io.Writer) error { return nft.Write(w, res.Map, opts) })
	if err != nil {
		return err
	}
	if f.lock != "" {
		return writeLock(f.lock, res.Lock)
	}
	return nil
}
