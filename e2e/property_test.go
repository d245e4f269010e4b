package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/emit/iptables"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/load"
	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
)

// kernelClusters is how many random clusters TestPropertyKernel loads: 24, or
// $SVCGEN_PROPERTY_CLUSTERS. Seeds are 1..n.
func kernelClusters() int {
	if n, err := strconv.Atoi(os.Getenv("SVCGEN_PROPERTY_CLUSTERS")); err == nil && n > 0 {
		return n
	}
	return 24
}

// nfacctCounters are the counters kube-proxy's rules name when nfacct is available.
var nfacctCounters = []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"}

// TestPropertyKernel loads random clusters' rules (every fourth one IPv6, through
// ip6tables) into a network namespace with both iptables backends: the kernel must accept every ruleset, and the rules it holds,
// read back with iptables-save, must trace to what the service map says for every
// probe (svcgen verify over the kernel's own text). No traffic is sent.
func TestPropertyKernel(t *testing.T) {
	l := newLab(t)
	ns := l.ns("prop")
	nfacct := false
	if _, err := exec.LookPath("nfacct"); err == nil {
		for _, c := range nfacctCounters {
			l.in(ns, "nfacct", "add", c)
		}
		nfacct = true
	} else if os.Getenv("CI") == "true" {
		t.Fatalf("nfacct is not installed (test.sh installs it): %v", err)
	}
	n := kernelClusters()
	probes := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		ipv6 := seed%4 == 0
		data := randcluster.Generate(seed, randcluster.Options{NFAcct: nfacct && seed%2 == 0, IPv6: ipv6})
		ld := &load.Loader{}
		ld.Bytes("random.yaml", data)
		res, err := pipeline.Compile(&ld.Cluster, nil, false, pipeline.Settings{})
		if err != nil || ld.Errors.Err() != nil {
			t.Fatalf("seed %d: %v %v", seed, err, ld.Errors.Err())
		}
		var rules strings.Builder
		if err := iptables.Write(&rules, res.Map, iptables.Options{}); err != nil {
			t.Fatal(err)
		}
		backends := []string{"iptables", "iptables-legacy"}
		if ipv6 {
			backends = []string{"ip6tables", "ip6tables-legacy"}
		}
		for _, backend := range backends {
			if err := l.feed(ns, []byte(rules.String()), backend+"-restore"); err != nil {
				t.Errorf("seed %d: the kernel refused the rules (%s): %v", seed, backend, err)
				continue
			}
			saved := l.in(ns, backend+"-save")
			rs, err := iptables.ParseBytes(backend+"-save", []byte(saved))
			if err != nil {
				t.Fatalf("seed %d: reading %s-save: %v", seed, backend, err)
			}
			tr, err := trace.NewIPTables(rs, verify.HostOf(res.Map))
			if err != nil {
				t.Fatalf("seed %d: tracing %s-save: %v", seed, backend, err)
			}
			mr := verify.CheckTracer(compiler.IPTables, res.Map, res.Resolved.Cluster, tr)
			probes += mr.Probes
			for _, d := range mr.Disagreements {
				t.Errorf("seed %d, %s-save: %s", seed, backend, d)
			}
		}
	}
	t.Logf("%d random clusters loaded with both iptables backends, %d probes traced through the kernel's rules", n, probes)
}
