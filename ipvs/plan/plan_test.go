package plan

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

func prefixes(s []string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// wantNode is a small wanted state with a bit of everything.
func wantNode(t *testing.T) *syntax.Node {
	t.Helper()
	vss, err := syntax.ParseRulesBytes("want", []byte("-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &syntax.Node{
		Family:    model.IPv4,
		Sysctls:   []syntax.Sysctl{{Name: "net.ipv4.vs.conntrack", Value: "1"}, {Name: "net.ipv4.ip_forward", Value: "1"}},
		Addresses: prefixes([]string{"10.0.0.1/32"}),
		Sets: []*syntax.Set{
			{Name: syntax.SetClusterIP, Type: syntax.HashIPPort, Family: "inet", HashSize: 1024, MaxElem: 65536, Entries: []string{"10.0.0.1,tcp:80"}},
			{Name: syntax.SetIPVSIPs, Type: syntax.HashIP, Family: "inet", HashSize: 1024, MaxElem: 65536, Entries: []string{"10.0.0.1"}},
		},
		Services:     vss,
		ExcludeCIDRs: prefixes([]string{"198.51.100.0/24"}),
	}
}

// stage is where an operation's kind stands in the plan's order.
func stage(k Kind) int {
	switch k {
	case CreateSet, AddEntry, DelEntry:
		return int(CreateSet)
	case AddService, EditService:
		return int(AddService)
	case DrainReal, DeleteReal:
		return int(DrainReal)
	case AddReal, EditReal:
		return int(AddReal)
	}
	return int(k)
}

// From a node that holds something else, the plan runs in the package's order,
// changes each thing once, and the state it leaves needs nothing more.
func TestPlanOrderAndAfter(t *testing.T) {
	stale := &syntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort("10.0.0.9:80"), Scheduler: "rr"}
	theirs := &syntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort("198.51.100.7:80"), Scheduler: "rr"}
	draining := &syntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort("10.0.0.1:80"), Scheduler: "rr",
		Reals: []syntax.RealServer{{Address: netip.MustParseAddrPort("10.1.0.2:80"), Forward: syntax.Masquerade, Weight: 1}}}
	have := &Have{
		Sysctls:   map[string]string{"net.ipv4.vs.conntrack": "0", "net.ipv4.ip_forward": "1", "net.ipv4.other": "7"},
		Addresses: prefixes([]string{"10.0.0.9/32"}),
		Sets:      []*syntax.Set{{Name: syntax.SetClusterIP, Type: syntax.HashIPPort, Family: "inet", HashSize: 1024, MaxElem: 65536, Entries: []string{"10.0.0.9,tcp:80"}}},
		Services:  []*syntax.VirtualServer{draining, stale, theirs},
		Conns:     map[syntax.RealID]syntax.Conns{draining.RealID(draining.Reals[0]): {Active: 1}},
	}
	want := wantNode(t)
	ch, err := Plan(have, want, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ch.Ops {
		got = append(got, op.Line())
	}
	expect := []string{
		"sysctl net.ipv4.vs.conntrack=1",
		"ip link add kube-ipvs0 type dummy",
		"ip addr add 10.0.0.1/32 dev kube-ipvs0",
		"add KUBE-CLUSTER-IP 10.0.0.1,tcp:80",
		"del KUBE-CLUSTER-IP 10.0.0.9,tcp:80",
		"create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536",
		"add KUBE-IPVS-IPS 10.0.0.1",
		"-D -t 10.0.0.9:80",
		"-e -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 0",
		"-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1",
		"ip addr del 10.0.0.9/32 dev kube-ipvs0",
	}
	if !slices.Equal(got, expect) {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(expect, "\n"))
	}
	if !slices.IsSortedFunc(ch.Ops, func(a, b Op) int { return stage(a.Kind) - stage(b.Kind) }) {
		t.Errorf("operations out of the package's order: %q", got)
	}
	after := ch.After
	var rules bytes.Buffer
	if err := syntax.WriteRules(&rules, after.Services); err != nil {
		t.Fatal(err)
	}
	wantRules := "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 0\n-A -t 198.51.100.7:80 -s rr\n"
	if rules.String() != wantRules {
		t.Errorf("IPVS after the plan:\n%s\nwant (the drained server kept, the excluded service kept):\n%s", rules.String(), wantRules)
	}
	if after.Sysctls["net.ipv4.other"] != "7" || after.Sysctls["net.ipv4.vs.conntrack"] != "1" || !after.Link {
		t.Errorf("after: sysctls %v, link %v", after.Sysctls, after.Link)
	}
	if c := after.Conns[draining.RealID(draining.Reals[0])]; c.Active != 1 {
		t.Errorf("after: the drained server's connections are %+v, want the node's", c)
	}
	again, err := Plan(after, want, Options{})
	if err != nil || !again.Empty() {
		t.Errorf("a plan of the state the plan leaves: %v, %d operations", err, len(again.Ops))
	}
	if want.Services[0].Reals[0].Weight != 1 || len(want.Services[0].Reals) != 1 {
		t.Errorf("the plan changed the wanted state: %+v", want.Services[0].Reals)
	}
}

