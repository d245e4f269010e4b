package plan_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/ipvs/plan"
	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

// reconcileCase is one input for both IPVS planners, the Go one (plan.Plan, which
// apply runs) and the script's awk program (syntax.ReconcileProgram), with what both
// must answer.
type reconcileCase struct {
	name    string
	family  model.IPFamily
	exclude string // CIDRs, space-separated
	// want is the state the node should hold, as "ipvsadm -Sn" lines in any order: the
	// awk program gets them as the script does, written back in ipvsadm's order.
	want string
	have string // the node's "ipvsadm -Sn"
	// conns are the kernel's counts of the node's real servers, by "-t VIP -r RIP";
	// the awk program reads them from "ipvsadm -Ln", the planner from Have.Conns.
	conns map[string]syntax.Conns
	// lines are the "ipvsadm -R" commands, in order.
	lines []string
	// retired says what becomes of each real server no longer wanted ("-t VIP -r
	// RIP"): delete, drain, or draining (left at weight 0).
	retired map[string]string
}

var reconcileCases = []reconcileCase{{
	name:    "every kind of difference",
	family:  model.IPv4,
	exclude: "198.51.100.0/24 10.200.0.0/16",
	want: `-A -t 10.0.0.1:80 -s rr
-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1
-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1
-A -u 10.0.0.2:53 -s rr -p 10800
-a -u 10.0.0.2:53 -r 10.1.0.1:53 -m -w 1
-A -t 10.0.0.3:80 -s rr
`,
	have: `-A -t 10.0.0.1:80 -s rr
-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 0
-a -t 10.0.0.1:80 -r 10.1.0.3:80 -m -w 1
-a -t 10.0.0.1:80 -r 10.1.0.4:80 -m -w 1
-a -t 10.0.0.1:80 -r 10.1.0.5:80 -m -w 0
-A -u 10.0.0.2:53 -s rr
-a -u 10.0.0.2:53 -r 10.1.0.9:53 -m -w 1
-A -t 10.0.0.9:80 -s rr
-a -t 10.0.0.9:80 -r 10.1.0.7:80 -m -w 1
-A -t 198.51.100.7:80 -s rr
-A -t [2001:db8::7]:80 -s rr
-A -f 7 -s rr
`,
	conns: map[string]syntax.Conns{
		"-t 10.0.0.1:80 -r 10.1.0.3:80": {Active: 1, Inactive: 3},
		"-t 10.0.0.1:80 -r 10.1.0.5:80": {Inactive: 2},
		"-u 10.0.0.2:53 -r 10.1.0.9:53": {Inactive: 5},
		"-t 10.0.0.9:80 -r 10.1.0.7:80": {Active: 4},
	},
	lines: []string{
		"-D -t 10.0.0.9:80", // stale, with its real server and their connections
		"-A -t 10.0.0.3:80 -s rr",
		"-E -u 10.0.0.2:53 -s rr -p 10800",
		"-e -t 10.0.0.1:80 -r 10.1.0.3:80 -m -w 0", // TCP with connections: drains
		"-d -t 10.0.0.1:80 -r 10.1.0.4:80",         // TCP without: goes
		"-d -u 10.0.0.2:53 -r 10.1.0.9:53",         // UDP goes at once
		"-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1",
		"-e -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1", // wanted again: weight back to 1
		"-a -u 10.0.0.2:53 -r 10.1.0.1:53 -m -w 1",
	}, // 198.51.100.7 is excluded, [2001:db8::7] of the other family, -f 7 a firewall mark
	retired: map[string]string{
		"-t 10.0.0.1:80 -r 10.1.0.3:80": "drain",
		"-t 10.0.0.1:80 -r 10.1.0.4:80": "delete",
		"-t 10.0.0.1:80 -r 10.1.0.5:80": "draining",
		"-u 10.0.0.2:53 -r 10.1.0.9:53": "delete",
	},
}, {
	name:    "IPv6, with an excluded CIDR",
	family:  model.IPv6,
	exclude: "2001:db8::/48",
	have:    "-A -t [2001:db8:0:1::7]:80 -s rr\n-A -t [2001:db8:1::7]:80 -s rr\n-A -t 10.0.0.1:80 -s rr\n",
	lines:   []string{"-D -t [2001:db8:1::7]:80"},
}, {
	name:   "IPv6 real servers drain and go",
	family: model.IPv6,
	want:   "-A -t [fd00::10]:80 -s rr\n-a -t [fd00::10]:80 -r [fd00:1::1]:8080 -m -w 1\n",
	have: "-A -t [fd00::10]:80 -s rr\n-a -t [fd00::10]:80 -r [fd00:1::1]:8080 -m -w 1\n" +
		"-a -t [fd00::10]:80 -r [fd00:1::2]:8080 -m -w 1\n-a -t [fd00::10]:80 -r [fd00:1::3]:8080 -m -w 1\n",
	conns: map[string]syntax.Conns{"-t [fd00::10]:80 -r [fd00:1::2]:8080": {Active: 2}},
	lines: []string{"-e -t [fd00::10]:80 -r [fd00:1::2]:8080 -m -w 0", "-d -t [fd00::10]:80 -r [fd00:1::3]:8080"},
	retired: map[string]string{
		"-t [fd00::10]:80 -r [fd00:1::2]:8080": "drain",
		"-t [fd00::10]:80 -r [fd00:1::3]:8080": "delete",
	},
}, {
	name:   "inactive connections alone keep a TCP real server draining",
	family: model.IPv4,
	want:   "-A -t 10.0.0.1:80 -s rr\n",
	have:   "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 0\n",
	conns: map[string]syntax.Conns{
		"-t 10.0.0.1:80 -r 10.1.0.1:80": {Inactive: 1},
		"-t 10.0.0.1:80 -r 10.1.0.2:80": {Inactive: 7},
	},
	lines:   []string{"-e -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 0"},
	retired: map[string]string{"-t 10.0.0.1:80 -r 10.1.0.1:80": "drain", "-t 10.0.0.1:80 -r 10.1.0.2:80": "draining"},
}, {
	name:    "a drained real server goes once its connections are gone",
	family:  model.IPv4,
	want:    "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n",
	have:    "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 0\n",
	lines:   []string{"-d -t 10.0.0.1:80 -r 10.1.0.2:80"},
	retired: map[string]string{"-t 10.0.0.1:80 -r 10.1.0.2:80": "delete"},
}, {
	name:   "UDP and SCTP real servers go at once, connections or not",
	family: model.IPv4,
	want:   "-A -u 10.0.0.1:53 -s rr\n-A --sctp-service 10.0.0.1:9 -s rr\n",
	have: "-A -u 10.0.0.1:53 -s rr\n-a -u 10.0.0.1:53 -r 10.1.0.1:53 -m -w 1\n" +
		"-A --sctp-service 10.0.0.1:9 -s rr\n-a --sctp-service 10.0.0.1:9 -r 10.1.0.1:9 -m -w 0\n",
	conns: map[string]syntax.Conns{
		"-u 10.0.0.1:53 -r 10.1.0.1:53":           {Inactive: 9},
		"--sctp-service 10.0.0.1:9 -r 10.1.0.1:9": {Active: 3},
	},
	lines:   []string{"-d -u 10.0.0.1:53 -r 10.1.0.1:53", "-d --sctp-service 10.0.0.1:9 -r 10.1.0.1:9"},
	retired: map[string]string{"-u 10.0.0.1:53 -r 10.1.0.1:53": "delete", "--sctp-service 10.0.0.1:9 -r 10.1.0.1:9": "delete"},
}, {
	name:   "services edited in place: scheduler, persistence, flags; real servers: forwarding",
	family: model.IPv4,
	want: "-A -t 10.0.0.1:80 -s mh -b mh-port\n-A -t 10.0.0.2:80 -s rr -p 60\n-A -t 10.0.0.3:80 -s rr -p 10800\n" +
		"-a -t 10.0.0.3:80 -r 10.1.0.1:80 -m -w 1\n",
	have: "-A -t 10.0.0.1:80 -s mh\n-A -t 10.0.0.2:80 -s rr -p 10800\n-A -t 10.0.0.3:80 -s rr -p 10800\n" +
		"-a -t 10.0.0.3:80 -r 10.1.0.1:80 -g -w 1\n",
	lines: []string{"-E -t 10.0.0.1:80 -s mh -b mh-port", "-E -t 10.0.0.2:80 -s rr -p 60", "-e -t 10.0.0.3:80 -r 10.1.0.1:80 -m -w 1"},
}, {
	name:   "a node in step",
	family: model.IPv4,
	want:   "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-A -u 10.0.0.1:53 -s rr\n",
	have:   "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n-A -u 10.0.0.1:53 -s rr\n",
	conns:  map[string]syntax.Conns{"-t 10.0.0.1:80 -r 10.1.0.1:80": {Active: 5, Inactive: 5}},
}, {
	name:   "an empty node",
	family: model.IPv4,
	want:   "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1\n",
	lines:  []string{"-A -t 10.0.0.1:80 -s rr", "-a -t 10.0.0.1:80 -r 10.1.0.1:80 -m -w 1", "-a -t 10.0.0.1:80 -r 10.1.0.2:80 -m -w 1"},
}}

