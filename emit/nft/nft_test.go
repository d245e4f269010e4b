package nft

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/internal/upstreamtest"
	"github.com/svcgen/svcgen/ir"
	"sigs.k8s.io/knftables"
)

// The worked examples of the spec (upstream's Test_servicePortChainNameBase and the
// names in its expected dumps).
func TestHashAndTruncate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ns1/svc1/tcp/p80", "ULMVA6XW-ns1/svc1/tcp/p80"},
		{"ns1/svc1/tcp/p80__10.180.0.1/80", "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"ns2/svc2/tcp/p80", "42NFTM6N-ns2/svc2/tcp/p80"},
		{"ns5/svc5/tcp/p80__10.180.0.3/80", "GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
		{"ns2/svc2/tcp/p8080", "MHHHYRWA-ns2/svc2/tcp/p8080"},
		{"testing/service/tcp/http", "P4ZYZVCF-testing/service/tcp/http"},
		{"testing/service/tcp/https", "LZBRENCP-testing/service/tcp/https"},
	} {
		if got := hashAndTruncate(tc.in); got != tc.want {
			t.Errorf("hashAndTruncate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// upstream's Test_servicePortChainNameBase and Test_servicePortEndpointChainNameBase.
	ns, svc, port := "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx", "very-long-service-name-why-would-you-even-do-this-i-mean-really", "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	long := ns + "/" + svc + "/sctp/" + port
	for _, tc := range []struct{ got, want string }{
		{portBase(ns, svc, "sctp", port), "KR6NACJP-" + long},
		{endpointBase("testing", "service", "tcp", "http", "10.180.0.1:80"), "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"},
		{endpointBase("testing", "service", "tcp", "http", "10.180.0.2:80"), "5S6H3H22-testing/service/tcp/http__10.180.0.2/80"},
		{endpointBase("testing", "service", "tcp", "http", "[fd80:abcd:12::a1b2:c3d4:e5f6:9999]:80"), "U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80"},
		{endpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abc:1234]:443"), "5YS7AFEA-" + long + "__1234.5678.9abc.def0..abc.1234/443"},
		{endpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:5678]:443"), "CI6C53Q3-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
		{endpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:8765]:443"), "2FLXFK6X-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

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
func dump(t *testing.T, st *State) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteState(&b, st); err != nil {
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
func applyScript(t *testing.T, before []byte, script []byte) *State {
	t.Helper()
	rs, err := ParseBytes("script", append(append([]byte(nil), before...), script...))
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
		if _, err := ParseBytes("stages", loaded); err != nil {
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

// editExamples returns a copy of the examples with edits applied to cluster.yaml.
func editExamples(t *testing.T, edits ...[2]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"cluster.yaml", "list.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		if name == "cluster.yaml" {
			for _, e := range edits {
				if !strings.Contains(s, e[0]) {
					t.Fatalf("examples changed: %q not found", e[0])
				}
				s = strings.Replace(s, e[0], e[1], 1)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPartialSync(t *testing.T) {
	before := write(t, compileFiles(t, "../../examples"), Options{})
	prev, err := ParseBytes("before", before)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("nothing changed writes nothing", func(t *testing.T) {
		if out := write(t, compileFiles(t, "../../examples"), Options{Previous: prev}); len(out) != 0 {
			t.Errorf("partial sync without changes wrote:\n%s", out)
		}
	})
	t.Run("an endpoint leaves", func(t *testing.T) {
		// hello-2 no longer matches the selector of both hello Services.
		sm := compileFiles(t, editExamples(t, [2]string{"name: hello-2\n  namespace: default\n  labels:\n    app: hello", "name: hello-2\n  namespace: default\n  labels:\n    app: other"}))
		out := write(t, sm, Options{Previous: prev})
		text := string(out)
		for _, want := range []string{
			"flush chain ip kube-proxy service-2E7DC2X4-default/hello-service/tcp/http\n",
			"numgen random mod 1 vmap",
			"delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("partial sync lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "shop/cart") || strings.Contains(text, "add table") {
			t.Errorf("partial sync rewrote what did not change:\n%s", text)
		}
		checkLeaves(t, "previous + partial sync", before, out, sm)
	})
	t.Run("a Service leaves and elements follow", func(t *testing.T) {
		sm := compileFiles(t, editExamples(t, [2]string{"name: hello-service2\n", "name: hello-service3\n"}))
		out := write(t, sm, Options{Previous: prev})
		text := string(out)
		for _, want := range []string{"delete element ip kube-proxy service-ips {", "delete chain ip kube-proxy service-7TLBIAYF-default/hello-service2/tcp/http\n", "add element ip kube-proxy service-ips {"} {
			if !strings.Contains(text, want) {
				t.Errorf("partial sync lacks %q:\n%s", want, text)
			}
		}
		checkLeaves(t, "previous + partial sync", before, out, sm)
	})
	t.Run("a fixed change rewrites the table", func(t *testing.T) {
		sm := compileFiles(t, editExamples(t, [2]string{"198.19.0.0/16", "198.18.0.0/15"}))
		out := write(t, sm, Options{Previous: prev})
		if !bytes.HasPrefix(out, []byte("add table ip kube-proxy")) || !bytes.Contains(out, []byte("\ndelete table ip kube-proxy\n")) {
			t.Errorf("a changed ServiceCIDR should rewrite the whole table, got:\n%s", out)
		}
	})
}

// TestMinimalPartialSync: --minimal leaves exactly the table the kube-proxy-shaped
// partial sync leaves (and the whole script), writes no more than it, and leaves out
// the chains of a changed Service whose rules are the same.
func TestMinimalPartialSync(t *testing.T) {
	before := write(t, compileFiles(t, "../../examples"), Options{})
	prev, err := ParseBytes("before", before)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edits [][2]string
		// has and lacks are lines the minimal partial must and must not have.
		has, lacks []string
	}{
		{name: "nothing changed"},
		{
			name:  "an endpoint moves",
			edits: [][2]string{{"198.18.2.12", "198.18.2.13"}},
			has: []string{
				"flush chain ip kube-proxy service-2E7DC2X4-default/hello-service/tcp/http\n",
				"add chain ip kube-proxy endpoint-", // the moved endpoint's new chain: added, not flushed
				"delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n",
			},
			lacks: []string{
				// The endpoint that stayed: its chain's rules are the same.
				"kube-proxy endpoint-4L34TH6B-default/hello-service/tcp/http__198.18.1.11/8080",
				"add chain ip kube-proxy service-", "flush chain ip kube-proxy endpoint-VI4V7AED",
				"element",
			},
		},
		{
			name:  "an endpoint leaves",
			edits: [][2]string{{"name: hello-2\n  namespace: default\n  labels:\n    app: hello", "name: hello-2\n  namespace: default\n  labels:\n    app: other"}},
			has:   []string{"numgen random mod 1 vmap", "delete chain ip kube-proxy endpoint-Q2MXAZSI-default/hello-service/tcp/http__198.18.2.12/8080\n"},
			lacks: []string{"kube-proxy endpoint-4L34TH6B-default/hello-service/tcp/http__198.18.1.11/8080", "add chain ip kube-proxy endpoint-"},
		},
		{
			name:  "a Service renamed",
			edits: [][2]string{{"name: hello-service2\n", "name: hello-service3\n"}},
			has:   []string{"delete element ip kube-proxy service-ips {", "add element ip kube-proxy service-ips {", "delete chain ip kube-proxy service-7TLBIAYF-default/hello-service2/tcp/http\n"},
			lacks: []string{"default/hello-service/", "shop/cart"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := compileFiles(t, editExamples(t, tc.edits...))
			kp := write(t, sm, Options{Previous: prev})
			minimal := write(t, sm, Options{Previous: prev, Minimal: true})
			want := dump(t, Build(sm))
			if got := dump(t, applyScript(t, before, minimal)); got != want {
				t.Errorf("previous + minimal partial:\n%s\nwant the whole new table:\n%s\nthe partial was:\n%s", got, want, minimal)
			}
			if got := dump(t, applyScript(t, before, kp)); got != want {
				t.Errorf("previous + kube-proxy's partial:\n%s\nwant:\n%s", got, want)
			}
			if len(minimal) > len(kp) || len(tc.edits) > 0 && len(minimal) >= len(kp) || len(tc.edits) == 0 && len(minimal) != 0 {
				t.Errorf("minimal partial of %d bytes, kube-proxy's of %d:\n%s", len(minimal), len(kp), minimal)
			}
			for _, s := range tc.has {
				if !bytes.Contains(minimal, []byte(s)) {
					t.Errorf("minimal partial lacks %q:\n%s", s, minimal)
				}
			}
			for _, s := range tc.lacks {
				if bytes.Contains(minimal, []byte(s)) {
					t.Errorf("minimal partial has %q:\n%s", s, minimal)
				}
			}
		})
	}
}

// uniqueLines drops repeated lines of a sorted dump: a set that is given one element
// twice (two Services' ports on one ClusterIP) holds it once. Element comments are left
// out: a partial sync, as kube-proxy's element storage, keeps an element whose key and
// value stay when only its comment (the Service port) changes.
func uniqueLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "add element ") {
			lines[i] = elementComment.ReplaceAllString(l, "")
		}
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n")
}

var elementComment = regexp.MustCompile(` comment "[^"]*"`)

// TestMinimalPartialRandom: from every random cluster to the next, both partial syncs
// (the whole script when the fixed part differs) leave the next cluster's table.
func TestMinimalPartialRandom(t *testing.T) {
	partial := 0
	var before []byte
	for seed := uint64(1); seed <= 40; seed++ {
		sm := compileYAML(t, string(randcluster.Generate(seed, randcluster.Options{IPv6: false})))
		if before != nil {
			prev, err := ParseBytes("before", before)
			if err != nil {
				t.Fatal(err)
			}
			want := uniqueLines(dump(t, Build(sm)))
			for _, minimal := range []bool{false, true} {
				out := write(t, sm, Options{Previous: prev, Minimal: minimal})
				if !bytes.Contains(out, []byte("delete table")) && minimal {
					partial++
				}
				if got := uniqueLines(dump(t, applyScript(t, before, out))); got != want {
					t.Errorf("seed %d, minimal %v: the partial leaves\n%s\nwant\n%s", seed, minimal, got, want)
				}
			}
		}
		before = write(t, sm, Options{})
	}
	if partial < 5 {
		t.Errorf("only %d of the transitions were partial syncs; the test covers too little", partial)
	}
}

// testdata/examples.list is "nft list ruleset" of a namespace where the script of
// ../../examples was loaded (nft 1.0.6). Read back, it is the table svcgen wants: a
// partial sync against it writes nothing.
func TestListingRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/examples.list")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseBytes("examples.list", data)
	if err != nil {
		t.Fatal(err)
	}
	want := Build(compileFiles(t, "../../examples"))
	got := rs.Tables[knftables.IPv4Family]
	if ops, full := partialOps(got, want.wanted(), false); full || len(ops) != 0 {
		t.Errorf("the listing differs from the table svcgen wants; partial sync:\n%s", knftablesText(t, want.Family, ops))
	}
	// Rules read back in knftables' spelling, except what Canonical undoes.
	for name, c := range want.Chains {
		for i, r := range c.Rules {
			g := got.Chains[name].Rules[i]
			if g.Rule != r.Rule && Canonical(g.Rule) != Canonical(r.Rule) {
				t.Errorf("chain %s rule %d: listed %q, written %q", name, i, g.Rule, r.Rule)
			}
		}
	}
	if got.Chains[markMasqChain].Rules[0].Rule != want.Chains[markMasqChain].Rules[0].Rule {
		t.Errorf("mark rule read back as %q", got.Chains[markMasqChain].Rules[0].Rule)
	}
}

func TestListingSpellings(t *testing.T) {
	listing := `table ip6 other {
	chain x {
		type filter hook input priority filter; policy drop;
		tcp dport 22 accept
	}
}
table ip6 kube-proxy {
	comment "rules for kube-proxy"
	set affinity-X {
		type ipv6_addr
		size 65535
		flags dynamic,timeout
		timeout 3h
		elements = { fd00::1 timeout 3h expires 2h59m58s }
	}

	map service-ips {
		type ipv6_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { fd00::10 . tcp . 80 : goto a,
			     fd00::11 . udp . 53 comment "ns/svc:dns" : drop }
	}

	chain a {
		iifname "veth*" goto b comment "short-circuit pod traffic"
		ip6 saddr != { 2001:db8::/64, fd00::/64 } drop
		ip6 daddr fd00:10:96::/112 drop comment "Drop traffic to unallocated ClusterIPs"
		meta mark & 0x00004000 == 0x00000000 return
		meta mark set meta mark ^ 0x00004000
	}

	chain b {
		type nat hook prerouting priority dstnat - 10; policy accept;
		numgen random mod 2 vmap { 0 : goto a, 1 : goto a }
	}
}
`
	rs, err := ParseBytes("listing", []byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Tables) != 1 {
		t.Fatalf("read %d kube-proxy tables, want the ip6 one only", len(rs.Tables))
	}
	st := rs.Tables[knftables.IPv6Family]
	wantRules := []string{
		"iifname veth* goto b",
		"ip6 saddr != { 2001:db8::/64 , fd00::/64 } drop",
		"ip6 daddr fd00:10:96::/112 drop",
		"mark and 0x00004000 == 0 return",
		"mark set mark xor 0x00004000",
	}
	for i, w := range wantRules {
		if got := st.Chains["a"].Rules[i].Rule; got != w {
			t.Errorf("rule %d read as %q, want %q", i, got, w)
		}
	}
	if c := st.Chains["a"].Rules[0].Comment; c == nil || *c != "short-circuit pod traffic" {
		t.Errorf("rule comment = %v", c)
	}
	if Canonical("ip6 daddr { fd00:10:96::/112 } drop") != Canonical(st.Chains["a"].Rules[2].Rule) {
		t.Errorf("a one-entry anonymous set should compare equal to its listing")
	}
	b := st.Chains["b"].Obj
	if b.Hook == nil || *b.Priority != "-110" || b.Policy != nil {
		t.Errorf("base chain read as %+v", b)
	}
	if got := st.Chains["b"].Rules[0].Rule; got != "numgen random mod 2 vmap { 0 : goto a , 1 : goto a }" {
		t.Errorf("vmap read as %q", got)
	}
	aff := st.Sets["affinity-X"]
	if aff.Set.Size != nil || aff.Set.Timeout == nil || aff.Set.Timeout.Hours() != 3 || len(aff.Elements) != 0 {
		t.Errorf("affinity set read as %+v with %d elements (dynamic entries are state, not ruleset)", aff.Set, len(aff.Elements))
	}
	m := st.Maps[serviceIPsMap]
	if len(m.Elements) != 2 || strings.Join(m.Elements[1].Key, " . ") != "fd00::11 . udp . 53" || m.Elements[1].Value[0] != "drop" || *m.Elements[1].Comment != "ns/svc:dns" {
		t.Errorf("map elements read as %+v", m.Elements)
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
		rules := Build(sm).Chains[clusterIPsCheck].Rules
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
		for _, e := range Build(sm).Maps[serviceIPsMap].Elements {
			found = found || e.Key[0] == tc.lbIP
		}
		if found != tc.want {
			t.Errorf("%s: service-ips element for %s present = %v, want %v", tc.name, tc.lbIP, found, tc.want)
		}
	}
}

// Transactions (apply's) are what compile writes: the whole script, the stages of the
// staged one, or the partial sync; each ends with the commit mark, which makes it sure
// to change the ruleset, and a partial sync with nothing to do is no transaction.
func TestTransactions(t *testing.T) {
	const mark = "add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n"
	marked := func(body []byte) []byte { return append(slices.Clip(body), mark...) }
	check := func(what string, txs [][]byte, err error, want ...[]byte) {
		t.Helper()
		if err != nil || len(txs) != len(want) {
			t.Fatalf("%s: %d transactions, %v; want %d", what, len(txs), err, len(want))
		}
		for i := range txs {
			if !bytes.Equal(txs[i], marked(want[i])) {
				t.Errorf("%s, transaction %d:\n%s\nwant:\n%s%s", what, i+1, txs[i], want[i], mark)
			}
			if !SureChange(txs[i]) {
				t.Errorf("%s, transaction %d: not sure to change the ruleset", what, i+1)
			}
		}
	}
	sm := compileFiles(t, "../../examples")
	whole := write(t, sm, Options{})
	txs, err := Transactions(sm, nil, 0, true)
	check("whole", txs, err, whole)
	txs, err = Transactions(sm, nil, 10, true)
	check("staged", txs, err, stageBodies(t, write(t, sm, Options{Stages: true}))...)
	prev, err := ParseBytes("before", whole)
	if err != nil {
		t.Fatal(err)
	}
	moved := compileFiles(t, editExamples(t, [2]string{"198.18.2.12", "198.18.2.13"}))
	for _, minimal := range []bool{false, true} {
		txs, err = Transactions(moved, prev, 10, minimal)
		check(fmt.Sprintf("partial (minimal %v)", minimal), txs, err, write(t, moved, Options{Previous: prev, Minimal: minimal}))
	}
	if txs, err = Transactions(sm, prev, 10, true); err != nil || len(txs) != 0 {
		t.Errorf("nothing changed: %d transactions (%q), %v; want none", len(txs), txs, err)
	}
}

// SureChange: a transaction that adds a rule or deletes something; one that only adds
// chains, sets or elements, or flushes, may commit nothing.
func TestSureChange(t *testing.T) {
	for tx, want := range map[string]bool{
		"add rule ip kube-proxy services accept\n":                       true,
		"flush chain ip kube-proxy c\nadd rule ip kube-proxy c accept\n": true,
		"delete element ip kube-proxy cluster-ips { 198.19.0.1 }\n":      true,
		"add chain ip kube-proxy c\n":                                    false,
		"add element ip kube-proxy cluster-ips { 198.19.0.1 }\n":         false,
		"flush chain ip kube-proxy c\n":                                  false,
		"add element ip kube-proxy cluster-ips { 198.19.0.1 }\n" + "add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n": true,
	} {
		if got := SureChange([]byte(tx)); got != want {
			t.Errorf("SureChange(%q) = %v, want %v", tx, got, want)
		}
	}
}
