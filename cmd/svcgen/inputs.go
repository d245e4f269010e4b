package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/load"
)

// inputCheck is a command's own check of its flags against the inputs: a usage
// error, found before anything is read.
type inputCheck func(pipeline.Inputs) error

// compileInputs is the first step of every command that works from manifests: check
// the input flags, then the command's own (check, when not nil), read and compile
// what the input flags name, and print the warnings.
func (f *inputFlags) compileInputs(stdin io.Reader, stderr io.Writer, check inputCheck) (*pipeline.Result, error) {
	return f.runInputs(stdin, stderr, check, pipeline.Run)
}

// watchInputs is compileInputs for a command that keeps watching its inputs: the
// watch it returns compiles again what a changed file touches.
func (f *inputFlags) watchInputs(stdin io.Reader, stderr io.Writer, check inputCheck) (*pipeline.Watch, *pipeline.Result, error) {
	var w *pipeline.Watch
	res, err := f.runInputs(stdin, stderr, check, func(in pipeline.Inputs, s pipeline.Settings) (res *pipeline.Result, err error) {
		w, res, err = pipeline.NewWatch(in, s)
		return res, err
	})
	return w, res, err
}

func (f *inputFlags) runInputs(stdin io.Reader, stderr io.Writer, check inputCheck, run func(pipeline.Inputs, pipeline.Settings) (*pipeline.Result, error)) (*pipeline.Result, error) {
	in, s, err := f.settings(stdin)
	if err != nil {
		return nil, err
	}
	if f.quiet && f.verbose {
		return nil, usagef("-q and -v cannot be used together")
	}
	if in.Reader, err = manifestReader(os.Getenv("SVCGEN_YAML")); err != nil {
		return nil, err
	}
	in.Strict = f.strict
	if check != nil {
		if err := check(in); err != nil {
			return nil, err
		}
	}
	res, err := run(in, s)
	if err != nil {
		return nil, err
	}
	printWarnings(stderr, res.InputWarnings)
	printProblems(stderr, res.Warnings)
	f.tell(stderr, in.Files, res)
	return res, nil
}

// readFlags are how a command that reads manifests reads them, and how much it says
// of what it read.
type readFlags struct {
	strict, quiet, verbose bool
}

func (f *readFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.strict, "strict", false, "make unknown fields and kinds near a known one errors, not warnings")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "say nothing of what was read, even when it holds no Service (warnings still print)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "say what was read from each input, and in all")
}

// tell says on stderr what was read from the manifests (paths, as -f names them):
// the objects of each kind read and passed over, the Pods made from workloads and
// the Nodes made, in all, and with -v for each input first. Without -v it says so
// only when no Service was read (the rules would be empty) or when Pods were made
// from workloads (the endpoints are svcgen's making); with -q never.
func (f *readFlags) tell(stderr io.Writer, paths []string, res *pipeline.Result) {
	read := res.Read
	if f.quiet || read == nil {
		return
	}
	if f.verbose {
		for _, input := range read.Inputs() {
			fmt.Fprintf(stderr, "%s: %s\n", input, orNothing(read.Line(input)))
		}
	}
	var made map[string]int
	nodesMade := 0
	if res.Resolved != nil {
		made = res.Resolved.Made
		for _, n := range res.Resolved.Cluster.Nodes {
			if n.Made {
				nodesMade++
			}
		}
	}
	switch {
	case read.Read("Service") == 0:
		names := make([]string, len(paths))
		for i, p := range paths {
			names[i] = textutil.Quote(inputName(p))
		}
		fmt.Fprintf(stderr, "read no Service from %s (%s)\n", strings.Join(names, ", "), orNothing(read.Summary(made, nodesMade)))
	case f.verbose || len(made) > 0:
		fmt.Fprintln(stderr, read.Summary(made, nodesMade))
	}
}

// orNothing is a Tally's line, or what says there was nothing to count.
func orNothing(line string) string {
	if line == "" {
		return "no object at all"
	}
	return line
}

// manifestReader is how manifests are read, from SVCGEN_YAML: "reference" reads
// them with yaml.v3 alone, the reference the fast readers are held to, for triage
// when svcgen reads a manifest otherwise than expected; unset (or "fast"), the fast
// readers read what they can.
func manifestReader(env string) (load.Reader, error) {
	switch env {
	case "", "fast":
		return load.Fast, nil
	case string(load.Reference):
		return load.Reference, nil
	}
	return "", usagef("SVCGEN_YAML=%q: unknown reader (want reference, or fast, the default)", env)
}

// stdinTaken is the check of a command one of whose own arguments reads stdin
// already (taken): then no input can be "-".
func stdinTaken(taken bool) inputCheck {
	return func(in pipeline.Inputs) error {
		if taken && in.UsesStdin() {
			return errStdinTwice()
		}
		return nil
	}
}

// stdinOnce checks that at most one of paths, the files a command line names, is
// stdin ("-").
func stdinOnce(paths ...string) error {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	if n > 1 {
		return errStdinTwice()
	}
	return nil
}

func errStdinTwice() error { return usagef("stdin (-) can be read only once") }

// inputName is what messages call a file named on the command line: its path, or
// "<stdin>" for "-".
func inputName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}

// readInput reads a file named on the command line, or stdin for "-". name is what
// messages call it (inputName); an error names it as the loader names inputs.
func readInput(path string, stdin io.Reader) (name string, data []byte, err error) {
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	name = inputName(path)
	if err != nil {
		err = load.PathError(name, err)
	}
	return name, data, err
}

// parseInput parses a file named on the command line, or stdin for "-", as it is
// read: a large ruleset is not held twice, as bytes and parsed.
func parseInput[T any](path string, stdin io.Reader, parse func(name string, r io.Reader) (T, error)) (T, error) {
	if path == "-" {
		return parse(inputName(path), stdin)
	}
	fh, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, load.PathError(path, err)
	}
	defer fh.Close()
	return parse(path, fh)
}
