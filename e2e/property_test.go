package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
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

// TestPropertyKernel loads random clusters' rules (every fourth one IPv6, through
// ip6tables) into network namespaces: iptables mode with both iptables backends,
// nftables mode with nft -f, and ipvs mode's sets and companion chains (the kernel here has no IPVS; the virtual
// servers come from svcgen's own ipvsadm rules). The kernel must accept every ruleset,
// and the rules it holds, read back with iptables-save, nft list ruleset and ipset save,
// must trace to what the service map says for every probe (svcgen verify over the
// kernel's own text). No traffic is sent.
func TestPropertyKernel(t *testing.T) {
	l := netlab.New(t)
	ns, nftns, vsns := l.NS("prop"), l.NS("propnft"), l.NS("propvs")
	l.Counters(ns, iptrules.Counters...)
	n := kernelClusters()
	probes, ipvsLoaded := 0, 0
	// KUBE-IPVS-OUT-FILTER's "-m ipvs" needs the kernel's xt_ipvs, which a kernel
	// without IPVS lacks; clusters that need it skip the ipvs part there.
	xtIPVS := l.Feed(vsns, []byte("*filter\n:svcgen-probe - [0:0]\n-A svcgen-probe -m ipvs --vaddr 198.18.0.1/32 -j DROP\nCOMMIT\n"), "iptables-restore", "--noflush") == nil
	for seed := uint64(1); seed <= uint64(n); seed++ {
		ipv6 := seed%4 == 0
		data := randcluster.Generate(seed, randcluster.Options{NFAcct: seed%2 == 0, IPv6: ipv6})
		res := testkit.Compile(t, fmt.Sprintf("random-%d.yaml", seed), string(data), pipeline.Settings{}) // the name says the seed
		var rules strings.Builder
		if err := iptrules.Write(&rules, res.Map, iptrules.Options{}); err != nil {
			t.Fatal(err)
		}
		backends := []string{"iptables", "iptables-legacy"}
		if ipv6 {
			backends = []string{"ip6tables", "ip6tables-legacy"}
		}
		for _, backend := range backends {
			if err := l.Feed(ns, []byte(rules.String()), backend+"-restore"); err != nil {
				t.Errorf("seed %d: the kernel refused the rules (%s): %v", seed, backend, err)
				continue
			}
			saved := l.In(ns, backend+"-save")
			rs, err := iptsyntax.ParseBytes(backend+"-save", []byte(saved))
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
		probes += kernelNFT(t, l, nftns, seed, res)
		if p, ok := kernelIPVS(t, l, vsns, seed, res, xtIPVS); ok {
			probes += p
			ipvsLoaded++
		}
	}
	t.Logf("%d random clusters loaded with both iptables backends and nft, %d of them as ipvs sets and chains too (xt_ipvs here: %v), %d probes traced through the kernel's rules", n, ipvsLoaded, xtIPVS, probes)
}

// kernelNFT loads a cluster's nftables script with nft -f (twice: it must converge),
// lists the ruleset back, and verifies nftables mode over the kernel's listing; it
// returns the probes.
func kernelNFT(t *testing.T, l *netlab.Lab, ns string, seed uint64, res *pipeline.Result) int {
	t.Helper()
	sm, err := compiler.Compile(res.Resolved.Cluster, compiler.Options{Mode: compiler.NFTables})
	if err != nil {
		t.Fatal(err)
	}
	var script bytes.Buffer
	if err := nftrules.Write(&script, sm, nftrules.Options{}); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		if err := l.Feed(ns, script.Bytes(), "nft", "-f", "-"); err != nil {
			t.Fatalf("seed %d: the kernel refused the nftables script (run %d): %v", seed, run, err)
		}
	}
	tr, err := trace.Open([]trace.File{{Name: "nft list ruleset", Data: []byte(l.In(ns, "nft", "list", "ruleset"))}}, verify.HostOf(sm))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	mr := verify.CheckTracer(compiler.NFTables, sm, res.Resolved.Cluster, tr)
	for _, d := range mr.Disagreements {
		t.Errorf("seed %d, nft list ruleset: %s", seed, d)
	}
	return mr.Probes
}

// kernelIPVS loads a cluster's ipvs sets and companion chains into a namespace, reads
// them back, and verifies ipvs mode over the kernel's text; it returns the probes, and
// false when the chains need "-m ipvs" and the kernel lacks it.
func kernelIPVS(t *testing.T, l *netlab.Lab, ns string, seed uint64, res *pipeline.Result, xtIPVS bool) (int, bool) {
	t.Helper()
	sm, err := compiler.Compile(res.Resolved.Cluster, compiler.Options{Mode: compiler.IPVS})
	if err != nil {
		t.Fatal(err)
	}
	n := ipvsrules.Build(sm)
	var sets, payload, rules bytes.Buffer
	if err := ipvssyntax.WriteSets(&sets, n.Sets); err != nil {
		t.Fatal(err)
	}
	if err := ipvssyntax.WritePayload(&payload, n); err != nil {
		t.Fatal(err)
	}
	if err := ipvssyntax.WriteRules(&rules, n.Services); err != nil {
		t.Fatal(err)
	}
	if !xtIPVS && bytes.Contains(payload.Bytes(), []byte(" -m ipvs ")) {
		return 0, false
	}
	ipt := "iptables"
	if sm.Family == model.IPv6 {
		ipt = "ip6tables"
	}
	l.In(ns, "sh", "-c", "ipset destroy "+ipvssyntax.TempSet+" 2>/dev/null || :")
	if err := l.Feed(ns, sets.Bytes(), "ipset", "restore", "-exist"); err != nil {
		t.Fatalf("seed %d: ipset restore: %v", seed, err)
	}
	if err := l.Feed(ns, payload.Bytes(), ipt+"-restore", "--noflush"); err != nil {
		t.Fatalf("seed %d: the kernel refused the ipvs companion chains: %v", seed, err)
	}
	for _, j := range ipvssyntax.Jumps { // as the script ensures them
		if _, err := l.Try(append([]string{"ip", "netns", "exec", ns, ipt, "-t", j.Table, "-C", j.From}, j.Args()...)...); err != nil {
			l.In(ns, append([]string{ipt, "-t", j.Table, "-I", j.From, "1"}, j.Args()...)...)
		}
	}
	tr, err := trace.Open([]trace.File{
		{Name: "iptables-save", Data: []byte(l.In(ns, ipt+"-save"))},
		{Name: "ipset save", Data: []byte(l.In(ns, "ipset", "save"))},
		{Name: "ipvsadm rules", Data: rules.Bytes()},
	}, verify.HostOf(sm))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	mr := verify.CheckTracer(compiler.IPVS, sm, res.Resolved.Cluster, tr)
	for _, d := range mr.Disagreements {
		t.Errorf("seed %d, ipvs from ipset save and %s-save: %s", seed, ipt, d)
	}
	return mr.Probes, true
}
