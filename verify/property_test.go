package verify

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
)

var clusters = flag.Int("clusters", 0, "random clusters for the property test (default 60, or $SVCGEN_PROPERTY_CLUSTERS)")

// PropertyClusters is how many random clusters a property test runs: -clusters, else
// $SVCGEN_PROPERTY_CLUSTERS, else def. Seeds are 1..n, so a failure names its seed.
func propertyClusters(def int) int {
	if *clusters > 0 {
		return *clusters
	}
	if n, err := strconv.Atoi(os.Getenv("SVCGEN_PROPERTY_CLUSTERS")); err == nil && n > 0 {
		return n
	}
	return def
}

// Random clusters (every fourth one IPv6) compiled in every mode verify clean: every
// probe's trace through the rules reaches what the service map says.
func TestPropertyRandomClusters(t *testing.T) {
	n := propertyClusters(60)
	probes := 0
	for seed := uint64(1); seed <= uint64(n); seed++ {
		data := randcluster.Generate(seed, randcluster.Options{NFAcct: seed%2 == 0, IPv6: seed%4 == 0})
		res := testkit.Compile(t, fmt.Sprintf("random-%d.yaml", seed), string(data), pipeline.Settings{}) // the name says the seed
		r, err := Run(res.Resolved.Cluster, Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, m := range r.Modes {
			probes += m.Probes
		}
		if !r.OK() {
			var b strings.Builder
			r.Write(&b)
			t.Errorf("seed %d (go test ./verify -run Property -clusters %d shows it; the cluster is randcluster.Generate(%d)):\n%s", seed, seed, seed, b.String())
		}
	}
	t.Logf("%d random clusters, %d probes", n, probes)
}
