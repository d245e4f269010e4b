package main

import (
	"io"
	"os"

	"github.com/svcgen/svcgen/internal/pipeline"
)

// compileInputs is the first step of every command that works from manifests: read
// and compile what the input flags name, and print the warnings. stdinTaken says
// that another argument of the command reads stdin already.
func (f *inputFlags) compileInputs(stdin io.Reader, stderr io.Writer, stdinTaken bool) (*pipeline.Result, error) {
	in, s, err := f.settings(stdin)
	if err != nil {
		return nil, err
	}
	if stdinTaken && in.UsesStdin() {
		return nil, usagef("stdin (-) can be read only once")
	}
	res, err := pipeline.Run(in, s)
	if err != nil {
		return nil, err
	}
	printProblems(stderr, res.Warnings)
	return res, nil
}

// readInput reads a file named on the command line, or stdin for "-". name is what
// messages call it: the path, or "<stdin>".
func readInput(path string, stdin io.Reader) (name string, data []byte, err error) {
	if path == "-" {
		data, err = io.ReadAll(stdin)
		return "<stdin>", data, err
	}
	data, err = os.ReadFile(path)
	return path, data, err
}
