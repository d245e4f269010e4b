package plan

import (
	"bytes"
	"cmp"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/iptables/syntax"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/ruleview"
)

func compileYAML(t testing.TB, manifests string) *ir.ServiceMap {
	t.Helper()
	return testkit.Compile(t, "test.yaml", manifests, pipeline.Settings{}).Map
}

// otherTool is another program's chains and rules, which must survive.
const otherTool = `*nat
:OTHER-TOOL - [0:0]
-A OTHER-TOOL -d 198.18.9.9/32 -j RETURN
-A PREROUTING -j OTHER-TOOL
COMMIT
*filter
-A INPUT -s 198.18.7.7/32 -j ACCEPT
COMMIT
`

func mustParse(t testing.TB, text string) *syntax.Ruleset {
	t.Helper()
	rs, err := syntax.ParseBytes("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// write writes a partial sync, cut into blocks as blocks (at most one) says.
func write(t testing.TB, sm *ir.ServiceMap, opts Options, blocks ...Blocks) []byte {
	t.Helper()
	c, err := Partial(sm, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	var bl Blocks
	if len(blocks) > 0 {
		bl = blocks[0]
	}
	if err := c.Write(&b, bl); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// full writes the whole payload (--noflush) of a map.
func full(t testing.TB, sm *ir.ServiceMap) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := rules.Write(&b, sm, rules.Options{Format: rules.NoFlush}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// restoreBlocks restores a payload block by block onto a copy of rs, checking after
// every block that no rule jumps to a chain that is not there: each block boundary of
// a staged restore is a state the kernel holds for a while.
func restoreBlocks(t *testing.T, rs *syntax.Ruleset, payload []byte, maxChains int) *syntax.Ruleset {
	t.Helper()
	out := rs.Clone()
	start := 0
	for i, end := range syntax.Blocks(payload) {
		block := []byte(strings.Join(strings.Split(string(payload), "\n")[start:end], "\n") + "\n")
		start = end
		// (The generated service ports have a few chains each, far fewer than a block.)
		if c := syntax.CountLines(block); maxChains > 0 && c.Chains > maxChains {
			t.Errorf("block %d has %d chain lines; the limit is %d", i+1, c.Chains, maxChains)
		}
		if err := out.Restore(fmt.Sprintf("block %d", i+1), bytes.NewReader(block)); err != nil {
			t.Fatal(err)
		}
		if err := danglingJumps(out); err != nil {
			t.Fatalf("after block %d: %v\n%s", i+1, err, block)
		}
	}
	return out
}

var targets = map[string]bool{"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "MARK": true, "DNAT": true, "SNAT": true, "MASQUERADE": true, "": true}

func danglingJumps(rs *syntax.Ruleset) error {
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if to := syntax.RuleTarget(r.Args); !targets[to] && t.Chain(to) == nil {
					return fmt.Errorf("table %s: %s jumps to %s, which is not there", t.Name, c.Name, to)
				}
			}
		}
	}
	return nil
}

func sameView(t *testing.T, what string, got, want *syntax.Ruleset, scope syntax.Scope) {
	t.Helper()
	if d := ruleview.Unified("got", got.View(nil, scope), "want", want.View(nil, scope)); d != nil {
		t.Errorf("%s:\n%s", what, d)
	}
}

// A staged restore ends where the one-block restore ends, every block boundary has no
// dangling jump, no block declares more chains than the limit allows, and other
// software's chains are never named.
func TestStagedRestore(t *testing.T) {
	a := testkit.GenMap(t, 300, 5, 1)
	b := testkit.Without(a, 7, 5)
	c := testkit.GenMap(t, 300, 5, 2)
	empty := mustParse(t, otherTool)
	loaded := empty.Clone()
	if err := loaded.Restore("a", bytes.NewReader(write(t, a, Options{Previous: empty, EnsureJumps: true}))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		prev *syntax.Ruleset
		next *ir.ServiceMap
	}{
		{"cold", empty, a},
		{"a to b", loaded, b},
		{"a to c", loaded, c},
		{"a to a", loaded, a},
	} {
		for _, minimal := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s minimal=%v", tc.name, minimal), func(t *testing.T) {
				opts := Options{Previous: tc.prev, Minimal: minimal, EnsureJumps: true}
				one := write(t, tc.next, opts)
				staged := write(t, tc.next, opts, Blocks{MaxChains: 100})
				if bytes.Contains(staged, []byte("OTHER-TOOL")) {
					t.Fatal("the restore names another tool's chain")
				}
				got := restoreBlocks(t, tc.prev, staged, 100)
				want := tc.prev.Clone()
				if err := want.Restore("one", bytes.NewReader(one)); err != nil {
					t.Fatal(err)
				}
				sameView(t, "staged against one block", got, want, syntax.Everything)
				wantNode := mustParse(t, string(full(t, tc.next)))
				sameView(t, "kube-proxy's part against a fresh load", got, syntax.WithJumps(wantNode), syntax.KubeProxyOnly)
				if other := got.Table("nat").Chain("OTHER-TOOL"); other == nil || len(other.Rules) != 1 {
					t.Error("another tool's chain did not survive")
				}
				if n := len(syntax.Blocks(staged)); tc.name != "a to a" && n < 3 {
					t.Errorf("%d blocks; want the restore staged", n)
				}
			})
		}
	}
}

