package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
)

// The README shows real output: every "```text" block that starts with "$ svcgen ..."
// must be what that command prints today.
func TestREADMEOutput(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
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
			t.Errorf("README.md shows other output for %s than it prints:\n%s", cmdLine,
				diff.Diff("README.md", []byte(want), "svcgen", stdout.Bytes()))
		}
	}
	if blocks == 0 {
		t.Error("README.md shows no command output")
	}
}