// The two IPVS planners agree: on each shared case, the Go planner and the script's
// awk program (run with every awk the script meets) give the same "ipvsadm -R" lines
// in the same order and the same decision on every real server no longer wanted; and
// each leaves a node that the next run of either does not change.
func TestPlannersAgree(t *testing.T) {
	for _, c := range reconcileCases {
		t.Run(c.name, func(t *testing.T) {
			want, have := c.node(t), c.haveState(t)
			ch, err := plan.Plan(have, want, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, retired := ipvsLines(ch), retiredMap(ch)
			if !slices.Equal(got, c.lines) {
				t.Errorf("Plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.lines, "\n"))
			}
			if fmt.Sprint(retired) != fmt.Sprint(orEmpty(c.retired)) {
				t.Errorf("Plan retires %v, want %v", retired, c.retired)
			}
			again, err := plan.Plan(ch.After, want, plan.Options{})
			if err != nil || len(ipvsLines(again)) != 0 {
				t.Errorf("Plan of the state it leaves: %v %q", err, ipvsLines(again))
			}
			for _, awk := range awks(t) {
				c.checkAWK(t, awk, have, ch.After)
			}
		})
	}
}

// checkAWK runs the awk program on the case and on the state the Go plan leaves.
func (c reconcileCase) checkAWK(t *testing.T, awk []string, have, after *plan.Have) {
	t.Helper()
	out, told := c.runReconcile(t, awk, c.have, listing(have))
	got := lines(out)
	if !slices.Equal(got, c.lines) {
		t.Errorf("%v:\n%s\nwant:\n%s", awk, out, strings.Join(c.lines, "\n"))
	}
	if strings.Count(told, "svcgen: ipvsadm ") != len(got) {
		t.Errorf("%v told on stderr:\n%s", awk, told)
	}
	if retired := awkRetired(t, c, got); fmt.Sprint(retired) != fmt.Sprint(orEmpty(c.retired)) {
		t.Errorf("%v retires %v, want %v", awk, retired, c.retired)
	}
	var next bytes.Buffer
	if err := syntax.WriteRules(&next, after.Services); err != nil {
		t.Fatal(err)
	}
	if out, _ := c.runReconcile(t, awk, next.String(), listing(after)); out != "" {
		t.Errorf("%v changes the state the Go plan leaves:\n%s", awk, out)
	}
}

func (c reconcileCase) runReconcile(t *testing.T, awk []string, have, list string) (stdout, stderr string) {
	t.Helper()
	var want bytes.Buffer
	if err := syntax.WriteRules(&want, c.node(t).Services); err != nil {
		t.Fatal(err)
	}
	family := "4"
	if c.family == model.IPv6 {
		family = "6"
	}
	return runAWK(t, awk, syntax.ReconcileProgram(), want.String()+"%%\n"+have+"%%\n"+list,
		"-v", "family="+family, "-v", "exclude="+c.exclude)
}

// node is the wanted state of the case.
func (c reconcileCase) node(t *testing.T) *syntax.Node {
	t.Helper()
	vss, err := syntax.ParseRulesBytes("want", []byte(c.want))
	if err != nil {
		t.Fatal(err)
	}
	n := &syntax.Node{Family: c.family, Services: vss}
	for _, e := range strings.Fields(c.exclude) {
		n.ExcludeCIDRs = append(n.ExcludeCIDRs, netip.MustParsePrefix(e))
	}
	return n
}

// haveState is the node of the case as apply reads it: firewall-mark services are
// never read (ipvs/syntax has no model for them), and kube-ipvs0 exists.
func (c reconcileCase) haveState(t *testing.T) *plan.Have {
	t.Helper()
	var kept []string
	for _, l := range lines(c.have) {
		if !strings.HasPrefix(l, "-A -f ") {
			kept = append(kept, l)
		}
	}
	vss, err := syntax.ParseRulesBytes("have", []byte(strings.Join(kept, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	h := &plan.Have{Link: true, Services: vss, Conns: map[syntax.RealID]syntax.Conns{}}
	for _, vs := range vss {
		for _, rs := range vs.Reals {
			if n, ok := c.conns[realName(vs.RealID(rs))]; ok {
				h.Conns[vs.RealID(rs)] = n
			}
		}
	}
	return h
}

func realName(id syntax.RealID) string {
	vs := &syntax.VirtualServer{Protocol: id.Service.Protocol, Address: id.Service.Address}
	return vs.Key() + " -r " + id.Real.String()
}

func ipvsLines(ch *plan.Change) []string {
	var out []string
	for _, op := range ch.Ops {
		if op.IsIPVS() {
			out = append(out, op.Line())
		}
	}
	return out
}

func retiredMap(ch *plan.Change) map[string]string {
	out := map[string]string{}
	for _, r := range ch.Retired {
		out[realName(r.ID)] = r.How.String()
	}
	return out
}

// awkRetired reads the awk program's decisions off its lines: for every real server
// of a wanted service that is no longer wanted, a "-w 0" edit drains it, "-d" deletes
// it, and no line leaves it draining.
func awkRetired(t *testing.T, c reconcileCase, out []string) map[string]string {
	t.Helper()
	want := map[string]bool{}
	for _, vs := range c.node(t).Services {
		want[vs.Key()] = true
		for _, rs := range vs.Reals {
			want[realName(vs.RealID(rs))] = true
		}
	}
	got := map[string]string{}
	for _, vs := range c.haveState(t).Services {
		for _, rs := range vs.Reals {
			name := realName(vs.RealID(rs))
			if !want[vs.Key()] || want[name] {
				continue
			}
			got[name] = "draining"
			for _, l := range out {
				switch {
				case l == "-d "+name:
					got[name] = "delete"
				case strings.HasPrefix(l, "-e "+name+" ") && strings.HasSuffix(l, " -w 0"):
					got[name] = "drain"
				}
			}
		}
	}
	return got
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// addressCases are shared by the planner and the script's addresses program: the same
// addresses bound and unbound, each list in the same order.
var addressCases = []struct {
	name     string
	ipv6     bool
	want     []string
	have     []string
	add, del []string
}{
	{name: "bind and unbind", want: []string{"10.0.0.1/32", "10.0.0.2/32"}, have: []string{"10.0.0.2/32", "10.0.0.9/32", "10.0.0.8/32"},
		add: []string{"10.0.0.1/32"}, del: []string{"10.0.0.9/32", "10.0.0.8/32"}},
	{name: "empty link", want: []string{"10.0.0.1/32", "10.0.0.3/32"}, add: []string{"10.0.0.1/32", "10.0.0.3/32"}},
	{name: "nothing wanted", have: []string{"10.0.0.1/32"}, del: []string{"10.0.0.1/32"}},
	{name: "IPv6", ipv6: true, want: []string{"fd00::1/128"}, have: []string{"fd00::2/128", "fd00::1/128"}, del: []string{"fd00::2/128"}},
	{name: "in step", want: []string{"10.0.0.1/32"}, have: []string{"10.0.0.1/32"}},
}

func TestAddressPlannersAgree(t *testing.T) {
	for _, c := range addressCases {
		t.Run(c.name, func(t *testing.T) {
			want := &syntax.Node{Addresses: prefixList(c.want)}
			ch, err := plan.Plan(&plan.Have{Link: true, Addresses: prefixList(c.have)}, want, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var add, del []string
			for _, op := range ch.Ops {
				switch op.Kind {
				case plan.AddAddress:
					add = append(add, op.Address.String())
				case plan.DeleteAddress:
					del = append(del, op.Address.String())
				}
			}
			if !slices.Equal(add, c.add) || !slices.Equal(del, c.del) {
				t.Errorf("Plan binds %q and unbinds %q, want %q and %q", add, del, c.add, c.del)
			}
			input := strings.Join(c.want, "\n") + "\n%%\n"
			inet := map[bool]string{false: "inet", true: "inet6"}[c.ipv6]
			for _, a := range c.have {
				input += "3: kube-ipvs0    " + inet + " " + a + " scope global kube-ipvs0\\       valid_lft forever preferred_lft forever\n"
			}
			var expect []string
			for _, a := range c.del {
				expect = append(expect, "address del "+a+" dev kube-ipvs0")
			}
			for _, a := range c.add {
				expect = append(expect, "address add "+a+" dev kube-ipvs0")
			}
			for _, awk := range awks(t) {
				out, _ := runAWK(t, awk, syntax.AddressesProgram(), input)
				if got := lines(out); !slices.Equal(got, expect) {
					t.Errorf("%v:\n%s\nwant:\n%s", awk, out, strings.Join(expect, "\n"))
				}
			}
		})
	}
}

func prefixList(s []string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// listing is "ipvsadm -Ln" of the node, with the connection counts.
func listing(h *plan.Have) string {
	var b strings.Builder
	b.WriteString("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	fwd := map[syntax.Forward]string{syntax.Masquerade: "Masq", syntax.Route: "Route", syntax.Tunnel: "Tunnel"}
	for _, vs := range h.Services {
		fmt.Fprintf(&b, "%s  %s %s", vs.Protocol, vs.Address, vs.Scheduler)
		if vs.Flags&syntax.FlagPersistent != 0 {
			fmt.Fprintf(&b, " persistent %d", vs.Timeout)
		}
		b.WriteString("\n")
		for _, rs := range vs.Reals {
			c := h.Conns[vs.RealID(rs)]
			fmt.Fprintf(&b, "  -> %-28s %-7s %-6d %-10d %d\n", rs.Address, fwd[rs.Forward], rs.Weight, c.Active, c.Inactive)
		}
	}
	return b.String()
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// awks are the awk implementations the script meets: Debian's (mawk) on nodes, and
// busybox's.
func awks(t *testing.T) [][]string {
	var out [][]string
	if p, err := exec.LookPath("awk"); err == nil {
		out = append(out, []string{p})
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out = append(out, []string{p, "awk"})
	}
	if len(out) == 0 {
		t.Skip("no awk")
	}
	return out
}

func runAWK(t *testing.T, awk []string, program, input string, vars ...string) (stdout, stderr string) {
	t.Helper()
	args := append(append([]string{}, awk[1:]...), vars...)
	cmd := exec.Command(awk[0], append(args, program)...)
	cmd.Stdin = strings.NewReader(input)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v: %s", awk, err, e.String())
	}
	return o.String(), e.String()
}
