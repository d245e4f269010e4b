package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"svcgen": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line cases in testdata/*.txtar. $EXAMPLES is the
// repository's examples folder and $SEEDS the course-project manifests of
// testdata/minik8s.
func TestScripts(t *testing.T) {
	examples, _ := filepath.Abs("../../examples")
	seeds, _ := filepath.Abs("../../testdata/minik8s")
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			env.Setenv("SEEDS", seeds)
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){"exits": exits},
	})
}

// exits is the script command "exits N PROGRAM ARGS...": PROGRAM exits with status N
// (0 included); its stdout and stderr are kept for the checks that follow, as exec
// keeps them.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not a status", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// A --node with a newline (which testscript cannot pass) is a usage error and nothing
// reaches stdout: in ipvs mode the script would otherwise carry it.
func TestNodeWithNewline(t *testing.T) {
	dir := t.TempDir()
	svc := filepath.Join(dir, "svc.yaml")
	if err := os.WriteFile(svc, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 80}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := run([]string{"compile", "-f", svc, "-m", "ipvs", "--node", "a\nb"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage || stdout.Len() != 0 || !strings.Contains(stderr.String(), `--node: "a\nb" has characters that cannot go into rules`) {
		t.Errorf("exit %d, stdout %d bytes, stderr %q", code, stdout.Len(), stderr.String())
	}
}

// Runs at once with one --lock each adding a Service: none loses another's addition
// and no address goes to two Services (before, 10 of 10 pairs lost one, and with a
// small ServiceCIDR 4 of 10 gave one address twice).
func TestLockConcurrentRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := write("base.yaml", "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: small}\nspec: {cidrs: [10.96.0.0/27]}\n")
	lock := filepath.Join(dir, "svcgen.lock")
	const n = 20
	errs := make(chan string, n)
	for i := range n {
		add := write(fmt.Sprintf("add%d.yaml", i), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: s%d, namespace: ns}\nspec: {ports: [{port: 80}]}\n", i))
		go func() {
			var stdout, stderr strings.Builder
			if code := run([]string{"compile", "-f", base, "-f", add, "--lock", lock, "--noflush"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				errs <- stderr.String()
				return
			}
			errs <- ""
		}()
	}
	for range n {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	data, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	l, err := compiler.ParseLock("svcgen.lock", data)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	for i := range n {
		key := fmt.Sprintf("ns/s%d", i)
		e, ok := l.Services[key]
		if !ok {
			t.Errorf("%s is not in the lock", key)
			continue
		}
		if other, dup := seen[e.ClusterIPs[0]]; dup {
			t.Errorf("%s and %s both hold %s", key, other, e.ClusterIPs[0])
		}
		seen[e.ClusterIPs[0]] = key
	}
}

// The help texts state the figures the code uses.
func TestHelpFigures(t *testing.T) {
	var stdout strings.Builder
	run([]string{"apply", "--help"}, strings.NewReader(""), &stdout, io.Discard)
	if want := fmt.Sprintf("blocks of at most %d chains", apply.DefaultMaxChains); !strings.Contains(stdout.String(), want) {
		t.Errorf("apply --help does not say %q", want)
	}
}
