package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// TestGoldenIPVS compares every case's ipvs script with ipvs.sh, reads the script
// back with the package's parser (which must give the state it was written from),
// and checks upstream.ipvs.yaml, where a case reproduces an upstream ipvs test.
func TestGoldenIPVS(t *testing.T) {
	cases := findCases(t)
	assertions := 0
	for _, c := range cases {
		if !c.has("ipvs") {
			continue
		}
		t.Run(c.name(), func(t *testing.T) {
			res := compileCase(t, c, false)
			if len(res.Maps) > 1 {
				t.Skip("a dual-stack case: TestGolden checks its ipvs outputs (runDualCase)")
			}
			state := ipvsrules.Build(res.Map)
			got := ipvsScript(t, res, state)
			testkit.CompareGolden(t, c.file("ipvs.sh"), got, *update)
			if again := ipvsScript(t, compileCase(t, c, true), nil); !bytes.Equal(again, got) {
				t.Errorf("documents in reverse order give another script:\n%s", lineDiff("forward", got, "reversed", again))
			}
			back, err := ipvssyntax.ParseScript("ipvs.sh", bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			for _, vs := range state.Services {
				vs.For = nil
			}
			if !reflect.DeepEqual(back, state) {
				t.Errorf("the script reads back as another state:\nwrote %+v\nread  %+v", state, back)
			}
			if data, err := os.ReadFile(filepath.Join(c.dir, "upstream.ipvs.yaml")); err == nil {
				assertions += checkUpstreamIPVS(t, c, state, data)
			}
		})
	}
	t.Logf("upstream ipvs assertions reproduced: %d", assertions)
}

func ipvsScript(t *testing.T, res *pipeline.Result, state *ipvssyntax.Node) []byte {
	t.Helper()
	if state == nil {
		state = ipvsrules.Build(res.Map)
	}
	var b bytes.Buffer
	if err := ipvssyntax.WriteScript(&b, state, ipvssyntax.Header{Node: res.Map.Node.Name, Title: res.Map.Header("ipvs")}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upstreamIPVS is upstream.ipvs.yaml: what one upstream ipvs test asserts, transcribed
// from its Go literals. Every key present is checked the way upstream checks it.
type upstreamIPVS struct {
	// Services is len(GetVirtualServers()).
	Services *int `yaml:"services"`
	// IPVS is the whole IPVS state (upstream's reflect.DeepEqual over its fake), as
	// ipvsadm -Sn lines.
	IPVS []string `yaml:"ipvs"`
	// Reals are the real servers of named virtual servers ("-t 1.2.3.4:80"), in
	// order, as "IP:port" (GetRealServers).
	Reals map[string][]string `yaml:"reals"`
	// Sets are the exact entries of named sets (checkIPSet; upstream's fake uses the
	// IPv4 names in both families, the harness maps them).
	Sets map[string][]string `yaml:"sets"`
	// Chains are checkIptables: per chain (nat rules, then filter rules, as upstream's
	// getRules reads both tables), each rule's jump target and matched set.
	Chains map[string][]string `yaml:"chains"`
	// FirstServicesRule is the first KUBE-SERVICES rule, words after the chain.
	FirstServicesRule string `yaml:"firstServicesRule"`
	// ChainDecls are the chain lines of each table (TestCreateAndLinkKubeChain).
	ChainDecls map[string][]string `yaml:"chainDecls"`
	// Timeout is every virtual server's persistence timeout.
	Timeout *uint32 `yaml:"timeout"`
	// Addresses are the addresses bound to kube-ipvs0.
	Addresses *[]string `yaml:"addresses"`
	// RandomFully: the MASQUERADE rule has --random-fully.
	RandomFully *bool `yaml:"randomFully"`
}

// checkUpstreamIPVS checks a case's upstream assertions and returns how many.
func checkUpstreamIPVS(t *testing.T, c goldenCase, n *ipvssyntax.Node, data []byte) int {
	t.Helper()
	var u upstreamIPVS
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&u); err != nil {
		t.Fatalf("upstream.ipvs.yaml: %v", err)
	}
	count := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format, append([]any{c.upstream}, args...)...)
	}
	if u.Services != nil {
		count++
		if len(n.Services) != *u.Services {
			fail("%d virtual servers, upstream expects %d", len(n.Services), *u.Services)
		}
	}
	if u.IPVS != nil {
		count++
		var b bytes.Buffer
		ipvssyntax.WriteRules(&b, n.Services)
		if got, want := strings.TrimSpace(b.String()), strings.Join(u.IPVS, "\n"); got != want {
			fail("IPVS state differs:\n%s", lineDiff("upstream", []byte(want+"\n"), "svcgen", []byte(got+"\n")))
		}
	}
	for key, want := range u.Reals {
		count++
		vs := n.Service(key)
		if vs == nil {
			fail("no virtual server %s", key)
			continue
		}
		var got []string
		for _, rs := range vs.Reals {
			got = append(got, rs.Address.String())
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			fail("real servers of %s: %q, upstream expects %q", key, got, want)
		}
	}
	ipv6 := n.Family == model.IPv6
	for name, want := range u.Sets {
		count++
		s := n.Set(ipvssyntax.SetName(name, ipv6))
		if s == nil {
			fail("no set %s", name)
			continue
		}
		if strings.Join(s.Entries, " ") != strings.Join(want, " ") {
			fail("set %s: %q, upstream expects %q", name, s.Entries, want)
		}
	}
	for chain, want := range u.Chains {
		count++
		var got []string
		for _, tbl := range []ipvssyntax.Table{n.NAT, n.Filter} {
			for _, r := range tbl.Rules {
				if r.Chain == chain {
					got = append(got, jumpAndSet(r.Args, ipv6))
				}
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			fail("chain %s:\n%s", chain, lineDiff("upstream", []byte(strings.Join(want, "\n")+"\n"), "svcgen", []byte(strings.Join(got, "\n")+"\n")))
		}
	}
	if u.FirstServicesRule != "" {
		count++
		if got := strings.Join(n.NAT.Rules[0].Args, " "); n.NAT.Rules[0].Chain != "KUBE-SERVICES" || got != u.FirstServicesRule {
			fail("first KUBE-SERVICES rule %q, upstream expects %q", got, u.FirstServicesRule)
		}
	}
	for table, want := range u.ChainDecls {
		count++
		got := n.NAT.Chains
		if table == "filter" {
			got = n.Filter.Chains
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			fail("%s chains %q, upstream expects %q", table, got, want)
		}
	}
	if u.Timeout != nil {
		count++
		for _, vs := range n.Services {
			if vs.Timeout != *u.Timeout {
				fail("%s has timeout %d, upstream expects %d", vs.Key(), vs.Timeout, *u.Timeout)
			}
		}
	}
	if u.Addresses != nil {
		count++
		var got []string
		for _, a := range n.Addresses {
			got = append(got, a.Addr().String())
		}
		if strings.Join(got, " ") != strings.Join(*u.Addresses, " ") {
			fail("kube-ipvs0 addresses %q, upstream expects %q", got, *u.Addresses)
		}
	}
	if u.RandomFully != nil {
		count++
		has := false
		for _, r := range n.NAT.Rules {
			if r.Chain == "KUBE-POSTROUTING" && strings.Contains(strings.Join(r.Args, " "), "-j MASQUERADE --random-fully") {
				has = true
			}
		}
		if has != *u.RandomFully {
			fail("--random-fully on MASQUERADE: %v, upstream expects %v", has, *u.RandomFully)
		}
	}
	return count
}

// jumpAndSet is how upstream's checkIptables sees a rule: "TARGET" or "TARGET SET",
// the set named by its IPv4 name.
func jumpAndSet(args []string, ipv6 bool) string {
	var jump, set string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-j":
			jump = args[i+1]
		case "--match-set":
			set = args[i+1]
		}
	}
	if set == "" {
		return jump
	}
	if ipv6 {
		for _, name := range ipvssyntax.SetNames() {
			if ipvssyntax.SetName(name, true) == set {
				set = name
			}
		}
	}
	return jump + " " + set
}
