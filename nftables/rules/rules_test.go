package rules

import (
	"bytes"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// compileFiles compiles manifest files and folders for nftables mode, as the
// command does.
func compileFiles(t *testing.T, files ...string) *ir.ServiceMap {
	t.Helper()
	return testkit.CompileFiles(t, pipeline.Settings{Mode: compiler.NFTables}, files...).Map
}

// compileYAML compiles manifests given as text for nftables mode.
func compileYAML(t *testing.T, manifests string) *ir.ServiceMap {
	t.Helper()
	return testkit.Compile(t, "test.yaml", manifests, pipeline.Settings{Mode: compiler.NFTables}).Map
}

func write(t *testing.T, sm *ir.ServiceMap, opts Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, sm, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// dump is a state as knftables' Fake.Dump prints it, sorted as upstream's tests sort
// (set and map elements have no order).
func dump(t *testing.T, st *syntax.State) string {
	t.Helper()
	var b bytes.Buffer
	if err := syntax.WriteState(&b, st); err != nil {
		t.Fatal(err)
	}
	return upstreamtest.SortNFTablesTransaction(b.String())
}

// checkLeaves applies script on top of before (nil: nothing) and checks that it
// leaves exactly sm's table; what names the script in the message.
func checkLeaves(t *testing.T, what string, before, script []byte, sm *ir.ServiceMap) {
	t.Helper()
	if d, w := dump(t, applyScript(t, before, script)), dump(t, Build(sm)); d != w {
		t.Errorf("%s leaves:\n%s\nwant the table it describes:\n%s", what, d, w)
	}
}

// applyScript runs script text through knftables' Fake (which checks that every chain,
// set and map a rule or element names exists, and that deletes find their object) on
// top of an earlier state, and returns the table it leaves.
func applyScript(t *testing.T, before []byte, script []byte) *syntax.State {
	t.Helper()
	rs, err := syntax.ParseBytes("script", append(append([]byte(nil), before...), script...))
	if err != nil {
		t.Fatalf("the script does not apply: %v", err)
	}
	return rs.Tables[knftables.IPv4Family]
}

func TestScriptBuildsItsTable(t *testing.T) {
	sm := compileFiles(t, "../../examples")
	script := write(t, sm, Options{})
	checkLeaves(t, "the script", nil, script, sm)
	// Running it again on top of itself leaves the same table.
	checkLeaves(t, "the script run twice", script, script, sm)
}

func TestStagesBuildTheSameTable(t *testing.T) {
	sm := compileFiles(t, "../../examples")
	staged := write(t, sm, Options{Stages: true})
	if !bytes.HasPrefix(staged, []byte("#!/bin/sh\n")) {
		t.Fatalf("staged output is not a shell script:\n%s", staged)
	}
	if n := bytes.Count(staged, []byte("nft -f - <<'SVCGEN_STAGE_")); n != 5 {
		t.Errorf("%d stages, want 5", n)
	}
	checkLeaves(t, "the staged script", write(t, sm, Options{}), staged, sm)
	// Each stage refers only to objects of earlier stages (knftables' Fake checks every
	// chain, set and map a line names), and only the last one hooks the table in.
	stages := stageBodies(t, staged)
	var loaded []byte
	for i, body := range stages {
		loaded = append(loaded, body...)
		if _, err := syntax.ParseBytes("stages", loaded); err != nil {
			t.Errorf("stages 1 to %d do not apply on their own: %v", i+1, err)
		}
		if hooks := bytes.Contains(body, []byte(" hook ")); hooks != (i == len(stages)-1) {
			t.Errorf("stage %d: adds base chains %v, want only in the last stage", i+1, hooks)
		}
	}
}

// stageBodies returns the nft text of each stage of a staged script.
func stageBodies(t *testing.T, script []byte) [][]byte {
	t.Helper()
	var bodies [][]byte
	for rest := script; ; {
		_, after, ok := bytes.Cut(rest, []byte("nft -f - <<'"))
		if !ok {
			return bodies
		}
		tag, body, _ := bytes.Cut(after, []byte("'\n"))
		// The body ends at a line that is the tag alone (it may be the first line).
		end := bytes.Index(append([]byte("\n"), body...), append(append([]byte("\n"), tag...), '\n'))
		if end < 0 {
			t.Fatalf("stage %s does not end", tag)
		}
		bodies = append(bodies, body[:end])
		rest = body[end:]
	}
}

// upstream: TestProxier_OnServiceCIDRsChanged: the drop rule names the ServiceCIDRs of
// the table's family only, joined by commas.
func TestServiceCIDRsOfTheFamily(t *testing.T) {
	cidrs := `apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: a}
spec: {cidrs: [172.30.0.0/16, "fd00:10:96::/112"]}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: b}
spec: {cidrs: [172.50.0.0/16, "fd00:172:30::/112"]}
---
`
	for _, tc := range []struct{ family, want string }{
		{"IPv4", "ip daddr { 172.30.0.0/16,172.50.0.0/16 } drop"},
		{"IPv6", "ip6 daddr { fd00:10:96::/112,fd00:172:30::/112 } drop"},
	} {
		sm := compileYAML(t, cidrs+`apiVersion: v1
kind: Node
metadata: {name: n}
---
apiVersion: svcgen/v1alpha1
kind: NodeEnvironment
metadata: {name: n}
ipFamily: `+tc.family+"\n")
		rules := Build(sm).Chains[syntax.ClusterIPsCheck].Rules
		if len(rules) != 2 || rules[1].Rule != tc.want {
			t.Errorf("%s: cluster-ips-check is %v, want its second rule %q", tc.family, rules, tc.want)
		}
	}
}

// upstream: TestLoadBalancerIngressRouteTypeProxy (nftables): an ingress IP with ipMode
// Proxy gets no service-ips element; VIP and unset do.
func TestLoadBalancerIngressIPMode(t *testing.T) {
	for _, tc := range []struct {
		name, svcIP, lbIP, ipMode string
		want                      bool
	}{
		{"ipMode Proxy", "10.20.30.41", "1.2.3.4", "ipMode: Proxy", false},
		{"ipMode VIP", "10.20.30.42", "1.2.3.5", "ipMode: VIP", true},
		{"ipMode nil", "10.20.30.43", "1.2.3.6", "", true},
	} {
		sm := compileYAML(t, `apiVersion: v1
kind: Service
metadata: {name: svc1, namespace: ns1}
spec:
  type: LoadBalancer
  clusterIP: `+tc.svcIP+`
  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 30001}]
status: {loadBalancer: {ingress: [{ip: `+tc.lbIP+`, `+tc.ipMode+`}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc1-1, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}
addressType: IPv4
endpoints: [{addresses: [10.180.0.1]}]
ports: [{name: p80, port: 80, protocol: TCP}]
`)
		found := false
		for _, e := range Build(sm).Maps[syntax.ServiceIPsMap].Elements {
			found = found || e.Key[0] == tc.lbIP
		}
		if found != tc.want {
			t.Errorf("%s: service-ips element for %s present = %v, want %v", tc.name, tc.lbIP, found, tc.want)
		}
	}
}

// knftables writes operations, as the reference text.
func knftablesText(family knftables.Family, ops []syntax.Op) string {
	tx := knftables.NewFake(family, syntax.TableName).NewTransaction()
	for _, o := range ops {
		if o.Verb == syntax.Delete {
			tx.Delete(o.Obj)
		} else {
			tx.Add(o.Obj)
		}
	}
	return tx.String()
}

// The streamed script is byte for byte what knftables writes for the table Build
// makes: the lines the writer writes itself (regular chains, rules, elements) and the
// order in which the table writes them. The table counts the objects Build makes.
func TestScriptAsKnftables(t *testing.T) {
	for _, sm := range []*ir.ServiceMap{
		compileFiles(t, "../../examples"),
		testkit.Compile(t, "gen.yaml", testkit.GenYAML(t, gen.Options{Services: 300, Endpoints: 3}), pipeline.Settings{Mode: compiler.NFTables}).Map,
		testkit.Compile(t, "gen.yaml", testkit.GenYAML(t, gen.Options{Services: 60, Endpoints: 12, Nodes: 5, Seed: 7}), pipeline.Settings{Mode: compiler.NFTables}).Map,
	} {
		st := Build(sm)
		want := knftablesText(st.Family, append(syntax.ReplaceTable(st.Table), syntax.Adds(st.Objects())...))
		if got := string(write(t, sm, Options{})); got != want {
			t.Errorf("the script (%d bytes) is not knftables' text of the table (%d bytes)", len(got), len(want))
		}
		if got, want := NewTable(sm).Objects(), len(st.Objects()); got != want {
			t.Errorf("the table counts %d objects, Build makes %d", got, want)
		}
		var dumped bytes.Buffer
		if err := syntax.WriteState(&dumped, st); err != nil {
			t.Fatal(err)
		}
		if want := knftablesText(st.Family, syntax.Adds(st.Objects())); dumped.String() != want {
			t.Errorf("WriteState is not knftables' text")
		}
	}
}

// Every per-service chain Build makes names its service port, and no fixed chain does.
func TestChainsNameTheirPort(t *testing.T) {
	st := Build(compileFiles(t, "../../examples"))
	n := 0
	for name := range st.Chains {
		if syntax.IsServiceChain(name) {
			n++
			if syntax.PortOf(name) == "" {
				t.Errorf("PortOf(%q) is empty", name)
			}
		} else if p := syntax.PortOf(name); p != "" {
			t.Errorf("PortOf(%q) = %q for a fixed chain", name, p)
		}
	}
	if n == 0 {
		t.Error("the examples have no per-service chain")
	}
}
