package nft

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/load"
	"sigs.k8s.io/knftables"
)

// Rules written directly are byte for byte what knftables writes for them, and an
// invalid object still stops the output with knftables' error.
func TestPlainRulesAsKnftables(t *testing.T) {
	var m bytes.Buffer
	if err := gen.Write(&m, gen.Options{Services: 300, Endpoints: 3}); err != nil {
		t.Fatal(err)
	}
	l := &load.Loader{}
	l.Bytes("gen.yaml", m.Bytes())
	res, err := pipeline.Compile(&l.Cluster, nil, false, pipeline.Settings{Mode: compiler.NFTables})
	if err != nil {
		t.Fatal(err)
	}
	st := Build(res.Map)
	ops := append(replaceTable(st), adds(st.Objects())...)
	comment := "a \"quoted\" comment"
	ops = append(ops, Op{"add", &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.1 drop", Comment: &comment}})
	var direct, viaKnftables bytes.Buffer
	if err := writeOpsWith(&direct, st.Family, ops, true); err != nil {
		t.Fatal(err)
	}
	if err := writeOpsWith(&viaKnftables, st.Family, ops, false); err != nil {
		t.Fatal(err)
	}
	if direct.Len() < 100000 || !bytes.Equal(direct.Bytes(), viaKnftables.Bytes()) {
		t.Errorf("direct rules differ from knftables' text (%d and %d bytes)", direct.Len(), viaKnftables.Len())
	}
	bad := append(ops, Op{"add", &knftables.Rule{Chain: "services"}})
	for _, d := range []bool{true, false} {
		if err := writeOpsWith(&bytes.Buffer{}, st.Family, bad, d); err == nil || err.Error() != "nftables: no rule specified" {
			t.Errorf("direct=%v: error %v", d, err)
		}
	}
}
