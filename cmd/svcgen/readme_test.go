package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
)

// The README and docs/ show real output: every "```text" block that starts with
// "$ svcgen ..." must be what that command prints today.
func TestREADMEOutput(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, path := range append([]string{"../../README.md"}, docs...) {
		t.Run(filepath.Base(path), func(t *testing.T) { checkOutputBlocks(t, path) })
	}
}

func checkOutputBlocks(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, part := range strings.Split(string(data), "```text\n")[1:] {
		block, _, ok := strings.Cut(part, "```\n")
		cmdLine, want, _ := strings.Cut(block, "\n")
		if !ok || !strings.HasPrefix(cmdLine, "$ svcgen ") {
			continue
		}
		blocks++
		args := strings.Fields(strings.TrimPrefix(cmdLine, "$ svcgen "))
		for i, a := range args {
			if a == "examples/" {
				args[i] = "../../examples/"
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Errorf("%s: exit %d: %s", cmdLine, code, stderr.String())
			continue
		}
		if stdout.String() != want {
			t.Errorf("%s shows other output for %s than it prints:\n%s", path, cmdLine,
				diff.Diff(path, []byte(want), "svcgen", stdout.Bytes()))
		}
	}
	if blocks == 0 && strings.HasSuffix(path, "README.md") {
		t.Error("README.md shows no command output")
	}
}
