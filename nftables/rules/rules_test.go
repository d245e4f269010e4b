package rules

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/internal/nfttest"
	"github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

func write(t *testing.T, sm *ir.ServiceMap, opts Options) []byte {
	t.Helper()
	return nfttest.Text(t, func(w io.Writer) error { return Write(w, sm, opts) })
}

// checkLeaves applies script on top of before (nil: nothing), as nf_tables would
// (syntax.Parse refuses what nft refuses), and checks that it leaves exactly the table
// Build makes, in the same order; what names the script in the message.
func checkLeaves(t *testing.T, what string, before, script []byte, sm *ir.ServiceMap) {
	t.Helper()
	rs, err := syntax.ParseBytes("script", append(append([]byte(nil), before...), script...))
	if err != nil {
		t.Fatalf("%s does not apply: %v", what, err)
	}
	got := nfttest.Text(t, func(w io.Writer) error { return syntax.WriteState(w, rs.Tables[knftables.IPv4Family]) })
	if want := nfttest.Text(t, func(w io.Writer) error { return syntax.WriteState(w, Build(sm)) }); !bytes.Equal(got, want) {
		t.Errorf("%s leaves:\n%s\nwant the table it describes:\n%s", what, got, want)
	}
}

func TestScriptBuildsItsTable(t *testing.T) {
	sm := nfttest.Examples(t)
	script := write(t, sm, Options{})
	checkLeaves(t, "the script", nil, script, sm)
	// Running it again on top of itself leaves the same table.
	checkLeaves(t, "the script run twice", script, script, sm)
}

func TestStagesBuildTheSameTable(t *testing.T) {
	sm := nfttest.Examples(t)
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
		sm := nfttest.Compile(t, cidrs+`apiVersion: v1
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
// Proxy gets no service-ips element; VIP and unset do. The Services are one cluster:
// each ingress IP is looked up in its table.
func TestLoadBalancerIngressIPMode(t *testing.T) {
	elements := map[string]bool{}
	want := map[string]bool{"1.2.3.4": false, "1.2.3.5": true, "1.2.3.6": true}
	var manifests strings.Builder
	for i, mode := range []string{"ipMode: Proxy", "ipMode: VIP", ""} {
		fmt.Fprintf(&manifests, `apiVersion: v1
kind: Service
metadata: {name: svc%[1]d, namespace: ns1}
spec:
  type: LoadBalancer
  clusterIP: 10.20.30.4%[1]d
  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3000%[1]d}]
status: {loadBalancer: {ingress: [{ip: 1.2.3.%[2]d, %[3]s}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc%[1]d-1, namespace: ns1, labels: {kubernetes.io/service-name: svc%[1]d}}
addressType: IPv4
endpoints: [{addresses: [10.180.0.1]}]
ports: [{name: p80, port: 80, protocol: TCP}]
---
`, i+1, i+4, mode)
	}
	for _, e := range Build(nfttest.Compile(t, manifests.String())).Maps[syntax.ServiceIPsMap].Elements {
		elements[e.Key[0]] = true
	}
	for ip, present := range want {
		if elements[ip] != present {
			t.Errorf("service-ips element for %s present = %v, want %v", ip, elements[ip], present)
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
		nfttest.Examples(t),
		nfttest.Compile(t, testkit.GenYAML(t, gen.Options{Services: 300, Endpoints: 3})),
		nfttest.Compile(t, testkit.GenYAML(t, gen.Options{Services: 60, Endpoints: 12, Nodes: 5, Seed: 7})),
	} {
		st := Build(sm)
		want := knftablesText(st.Family, append(syntax.ReplaceTable(st.Table), syntax.Adds(st.Objects())...))
		if got := string(nfttest.Body(write(t, sm, Options{}))); got != want {
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
	st := Build(nfttest.Examples(t))
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
