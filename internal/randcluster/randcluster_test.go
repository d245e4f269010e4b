package randcluster

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
)

// Every seed is valid input, and the same seed gives the same bytes.
func TestGenerate(t *testing.T) {
	kinds := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		o := Options{IPv6: seed%3 == 0, Dual: seed%5 == 0, DualHost: seed%7 == 0}
		data := Generate(seed, o)
		if !bytes.Equal(data, Generate(seed, o)) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		l := &load.Loader{}
		l.Bytes("random.yaml", data)
		if err := l.Err(); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, data)
		}
		res, err := pipeline.Compile(&l.Cluster, l.Warnings.List(), false, pipeline.Settings{})
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, data)
		}
		switch {
		case o.Dual:
			dualStackKinds(t, seed, o, res.Maps, kinds)
		case o.DualHost:
			dualHost(t, seed, o, res.Maps)
			kinds["dual host"] = true
		case len(res.Maps) != 1 || o.IPv6 != (res.Map.Family == "IPv6"):
			t.Fatalf("seed %d: compiled for %s", seed, ir.FamilyNames(res.Maps))
		}
		for _, s := range res.Map.Services {
			kinds[string(res.Map.Family)] = true
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
	for _, k := range []string{"IPv4", "IPv6", "internal local", "external local", "source ranges", "affinity", "no endpoints", "terminating fallback",
		"dual-stack IPv4 primary", "dual-stack IPv6 primary", "dual-stack Service", "IPv4 only", "IPv6 only", "dual host"} {
		if !kinds[k] {
			t.Errorf("200 seeds never made a port with %s", k)
		}
	}
}

// dualStackKinds checks that a dual-stack cluster compiles for both families and
// notes what its Services are: in both maps, or in one family's only.
func dualStackKinds(t *testing.T, seed uint64, o Options, maps []*ir.ServiceMap, kinds map[string]bool) {
	t.Helper()
	if len(maps) != 2 || maps[0].Family != "IPv4" || maps[1].Family != "IPv6" {
		t.Fatalf("seed %d: a dual-stack cluster compiled for %s", seed, ir.FamilyNames(maps))
	}
	primary := map[bool]string{false: "IPv4", true: "IPv6"}[o.IPv6]
	kinds["dual-stack "+primary+" primary"] = true
	for i, sm := range maps {
		for _, s := range sm.Services {
			if maps[1-i].Service(s.Key()) != nil {
				kinds["dual-stack Service"] = true
			} else {
				kinds[string(sm.Family)+" only"] = true
			}
		}
	}
}

// dualHost checks a cluster of one family on a dual-stack host: both families
// compiled, the other family's map without a Service and with the loopback address
// as its node IP, as kube-proxy's detectNodeIPs gives it.
func dualHost(t *testing.T, seed uint64, o Options, maps []*ir.ServiceMap) {
	t.Helper()
	if len(maps) != 2 {
		t.Fatalf("seed %d: a dual-stack host compiled for %s, want both families", seed, ir.FamilyNames(maps))
	}
	other := maps[1]
	if o.IPv6 {
		other = maps[0]
	}
	if len(other.Services) != 0 || !other.Node.IP.IsLoopback() {
		t.Fatalf("seed %d: the cluster's other family (%s) has %d Services and node IP %s, want none and loopback",
			seed, other.Family, len(other.Services), other.Node.IP)
	}
}
