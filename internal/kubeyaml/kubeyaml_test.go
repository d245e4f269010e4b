package kubeyaml_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/kubeyaml"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/model"
)

// TestRoundTrip writes resolved clusters (random ones and every golden input) and
// reads them back with svcgen's own loader: the objects must come back equal, field
// by field, and resolving them again must change nothing (every ClusterIP, NodePort
// and endpoint is in the text).
func TestRoundTrip(t *testing.T) {
	inputs := map[string][]string{}
	dir := t.TempDir()
	for seed := uint64(1); seed <= 60; seed++ {
		path := filepath.Join(dir, fmt.Sprintf("random-%d.yaml", seed))
		data := randcluster.Generate(seed, randcluster.Options{IPv6: seed%3 == 0, NFAcct: seed%2 == 0})
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs[path] = []string{path}
	}
	golden, _ := filepath.Glob("../../golden/*/input.yaml")
	for _, g := range golden {
		inputs[g] = []string{g}
	}
	checked := 0
	for name, files := range inputs {
		orig, err := resolve(pipeline.Inputs{Files: files})
		if err != nil {
			continue // an input svcgen refuses (upstream's deliberately bad objects)
		}
		var buf bytes.Buffer
		if err := kubeyaml.Write(&buf, orig); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := resolve(pipeline.Inputs{Files: []string{"-"}, Stdin: bytes.NewReader(buf.Bytes())})
		if err != nil {
			t.Errorf("%s: svcgen cannot read what kubeyaml wrote: %v\n%s", name, err, buf.String())
			continue
		}
		if diff := compareClusters(orig, back); diff != "" {
			t.Errorf("%s: the cluster read back differs:\n%s", name, diff)
		}
		var again bytes.Buffer
		if err := kubeyaml.Write(&again, back); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), again.Bytes()) {
			t.Errorf("%s: writing the cluster read back gives other bytes", name)
		}
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d inputs round-tripped; expected the 60 random clusters and most golden inputs", checked)
	}
}

func resolve(in pipeline.Inputs) (*model.Cluster, error) {
	l, err := pipeline.Load(in)
	if err != nil {
		return nil, err
	}
	r, err := compiler.Resolve(&l.Cluster, compiler.ResolveOptions{NodePortRange: compiler.PortRange{Min: 1, Max: 65535}})
	if err != nil {
		return nil, err
	}
	return r.Cluster, nil
}

// compareClusters compares the kinds kubeyaml writes, without what only says where
// an object came from (Origin, Generated) and with the Services' ipFamilies as the
// API server fills them in.
func compareClusters(a, b *model.Cluster) string {
	var out []string
	cmp := func(kind string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			wrote, _ := json.Marshal(x)
			read, _ := json.Marshal(y)
			out = append(out, fmt.Sprintf("%s:\n  wrote %s\n  read  %s", kind, wrote, read))
		}
	}
	for i := range max(len(a.Services), len(b.Services)) {
		cmp("Service", serviceAt(a, i), serviceAt(b, i))
	}
	for i := range max(len(a.Slices), len(b.Slices)) {
		cmp("EndpointSlice", sliceAt(a, i), sliceAt(b, i))
	}
	for i := range max(len(a.Nodes), len(b.Nodes)) {
		cmp("Node", nodeAt(a, i), nodeAt(b, i))
	}
	for i := range max(len(a.ServiceCIDRs), len(b.ServiceCIDRs)) {
		cmp("ServiceCIDR", cidrAt(a, i), cidrAt(b, i))
	}
	return strings.Join(out, "\n")
}

func serviceAt(c *model.Cluster, i int) *model.Service {
	if i >= len(c.Services) {
		return nil
	}
	s := *c.Services[i]
	s.Origin = model.Origin{}
	if len(s.IPFamilies) == 0 {
		for _, ip := range s.ClusterIPs {
			s.IPFamilies = append(s.IPFamilies, model.FamilyOf(ip))
		}
	}
	return &s
}

// sliceAt is the i-th slice by namespace and name: Resolve appends the slices it
// makes after those of the input, and read back they are the input's, in the
// writer's order.
func sliceAt(c *model.Cluster, i int) *model.EndpointSlice {
	if i >= len(c.Slices) {
		return nil
	}
	sorted := slices.Clone(c.Slices)
	slices.SortStableFunc(sorted, func(x, y *model.EndpointSlice) int { return strings.Compare(key(x), key(y)) })
	s := *sorted[i]
	s.Origin, s.Generated = model.Origin{}, ""
	if len(s.Endpoints) == 0 {
		s.Endpoints = nil // "endpoints: []" reads back as an empty list
	}
	return &s
}

func key(s *model.EndpointSlice) string { return s.Namespace + "/" + s.Name }

func nodeAt(c *model.Cluster, i int) *model.Node {
	if i >= len(c.Nodes) {
		return nil
	}
	n := *c.Nodes[i]
	n.Origin = model.Origin{}
	return &n
}

func cidrAt(c *model.Cluster, i int) *model.ServiceCIDR {
	if i >= len(c.ServiceCIDRs) {
		return nil
	}
	sc := *c.ServiceCIDRs[i]
	sc.Origin = model.Origin{}
	return &sc
}