// The jumps kube-proxy ensures are inserted once, in kube-proxy's order, and copies
// are removed; other rules in the built-in chains stay where they are.
func TestEnsureJumps(t *testing.T) {
	sm := testkit.GenMap(t, 5, 2, 1)
	prev := mustParse(t, otherTool)
	first := write(t, sm, Options{Previous: prev, EnsureJumps: true, Minimal: true})
	state := prev.Clone()
	if err := state.Restore("first", bytes.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"filter", "nat"} {
		var want []string
		for _, r := range syntax.JumpRules(table) {
			if state.Table(table).Chain(syntax.RuleTarget(r.Args)) != nil {
				want = append(want, r.Text())
			}
		}
		var got []string
		for _, chain := range syntax.BuiltinChains(table) {
			c := state.Table(table).Chain(chain)
			if c == nil {
				continue
			}
			for _, r := range c.Rules {
				if syntax.IsKubeProxyChain(syntax.RuleTarget(r.Args)) || syntax.RuleTarget(r.Args) == syntax.ChainFirewall {
					got = append(got, r.Text())
				}
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s jumps:\n%s\nwant\n%s", table, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// The other tool's rules keep their places: after kube-proxy's jumps.
	if pre := state.Table("nat").Chain("PREROUTING").Rules; syntax.RuleTarget(pre[len(pre)-1].Args) != "OTHER-TOOL" {
		t.Errorf("PREROUTING = %v", pre)
	}
	if again := write(t, sm, Options{Previous: state, EnsureJumps: true, Minimal: true}); len(again) != 0 {
		t.Errorf("second restore not empty:\n%s", again)
	}
	// A copy of a jump is removed.
	dup := state.Clone()
	pre := dup.Table("nat").Chain("PREROUTING")
	pre.Rules = append(pre.Rules, pre.Rules[0])
	fix := write(t, sm, Options{Previous: dup, EnsureJumps: true, Minimal: true})
	if want := "# kube-proxy v1.37 iptables rules for node node-0 (IPv4), written by svcgen, a partial sync\n*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n"; string(fix) != want {
		t.Errorf("restore for a doubled jump:\n%s\nwant\n%s", fix, want)
	}
}

// A transition turns one state into another, and touches nothing else.
func TestTransition(t *testing.T) {
	a := testkit.GenMap(t, 200, 4, 1)
	b := testkit.Without(a, 5, 3)
	base := mustParse(t, otherTool)
	state := func(sm *ir.ServiceMap) *syntax.Ruleset {
		rs := base.Clone()
		if err := rs.Restore("load", bytes.NewReader(write(t, sm, Options{Previous: base, EnsureJumps: true}))); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	sa, sb := state(a), state(b)
	for _, tc := range []struct {
		name     string
		from, to *syntax.Ruleset
	}{
		{"a to b", sa, sb},
		{"b to a", sb, sa},
		{"a to nothing", sa, base},
		{"nothing to a", base, sa},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteTransition(&buf, tc.from, tc.to, 50); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(buf.Bytes(), []byte("OTHER-TOOL")) {
				t.Fatal("the transition names another tool's chain")
			}
			got := restoreBlocks(t, tc.from, buf.Bytes(), 50)
			sameView(t, "after the transition", got, tc.to, syntax.Everything)
			var again bytes.Buffer
			WriteTransition(&again, got, tc.to, 50)
			if again.Len() != 0 {
				t.Errorf("a second transition is not empty:\n%s", again.String())
			}
		})
	}
}

// Built-in chains are edited rule by rule, also when only the order differs.
func TestBuiltinEdits(t *testing.T) {
	from := mustParse(t, "*filter\n-A INPUT -s 198.18.0.1/32 -j ACCEPT\n-A INPUT -s 198.18.0.2/32 -j ACCEPT\n-A INPUT -s 198.18.0.3/32 -j ACCEPT\nCOMMIT\n")
	for _, to := range []string{
		"*filter\n-A INPUT -s 198.18.0.3/32 -j ACCEPT\n-A INPUT -s 198.18.0.1/32 -j ACCEPT\nCOMMIT\n",
		"*filter\n-A INPUT -s 198.18.0.2/32 -j ACCEPT\n-A INPUT -s 198.18.0.1/32 -j ACCEPT\n-A INPUT -s 198.18.0.3/32 -j ACCEPT\n-A INPUT -s 198.18.0.4/32 -j ACCEPT\nCOMMIT\n",
		"*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n",
	} {
		want := mustParse(t, to)
		var buf bytes.Buffer
		if err := WriteTransition(&buf, from, want, 0); err != nil {
			t.Fatal(err)
		}
		got := from.Clone()
		if err := got.Restore("edits", &buf); err != nil {
			t.Fatal(err)
		}
		sameView(t, "INPUT after edits", got, want, syntax.Everything)
	}
}

// Cleaned removes kube-proxy's chains and jumps in every table, and nothing else.
func TestCleaned(t *testing.T) {
	sm := testkit.GenMap(t, 20, 3, 1)
	rs := mustParse(t, otherTool)
	if err := rs.Restore("load", bytes.NewReader(write(t, sm, Options{Previous: rs, EnsureJumps: true}))); err != nil {
		t.Fatal(err)
	}
	if err := rs.Restore("mangle", strings.NewReader("*mangle\n:KUBE-PROXY-CANARY - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	clean, err := Cleaned(rs)
	if err != nil {
		t.Fatal(err)
	}
	want := mustParse(t, otherTool+"*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n")
	sameView(t, "cleaned", clean, want, syntax.Everything)

	// kubelet's KUBE-FIREWALL with its own rule stays.
	kubelet := mustParse(t, "*filter\n:KUBE-FIREWALL - [0:0]\n-A INPUT -j KUBE-FIREWALL\n-A KUBE-FIREWALL -m mark --mark 0x8000/0x8000 -j DROP\nCOMMIT\n")
	if c, err := Cleaned(kubelet); err != nil || c.Table("filter").Chain("KUBE-FIREWALL") == nil || len(c.Table("filter").Chain("INPUT").Rules) != 1 {
		t.Errorf("kubelet's KUBE-FIREWALL was removed (err %v)", err)
	}

	// Another program's chain that jumps into kube-proxy's stops cleanup.
	bad := rs.Clone()
	bad.Table("nat").Chain("OTHER-TOOL").Rules = append(bad.Table("nat").Chain("OTHER-TOOL").Rules, syntax.Rule{Chain: "OTHER-TOOL", Args: []string{"-j", "KUBE-SERVICES"}})
	if _, err := Cleaned(bad); err == nil || !strings.Contains(err.Error(), "OTHER-TOOL") {
		t.Errorf("err = %v; want one naming OTHER-TOOL", err)
	}
}

// Restore models iptables-restore --noflush.
func TestRestoreNoflush(t *testing.T) {
	rs := mustParse(t, "*filter\n:INPUT ACCEPT [0:0]\n:MINE - [0:0]\n-A INPUT -s 198.18.0.1/32 -j MINE\n-A MINE -j RETURN\nCOMMIT\n")
	err := rs.Restore("payload", strings.NewReader(`*filter
:INPUT DROP [0:0]
:MINE - [0:0]
:NEW - [0:0]
-A MINE -j NEW
-I INPUT 1 -s 198.18.0.2/32 -j ACCEPT
-I INPUT 3 -s 198.18.0.3/32 -j ACCEPT
-D INPUT -s 198.18.0.1/32 -j MINE
COMMIT
*nat
-A POSTROUTING -j RETURN
COMMIT
`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rs.Write(&out)
	want := `*filter
:INPUT DROP [0:0]
:MINE - [0:0]
:NEW - [0:0]
-A INPUT -s 198.18.0.2/32 -j ACCEPT
-A INPUT -s 198.18.0.3/32 -j ACCEPT
-A MINE -j NEW
COMMIT
*nat
-A POSTROUTING -j RETURN
COMMIT
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	for _, bad := range []string{"*filter\n-D INPUT -j NOPE\nCOMMIT\n", "*filter\n-I INPUT 9 -j ACCEPT\nCOMMIT\n"} {
		if err := rs.Clone().Restore("bad", strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// With PreviousMap, only the Services that changed are looked at, and the restore
// leads to the same rules as the one that compares everything; when no rule of the
// fixed chains changed, they are left out.
func TestPreviousMap(t *testing.T) {
	a := testkit.GenMap(t, 200, 4, 1)
	base := mustParse(t, otherTool)
	loaded := base.Clone()
	if err := loaded.Restore("a", bytes.NewReader(write(t, a, Options{Previous: base, EnsureJumps: true}))); err != nil {
		t.Fatal(err)
	}
	// One endpoint of every 50th service moves: no fixed-chain rule changes.
	moved := *a
	moved.Services = append([]*ir.Service(nil), a.Services...)
	for i := 0; i < len(moved.Services); i += 50 {
		s := *moved.Services[i]
		s.Ports = append([]*ir.Port(nil), s.Ports...)
		p := *s.Ports[0]
		p.Endpoints = append([]ir.Endpoint(nil), p.Endpoints...)
		if len(p.Reachable) == 0 {
			continue
		}
		p.Endpoints[p.Reachable[0]].Port += 1000
		s.Ports[0] = &p
		moved.Services[i] = &s
	}
	// A cluster IP changes: KUBE-SERVICES changes.
	readdressed := moved
	readdressed.Services = append([]*ir.Service(nil), moved.Services...)
	s := *readdressed.Services[3]
	s.Ports = append([]*ir.Port(nil), s.Ports...)
	p := *s.Ports[0]
	p.ClusterIP = p.ClusterIP.Next()
	s.Ports[0] = &p
	readdressed.Services[3] = &s

	for _, tc := range []struct {
		name      string
		next      *ir.ServiceMap
		wantFixed bool
	}{
		{"endpoints moved", &moved, false},
		{"cluster IP changed", &readdressed, true},
		{"services removed", testkit.Without(a, 9, 1000), true},
		{"nothing changed", a, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Previous: loaded, Minimal: true, EnsureJumps: true}
			slow := write(t, tc.next, opts)
			want := loaded.Clone()
			if err := want.Restore("slow", bytes.NewReader(slow)); err != nil {
				t.Fatal(err)
			}
			opts.PreviousMap = a
			for _, changed := range [][]string{nil, changedKeys(a, tc.next)} {
				opts.Changed = changed
				fast := write(t, tc.next, opts)
				if got := bytes.Contains(fast, []byte(":KUBE-SERVICES")); got != tc.wantFixed {
					t.Errorf("Changed %v: KUBE-SERVICES written: %v, want %v\n%s", changed, got, tc.wantFixed, fast)
				}
				got := restoreBlocks(t, loaded, fast, 0)
				sameView(t, fmt.Sprintf("with PreviousMap, Changed %v", changed), got, want, syntax.Everything)
				if tc.name == "endpoints moved" && bytes.Count(fast, []byte("-X KUBE-SEP-")) != 4 {
					t.Errorf("want the 4 moved endpoints' old chains deleted:\n%s", fast)
				}
				if tc.name == "nothing changed" && len(fast) != 0 {
					t.Errorf("restore for no change:\n%s", fast)
				}
			}
		})
	}
}

// changedKeys lists the Services that are not the same *ir.Service in both maps, as
// compiler.Session reports them: sorted as strings.
func changedKeys(a, b *ir.ServiceMap) []string {
	keys := []string{}
	ir.Pairs(a.Services, b.Services, func(old, s *ir.Service) {
		if old != s {
			keys = append(keys, cmp.Or(old, s).Key())
		}
	})
	sort.Strings(keys)
	return keys
}

// Options.Changed names Services by key, and they are found in the map's order
// (namespace, then name), which is not the keys' order as strings: "ns-x/web" sorts
// before "ns/web". Services the list leaves out are taken as they were, even when
// they changed: the list is trusted.
func TestChangedHint(t *testing.T) {
	manifest := func(endpoint string) string {
		var b strings.Builder
		for i, ns := range []string{"ns", "ns-x"} {
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec: {clusterIP: 198.19.0.%[2]d, ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: %[1]s, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 80}]
endpoints: [{addresses: [%[3]s]}]
`, ns, 10+i, endpoint)
		}
		return b.String()
	}
	a, b := compileYAML(t, manifest("198.18.1.1")), compileYAML(t, manifest("198.18.1.2"))
	loaded := mustParse(t, string(full(t, a)))
	for _, tc := range []struct {
		changed []string
		want    []string // service ports whose chains are written
	}{
		{[]string{"ns-x/web", "ns/web"}, []string{"ns/web:http", "ns-x/web:http"}},
		{[]string{"ns-x/web"}, []string{"ns-x/web:http"}},
		{[]string{"ns/web"}, []string{"ns/web:http"}},
		{[]string{}, nil},
	} {
		out := write(t, b, Options{Previous: loaded, PreviousMap: a, Changed: tc.changed, Minimal: true})
		rs := mustParse(t, string(out))
		var got []string
		if nat := rs.Table("nat"); nat != nil {
			for _, c := range nat.Chains {
				if strings.HasPrefix(c.Name, "KUBE-SVC-") {
					got = append(got, syntax.FindOwners(rs).Label(c.Name))
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("Changed %q: wrote the chains of %q, want %q\n%s", tc.changed, got, tc.want, out)
		}
	}
}

// A tally says "1 chain", "1 block" and "2 rules", as English counts them.
func TestCountString(t *testing.T) {
	for _, tc := range []struct {
		c    syntax.Count
		want string
	}{
		{syntax.Count{Chains: 1, Rules: 1, Blocks: 1}, "1 chain written, 1 rule written, 0 rules and 0 chains deleted, in 1 block"},
		{syntax.Count{Chains: 3, Rules: 2, DeletedRules: 1, DeletedChains: 1, Blocks: 2}, "2 chains written, 2 rules written, 1 rule and 1 chain deleted, in 2 blocks"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
	if c := syntax.CountLines([]byte("*nat\n:KUBE-SVC-X - [0:0]\n-A KUBE-SVC-X -j RETURN\nCOMMIT\n")); c.String() != "1 chain written, 1 rule written, 0 rules and 0 chains deleted, in 1 block" {
		t.Errorf("one chain in one block: %q", c)
	}
}

// With MarkCommits every block, staged or not, ends with the commit mark: the restore is
// otherwise the same, leaves the same rules, tallies the same, and every block is sure
// to change the ruleset, even one that only flushes a chain.
func TestMarkCommits(t *testing.T) {
	a := testkit.GenMap(t, 300, 5, 1)
	b := testkit.Without(a, 7, 5)
	empty := mustParse(t, otherTool)
	loaded := empty.Clone()
	if err := loaded.Restore("a", bytes.NewReader(write(t, a, Options{Previous: empty, EnsureJumps: true}))); err != nil {
		t.Fatal(err)
	}
	const mark = ":SVCGEN-COMMIT - [0:0]\n-X SVCGEN-COMMIT\nCOMMIT\n"
	for _, tc := range []struct {
		name      string
		prev      *syntax.Ruleset
		next      *ir.ServiceMap
		maxChains int
	}{
		{"cold, staged", empty, a, 100},
		{"cold, one block per table", empty, a, 0},
		{"a to b", loaded, b, 0},
		{"a to b, staged", loaded, b, 100},
	} {
		opts := Options{Previous: tc.prev, Minimal: true, EnsureJumps: true}
		plain := write(t, tc.next, opts, Blocks{MaxChains: tc.maxChains})
		marked := write(t, tc.next, opts, Blocks{MaxChains: tc.maxChains, MarkCommits: true})
		if got := strings.ReplaceAll(string(marked), mark, "COMMIT\n"); got != string(plain) {
			t.Errorf("%s: without its marks, the restore is not the one written without them:\n%s", tc.name, marked)
		}
		if n, m := strings.Count(string(marked), mark), len(syntax.Blocks(marked)); n != m || n == 0 {
			t.Errorf("%s: %d marks in %d blocks", tc.name, n, m)
		}
		if n, sure := syntax.Commits(marked); n != len(syntax.Blocks(plain)) || !sure {
			t.Errorf("%s: Commits = %d, %v; want %d, true", tc.name, n, sure, len(syntax.Blocks(plain)))
		}
		if syntax.CountLines(marked) != syntax.CountLines(plain) {
			t.Errorf("%s: tallied %v, without the marks %v", tc.name, syntax.CountLines(marked), syntax.CountLines(plain))
		}
		want, got := tc.prev.Clone(), tc.prev.Clone()
		if err := want.Restore("plain", bytes.NewReader(plain)); err != nil {
			t.Fatal(err)
		}
		if err := got.Restore("marked", bytes.NewReader(marked)); err != nil {
			t.Fatal(err)
		}
		sameView(t, tc.name, got, want, syntax.Everything)
	}
	// A block that only flushes a chain (the filter rules of a Service without
	// endpoints, removed) is not sure without the mark.
	noEndpoints := compileYAML(t, testkit.GenYAML(t, gen.Options{Services: 2, Endpoints: 0, Seed: 1}))
	withRules := empty.Clone()
	if err := withRules.Restore("no endpoints", bytes.NewReader(write(t, noEndpoints, Options{Previous: empty, EnsureJumps: true}))); err != nil {
		t.Fatal(err)
	}
	none := testkit.Without(noEndpoints, 1, 2)
	opts := Options{Previous: withRules, Minimal: true, EnsureJumps: true}
	if _, sure := syntax.Commits(write(t, none, opts)); sure {
		t.Errorf("removing Services without endpoints is sure without the mark:\n%s", write(t, none, opts))
	}
	marked := Blocks{MarkCommits: true}
	if _, sure := syntax.Commits(write(t, none, opts, marked)); !sure {
		t.Errorf("removing Services without endpoints is not sure with the mark:\n%s", write(t, none, opts, marked))
	}
}
