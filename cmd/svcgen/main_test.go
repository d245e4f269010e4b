package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"svcgen": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line cases in testdata/*.txtar. $EXAMPLES is the
// repository's examples folder and $SEEDS the course-project manifests beside it.
func TestScripts(t *testing.T) {
	examples, _ := filepath.Abs("../../examples")
	seeds, _ := filepath.Abs("../../../shared/seed-systems/examples")
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			env.Setenv("SEEDS", seeds)
			return nil
		},
		// [seeds]: the course-project manifests are beside the repository.
		Condition: func(cond string) (bool, error) {
			if cond != "seeds" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			_, err := os.Stat(seeds)
			return err == nil, nil
		},
	})
}
