package nft

import (
	"bytes"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// knftablesText writes operations through knftables alone, as the reference text.
func knftablesText(t *testing.T, family knftables.Family, ops []Op) string {
	t.Helper()
	tx := knftables.NewFake(family, tableName).NewTransaction()
	for _, o := range ops {
		switch o.Verb {
		case "add":
			tx.Add(o.Obj)
		case "flush":
			tx.Flush(o.Obj)
		case "delete":
			tx.Delete(o.Obj)
		}
	}
	return tx.String()
}

func generatedMap(t *testing.T, o gen.Options) *ir.ServiceMap {
	t.Helper()
	var m bytes.Buffer
	if err := gen.Write(&m, o); err != nil {
		t.Fatal(err)
	}
	return testkit.Compile(t, "gen.yaml", m.String(), pipeline.Settings{Mode: compiler.NFTables}).Map
}

// The streamed script is byte for byte what knftables writes for the table Build
// makes: the lines the writer writes itself (regular chains, rules, elements) and the
// order in which the table writes them.
func TestScriptAsKnftables(t *testing.T) {
	for _, sm := range []*ir.ServiceMap{
		compileFiles(t, "../../examples"),
		generatedMap(t, gen.Options{Services: 300, Endpoints: 3}),
		generatedMap(t, gen.Options{Services: 60, Endpoints: 12, Nodes: 5, Seed: 7}),
	} {
		st := Build(sm)
		want := knftablesText(t, st.Family, append(replaceTable(st.Table), adds(st.Objects())...))
		if got := string(write(t, sm, Options{})); got != want {
			t.Errorf("the script (%d bytes) is not knftables' text of the table (%d bytes)", len(got), len(want))
		}
		if got, want := newTable(sm).objects(), len(st.Objects()); got != want {
			t.Errorf("the table counts %d objects, Build makes %d", got, want)
		}
		var dumped bytes.Buffer
		if err := WriteState(&dumped, st); err != nil {
			t.Fatal(err)
		}
		if want := knftablesText(t, st.Family, adds(st.Objects())); dumped.String() != want {
			t.Errorf("WriteState is not knftables' text")
		}
	}
}

// Objects that are not plain go through knftables, which writes them or refuses them
// with its own error; a plain object with a quoted comment is written as knftables
// quotes it.
func TestLineWriterAsKnftables(t *testing.T) {
	comment := "a \"quoted\" comment\\"
	ops := []Op{
		{"add", &knftables.Chain{Name: "services"}},
		{"add", &knftables.Chain{Name: "helper", Comment: &comment}},
		{"flush", &knftables.Chain{Name: "services"}},
		{"add", &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.1 drop", Comment: &comment}},
		{"add", &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.2 drop", Index: knftables.PtrTo(0)}},
		{"add", &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.3 drop", Comment: knftables.PtrTo("")}},
		{"add", &knftables.Element{Set: "cluster-ips", Key: []string{"198.18.0.1"}, Comment: &comment}},
		{"add", &knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1", "tcp", "80"}, Value: []string{"goto services"}}},
		{"delete", &knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1", "tcp", "80"}}},
		{"add", &knftables.Set{Name: "s", Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.DynamicFlag}}},
	}
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		var b bytes.Buffer
		lw := newLineWriter(&b, family)
		writeOps(lw, ops)
		if err := lw.flush(); err != nil {
			t.Fatal(err)
		}
		if want := knftablesText(t, family, ops); b.String() != want {
			t.Errorf("%s: got\n%s\nwant\n%s", family, b.String(), want)
		}
	}
	for _, bad := range []knftables.Object{
		&knftables.Rule{Chain: "services"},
		&knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1"}},
		&knftables.Chain{},
	} {
		var b bytes.Buffer
		lw := newLineWriter(&b, knftables.IPv4Family)
		lw.op("add", &knftables.Chain{Name: "services"})
		lw.op("add", bad)
		lw.op("add", &knftables.Chain{Name: "after"})
		want := knftablesText(t, knftables.IPv4Family, []Op{{"add", bad}})
		if err := lw.flush(); err == nil || "# ERROR: "+err.Error() != "# ERROR: nftables: "+want[len("# ERROR: "):] {
			t.Errorf("%#v: error %v, want knftables' %q", bad, err, want)
		}
	}
}

// The chain and rule lines the parser reads itself come out as knftables' parser
// reads them; the others are left to knftables.
func TestPlainAddAsKnftables(t *testing.T) {
	const head = "add table ip kube-proxy\nadd chain ip kube-proxy services\nadd chain ip kube-proxy reject-chain\n"
	for _, tc := range []struct {
		line  string
		plain bool
	}{
		{`add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80`, true},
		{`add chain ip kube-proxy x { comment "c" ; }`, false},
		{`add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.1 reject comment "Reject traffic to invalid ports"`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.2 drop comment "a \"quoted\" word"`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.3 drop comment ""`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.4 goto reject-chain`, true},
		{`add rule ip kube-proxy services index 0 ip daddr 198.18.0.5 drop`, false},
		{`add rule ip kube-proxy services handle 3 ip daddr 198.18.0.6 drop`, false},
		{`add chain ip kube-proxy add`, true},
		{`add rule ip kube-proxy add ip daddr 198.18.0.7 drop`, true},
	} {
		var via bool
		script := head + tc.line + "\n"
		ref := knftables.NewFake(knftables.IPv4Family, tableName)
		refErr := ref.ParseDump(script)
		f := strings.Fields(tc.line)
		obj := plainAdd(f[1], strings.TrimPrefix(tc.line, strings.Join(f[:4], " ")+" "))
		if via = obj != nil; via != tc.plain {
			t.Errorf("%s: read here %v, want %v", tc.line, via, tc.plain)
		}
		rs, err := ParseBytes("script", []byte(script))
		if (err != nil) != (refErr != nil) {
			t.Errorf("%s: error %v, knftables' %v", tc.line, err, refErr)
			continue
		}
		if err != nil {
			continue
		}
		var got bytes.Buffer
		if err := WriteState(&got, rs.Tables[knftables.IPv4Family]); err != nil {
			t.Fatal(err)
		}
		if want := fromFake(knftables.IPv4Family, ref.Table); got.String() != knftablesText(t, knftables.IPv4Family, adds(want.Objects())) {
			t.Errorf("%s: read as\n%s\nknftables reads\n%s", tc.line, got.String(), knftablesText(t, knftables.IPv4Family, adds(want.Objects())))
		}
	}
}

// Rules kept beside the Fake give the table, and the errors, that the Fake gives.
func TestRulesBesideTheFake(t *testing.T) {
	sm := compileFiles(t, "../../examples")
	whole := write(t, sm, Options{})
	prev, err := ParseBytes("before", whole)
	if err != nil {
		t.Fatal(err)
	}
	moved := compileFiles(t, editExamples(t, [2]string{"198.18.2.12", "198.18.2.13"}))
	big := write(t, generatedMap(t, gen.Options{Services: 300, Endpoints: 3}), Options{})
	const head = "add table ip kube-proxy\nadd chain ip kube-proxy a\nadd chain ip kube-proxy b\nadd set ip kube-proxy s { type ipv4_addr ; }\n"
	for name, script := range map[string]string{
		"whole":            string(whole),
		"staged":           string(write(t, sm, Options{Stages: true})),
		"partial":          string(whole) + string(write(t, moved, Options{Previous: prev})),
		"generated":        string(big),
		"flushed":          head + "add rule ip kube-proxy a jump b\nflush chain ip kube-proxy a\nadd rule ip kube-proxy a ip saddr @s drop\n",
		"deleted":          head + "add rule ip kube-proxy b drop\ndelete chain ip kube-proxy b\nadd chain ip kube-proxy b\n",
		"table flushed":    head + "add rule ip kube-proxy a drop\nflush table ip kube-proxy\nadd chain ip kube-proxy a\n",
		"forward chain":    head + "add rule ip kube-proxy a goto c\nadd chain ip kube-proxy c\n",
		"no such set":      head + "add rule ip kube-proxy a ip saddr @t drop\n",
		"no such map":      head + "add rule ip kube-proxy a ip daddr vmap @s\n",
		"no such chain":    head + "add rule ip kube-proxy c drop\n",
		"deleted, then":    head + "delete chain ip kube-proxy b\nadd rule ip kube-proxy a jump b\n",
		"index (fallback)": head + "add rule ip kube-proxy a drop\nadd rule ip kube-proxy a index 0 accept\n",
	} {
		beside, errBeside := parseScript(script)
		viaFake, errFake := parseScriptWith(script, false)
		wantErr := strings.HasPrefix(name, "no such") || name == "forward chain" || name == "deleted, then"
		if (errBeside != nil) != wantErr || (errFake != nil) != wantErr {
			t.Errorf("%s: error %v, through the Fake %v; want an error: %v", name, errBeside, errFake, wantErr)
			continue
		}
		if errFake != nil {
			continue
		}
		for family, st := range viaFake.Tables {
			var got, want bytes.Buffer
			if err := WriteState(&got, beside.Tables[family]); err != nil {
				t.Fatal(err)
			}
			if err := WriteState(&want, st); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%s: read as\n%s\nthrough the Fake\n%s", name, got.String(), want.String())
			}
		}
	}
}
