package randcluster

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/load"
)

// Every seed is valid input, and the same seed gives the same bytes.
func TestGenerate(t *testing.T) {
	kinds := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		data := Generate(seed, Options{})
		if !bytes.Equal(data, Generate(seed, Options{})) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		l := &load.Loader{}
		l.Bytes("random.yaml", data)
		if err := l.Errors.Err(); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, data)
		}
		res, err := pipeline.Compile(&l.Cluster, l.Warnings.List(), false, pipeline.Settings{})
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, data)
		}
		for _, s := range res.Map.Services {
			for _, p := range s.Ports {
				switch {
				case p.InternalPolicyLocal:
					kinds["internal local"] = true
				case p.ExternalPolicyLocal:
					kinds["external local"] = true
				}
				if len(p.SourceRanges) > 0 {
					kinds["source ranges"] = true
				}
				if p.AffinitySeconds > 0 {
					kinds["affinity"] = true
				}
				if !p.HasEndpoints {
					kinds["no endpoints"] = true
				}
				for _, e := range p.ReachableEndpoints() {
					if e.Terminating {
						kinds["terminating fallback"] = true
					}
				}
			}
		}
	}
	for _, k := range []string{"internal local", "external local", "source ranges", "affinity", "no endpoints", "terminating fallback"} {
		if !kinds[k] {
			t.Errorf("200 seeds never made a port with %s", k)
		}
	}
}
