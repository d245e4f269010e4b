package conformance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	svcrelease "github.com/svcgen/svcgen/release"
)

var (
	requireKubernetes = regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v1\.(\d+)\.(\d+))$`)
	replaceLine       = regexp.MustCompile(`(?m)^\s+(k8s\.io/[a-z0-9-]+) => (\S+)(?: (\S+))?$`)
)

// TestReleaseModules checks each conformance/vX.Y module against the release it
// names: it requires k8s.io/kubernetes vX.Y.Z, replaces every staging module of that
// release's replace block (and only those) with the same module at v0.Y.Z, and its
// program reports that version. The modules are exactly the releases of svcgen's
// release table, each at its Module version. The upstream go.mod comes from the
// module cache or the module proxy (go mod download).
func TestReleaseModules(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	table := map[string]string{} // "v1.37" -> the k8s.io/kubernetes version
	for _, r := range svcrelease.All() {
		table["v"+r.String()] = r.Module
	}
	defer func() {
		if t.Skipped() {
			return
		}
		for dir := range table {
			t.Errorf("release %s has no oracle module conformance/%s (see docs/oracle.md)", strings.TrimPrefix(dir, "v"), dir)
		}
	}()
	mods, _ := filepath.Glob("v*/go.mod")
	for _, mod := range mods {
		dir := filepath.Dir(mod)
		data, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		module, ok := table[dir]
		delete(table, dir)
		m := requireKubernetes.FindStringSubmatch(string(data))
		if m == nil {
			t.Errorf("%s: no require k8s.io/kubernetes", mod)
			continue
		}
		version, minor, patch := m[1], m[2], m[3]
		if !ok {
			t.Errorf("conformance/%s: svcgen's release table (release/) has no release %s", dir, strings.TrimPrefix(dir, "v"))
		} else if version != module {
			t.Errorf("%s requires k8s.io/kubernetes %s; the release table's Module is %s", mod, version, module)
		}
		if dir != "v1."+minor {
			t.Errorf("%s requires k8s.io/kubernetes %s", mod, version)
		}
		out, err := exec.Command(goBin, "mod", "download", "-json", "k8s.io/kubernetes@"+version).Output()
		if err != nil {
			t.Skipf("go mod download k8s.io/kubernetes@%s: %v", version, err)
		}
		var info struct{ GoMod string }
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatal(err)
		}
		upstream, err := os.ReadFile(info.GoMod)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range replaceLine.FindAllStringSubmatch(string(upstream), -1) {
			if strings.HasPrefix(r[2], "./staging/") {
				want = append(want, r[1])
			}
		}
		var got []string
		for _, r := range replaceLine.FindAllStringSubmatch(string(data), -1) {
			got = append(got, r[1])
			if r[2] != r[1] || r[3] != "v0."+minor+"."+patch {
				t.Errorf("%s: replace %s => %s %s, want %s v0.%s.%s", mod, r[1], r[2], r[3], r[1], minor, patch)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s replaces %v; k8s.io/kubernetes %s's staging modules are %v", mod, got, version, want)
		}
		main, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil || !strings.Contains(string(main), `return "`+version+`"`) {
			t.Errorf("%s/main.go does not report %s as its Version", dir, version)
		}
	}
}
