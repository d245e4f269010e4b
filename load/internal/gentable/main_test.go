package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
)

// load/apitable.go is what gentable writes from the OpenAPI of the releases the
// oracle modules download, when they are in the module cache.
func TestTableIsGenerated(t *testing.T) {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod")
	}
	specs, _ := filepath.Glob(filepath.Join(cache, "k8s.io", "kubernetes@v1.3[4-7].*", "api", "openapi-spec", "swagger.json"))
	if len(specs) == 0 {
		t.Skip("no Kubernetes release in the module cache: build the oracle modules (conformance/) first")
	}
	want, err := generate(specs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../apitable.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("load/apitable.go is not what gentable writes (go generate ./load):\n%s", diff.Diff("apitable.go", got, "gentable", want))
	}
}
