package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// This kernel has no IPVS (e2e/ipvsvm boots one that has), but the ipset and iptables
// parts of the ipvs script load here: the sets with ipset restore, then the companion
// chains with iptables-restore --noflush, which refuses a -m set rule whose set does
// not exist, so the load checks every reference.
func TestIPVSSetsAndChainsLoad(t *testing.T) {
	l := netlab.New(t)
	n := ipvsrules.Build(testkit.CompileFiles(t, pipeline.Settings{}, "../examples").Map)
	var sets, payload bytes.Buffer
	if err := ipvssyntax.WriteSets(&sets, n.Sets); err != nil {
		t.Fatal(err)
	}
	if err := ipvssyntax.WritePayload(&payload, n); err != nil {
		t.Fatal(err)
	}

	bare := l.NS("bare")
	if err := l.Feed(bare, payload.Bytes(), "iptables-restore", "--noflush"); err == nil {
		t.Error("the companion chains loaded where their sets do not exist: -m set references went unchecked")
	}

	node := l.NS("node")
	for run := 1; run <= 2; run++ { // the second run must converge to the same state
		if err := l.Feed(node, sets.Bytes(), "ipset", "restore", "-exist"); err != nil {
			t.Fatalf("run %d: ipset restore: %v", run, err)
		}
		if err := l.Feed(node, payload.Bytes(), "iptables-restore", "-w", "--noflush"); err != nil {
			t.Fatalf("run %d: iptables-restore --noflush: %v", run, err)
		}
	}
	got, err := ipvssyntax.ParseSetsBytes("ipset save", []byte(l.In(node, "ipset", "save")))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(n.Sets) {
		t.Errorf("ipset save lists %d sets, want %d (the scratch set must be gone)", len(got), len(n.Sets))
	}
	for i, s := range got {
		if i < len(n.Sets) && (s.Name != n.Sets[i].Name || strings.Join(s.Entries, " ") != strings.Join(n.Sets[i].Entries, " ")) {
			t.Errorf("set %s holds %q, want %s %q", s.Name, s.Entries, n.Sets[i].Name, n.Sets[i].Entries)
		}
	}
	for _, tbl := range []ipvssyntax.Table{n.NAT, n.Filter} {
		saved := l.In(node, "iptables-save", "-t", tbl.Name)
		for _, c := range tbl.Chains {
			if !strings.Contains(saved, ":"+c+" ") {
				t.Errorf("%s: chain %s missing after the load", tbl.Name, c)
			}
		}
		if got, want := strings.Count(saved, "\n-A KUBE-"), len(tbl.Rules); got != want {
			t.Errorf("%s: %d KUBE rules after two loads, want %d", tbl.Name, got, want)
		}
	}
}

// Sets belong to a network namespace on the kernels svcgen targets (since Linux 3.13):
// a set made in a test namespace is not seen from another.
func TestIPSetsArePerNamespace(t *testing.T) {
	l := netlab.New(t)
	a, b := l.NS("seta"), l.NS("setb")
	name := fmt.Sprintf("svcgen-probe-%d", os.Getpid())
	l.In(a, "ipset", "create", name, "hash:ip")
	if out := l.In(b, "ipset", "list", "-n"); strings.Contains(out, name) {
		t.Errorf("set %s made in %s shows in %s: sets are not per namespace here", name, a, b)
	}
	if out := l.In(a, "ipset", "list", "-n"); !strings.Contains(out, name) {
		t.Errorf("set %s missing in its own namespace", name)
	}
}