// Full edits every wanted virtual and real server that exists, and nothing else.
func TestPlanFull(t *testing.T) {
	want := wantNode(t)
	ch, err := Plan(&Have{Link: true, Sysctls: map[string]string{"net.ipv4.vs.conntrack": "1", "net.ipv4.ip_forward": "1"},
		Addresses: want.Addresses, Sets: want.Sets, Services: want.Services}, want, Options{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ch.Ops {
		got = append(got, op.Line())
	}
	expect := []string{"-E -t 10.0.0.1:80 -s rr", "-e -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1"}
	if !slices.Equal(got, expect) {
		t.Errorf("full plan of a node in step: %q, want %q", got, expect)
	}
}

// A set of another type on the node is refused: ipset cannot change a set's type
// while rules use it.
func TestPlanSetOfAnotherType(t *testing.T) {
	have := &Have{Sets: []*syntax.Set{{Name: syntax.SetIPVSIPs, Type: syntax.HashIPPort}}}
	_, err := Plan(have, wantNode(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "set KUBE-IPVS-IPS is a hash:ip,port on the node, not a hash:ip") {
		t.Errorf("error %v", err)
	}
}

// SetsBack puts the named sets back after a change applied in part, and leaves the
// others alone; its operations are ipset restore input.
func TestSetsBack(t *testing.T) {
	was := wantNode(t).Sets[:1]
	ch, err := SetChanges(was, wantNode(t).Sets)
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	if err := WriteSets(&in, ch); err != nil {
		t.Fatal(err)
	}
	// ipset stopped before the last line: the set is created, its entry not added.
	lines := strings.SplitAfter(in.String(), "\n")
	other := "create OTHER hash:ip family inet hashsize 1024 maxelem 65536\nadd OTHER 1.2.3.4\n"
	now, err := syntax.RestoreSets("node", was, strings.NewReader(other+strings.Join(lines[:len(lines)-2], "")))
	if err != nil {
		t.Fatal(err)
	}
	back, err := SetsBack(now, was, []string{syntax.SetClusterIP, syntax.SetIPVSIPs})
	if err != nil {
		t.Fatal(err)
	}
	var undo bytes.Buffer
	if err := WriteSets(&undo, back); err != nil {
		t.Fatal(err)
	}
	if undo.String() != "destroy KUBE-IPVS-IPS\n" {
		t.Errorf("undo:\n%s", undo.String())
	}
	if err := WriteSets(&undo, []Op{{Kind: AddLink}}); err == nil {
		t.Error("an ip command was written as ipset input")
	}
}

// Cleanup deletes the virtual servers kube-proxy's records name (bound addresses,
// node-port sets) and nothing else, then the sets, then the link (IPv4 only).
func TestCleanupOwnership(t *testing.T) {
	vs := func(proto model.Protocol, a string) *syntax.VirtualServer {
		return &syntax.VirtualServer{Protocol: proto, Address: netip.MustParseAddrPort(a), Scheduler: "rr"}
	}
	have := &Have{
		Link:      true,
		Addresses: prefixes([]string{"198.19.0.10/32"}),
		Sets:      []*syntax.Set{{Name: syntax.SetNodePortTCP, Type: syntax.BitmapPort, Range: "0-65535", Entries: []string{"30080"}}},
		Services: []*syntax.VirtualServer{vs(model.TCP, "198.19.0.10:80"), vs(model.TCP, "198.18.0.1:30080"),
			vs(model.TCP, "198.18.0.1:8443"), vs(model.UDP, "198.18.0.1:30080")},
	}
	for _, ipv6 := range []bool{false, true} {
		var got []string
		ch := Cleanup(have, ipv6)
		for _, op := range ch.Ops {
			got = append(got, op.Line())
		}
		expect := []string{"-D -t 198.19.0.10:80", "-D -t 198.18.0.1:30080", "destroy KUBE-NODE-PORT-TCP"}
		if !ipv6 {
			expect = append(expect, "ip link del kube-ipvs0")
		}
		if !slices.Equal(got, expect) {
			t.Errorf("cleanup (IPv6 %v): %q, want %q", ipv6, got, expect)
		}
		if len(ch.After.Services) != 2 {
			t.Errorf("after cleanup: %d virtual servers, want the 2 that are not kube-proxy's", len(ch.After.Services))
		}
	}
}

// The plan walks real servers in ipvsadm's order: a list out of it is refused, not
// misread.
func TestPlanRealsOutOfOrder(t *testing.T) {
	vs := &syntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort("10.0.0.1:80"), Scheduler: "rr",
		Reals: []syntax.RealServer{{Address: netip.MustParseAddrPort("10.1.0.2:80")}, {Address: netip.MustParseAddrPort("10.1.0.1:80")}}}
	_, err := Plan(&Have{Services: []*syntax.VirtualServer{vs}}, wantNode(t), Options{})
	if err == nil || !strings.Contains(err.Error(), "the node's real servers of -t 10.0.0.1:80 are not in ipvsadm's order") {
		t.Errorf("error %v", err)
	}
}
