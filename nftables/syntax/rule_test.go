package syntax

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// mustParse reads a rule of an IPv4 table (IPv6 when it names ip6).
func mustParse(t *testing.T, text string) *Rule {
	t.Helper()
	family := knftables.IPv4Family
	if slices.Contains(tokens(text), "ip6") {
		family = knftables.IPv6Family
	}
	r, err := ParseRule(text, family)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Each rule is written as knftables writes it (svcgen, kube-proxy) and as nft lists it
// back; both spellings are the same rule. The rules of every layout svcgen reads are
// here: v1.34/v1.35's and the constructs of v1.36 and v1.37.
var spellings = []struct{ written, listed string }{
	{"ct state new jump firewall-check", "ct state new jump firewall-check"},
	{"mark set mark or 0x00004000", "meta mark set meta mark | 0x00004000"},
	{"mark set mark or 0x4000", "meta mark set meta mark | 0x00004000"},
	{"mark and 0x00004000 == 0 return", "meta mark & 0x00004000 == 0x00000000 return"},
	{"mark set mark xor 0x00004000", "meta mark set meta mark ^ 0x00004000"},
	{"masquerade fully-random", "masquerade fully-random"},
	{"ip daddr { 172.30.0.0/16,172.50.0.0/16 } drop", "ip daddr { 172.30.0.0/16, 172.50.0.0/16 } drop"},
	{"ip daddr { 198.19.0.0/16 } drop", "ip daddr 198.19.0.0/16 drop"},
	{"ip saddr != { 192.0.2.0/24 , 198.51.100.7 } drop", "ip saddr != { 198.51.100.7, 192.0.2.0/24 } drop"},
	{"ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports", "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"},
	{"fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports", "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"},
	{"iifname veth* goto service-X", `iifname "veth*" goto service-X`},
	{"iifname != cbr0 jump mark-for-masquerade", `iifname != "cbr0" jump mark-for-masquerade`},
	{"numgen random mod 2 vmap { 0 : goto a , 1 : goto b }", "numgen random mod 2 vmap { 0 : goto a, 1 : goto b }"},
	{"update @affinity-X { ip saddr }", "update @affinity-X { ip saddr }"},
	{"meta l4proto tcp dnat to 10.180.0.1:80", "meta l4proto tcp dnat ip to 10.180.0.1:80"},
	{"meta l4proto tcp dnat to [fd00::1]:80", "meta l4proto tcp dnat ip6 to [fd00::1]:80"},
	{"tcp dport 80 reject", "tcp dport 80 reject with icmp type port-unreachable"},
	// v1.36: inline marks, the hairpin set, DNAT from the service chain.
	{"ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x4000", "ip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000"},
	{"fib saddr type local mark set mark or 0x4000", "fib saddr type local meta mark set meta mark | 0x00004000"},
	{"mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random", "meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random"},
	{"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random", "ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random"},
	{"meta l4proto tcp dnat to numgen random mod 2 map { 0 : 10.180.0.4 . 80 , 1 : 10.180.0.5 . 80 }", "meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }"},
	{"meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.4 . 80 , 1 : 10.180.0.5 . 80 }", "meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }"},
	// v1.37: localhost NodePorts.
	{"ip daddr 127.0.0.0/8 meta l4proto . th dport vmap @localhost-nodeport-reject-ports", "ip daddr 127.0.0.0/8 meta l4proto . th dport vmap @localhost-nodeport-reject-ports"},
	{`counter name "localhost-nodeport-rejected-tcp" reject`, `counter name "localhost-nodeport-rejected-tcp" reject`},
}

func TestParseRuleSpellings(t *testing.T) {
	for _, s := range spellings {
		written, listed := mustParse(t, s.written), mustParse(t, s.listed)
		if !reflect.DeepEqual(written, listed) {
			t.Errorf("%q reads as\n%+v\nand nft's listing %q as\n%+v", s.written, written, s.listed, listed)
		}
		if r := mustParse(t, respell(s.listed)); !reflect.DeepEqual(r, written) {
			t.Errorf("%q respelled as %q reads otherwise", s.listed, respell(s.listed))
		}
	}
}

// What the rules mean, for a few that the tracer leans on.
func TestParseRuleMeaning(t *testing.T) {
	ap := netip.MustParseAddrPort
	for text, want := range map[string]*Rule{
		"ip daddr . meta l4proto . th dport vmap @service-ips": {
			Verdict: Verdict{Kind: Vmap, Map: "service-ips", Key: []Field{DstAddr, L4Proto, DstPort}},
		},
		"ip saddr 10.0.0.0/8 iifname != cbr0 goto a": {
			Matches: []Match{{Kind: MatchAddr, Field: SrcAddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, {Kind: MatchValue, Field: InIface, Value: "cbr0", Not: true}},
			Verdict: Verdict{Kind: Goto, Chain: "a"},
		},
		"mark and 0x4000 == 0 return": {
			Matches: []Match{{Kind: MatchMark, Mask: 0x4000}},
			Verdict: Verdict{Kind: Return},
		},
		"tcp dport 80 drop": {
			Matches: []Match{{Kind: MatchValue, Field: L4Proto, Value: "tcp"}, {Kind: MatchValue, Field: DstPort, Value: "80"}},
			Verdict: Verdict{Kind: Drop},
		},
		"numgen random mod 2 vmap { 1 : goto b , 0 : jump a }": {
			Verdict: Verdict{Kind: Numgen, Entries: []Verdict{{Kind: Jump, Chain: "a"}, {Kind: Goto, Chain: "b"}}},
		},
		"meta l4proto udp dnat to numgen random mod 2 map { 0 : 10.180.0.4 . 53 , 1 : 10.180.0.5 . 53 }": {
			Matches: []Match{{Kind: MatchValue, Field: L4Proto, Value: "udp"}},
			Stmts:   []Stmt{{Kind: StmtDNAT, To: []netip.AddrPort{ap("10.180.0.4:53"), ap("10.180.0.5:53")}}},
			Verdict: Verdict{Kind: Accept},
		},
		"ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random": {
			Matches: []Match{{Kind: MatchCtDNAT}, {Kind: MatchSet, Key: []Field{SrcAddr, DstAddr, L4Proto, DstPort}, Set: "hairpin-connections"}},
			Stmts:   []Stmt{{Kind: StmtMasquerade}},
			Verdict: Verdict{Kind: Accept},
		},
		"update @affinity-X { ip6 saddr }": {
			Stmts: []Stmt{{Kind: StmtUpdate, Set: "affinity-X", Key: []Field{SrcAddr}}},
		},
	} {
		if got := mustParse(t, text); !reflect.DeepEqual(got, want) {
			t.Errorf("%q reads as\n%+v\nwant\n%+v", text, got, want)
		}
	}
}

// A rule the parser does not know is an error: a reader never passes over it.
func TestParseRuleRefuses(t *testing.T) {
	for _, rule := range []string{
		"ip daddr 10.0.0.1 counter packets 3 bytes 4 accept", // counters with values: not kube-proxy's
		"tcp flags syn accept",
		"numgen random mod 2 vmap { 0 : goto a , 2 : goto b }",
		"numgen random mod 3 vmap { 0 : goto a , 1 : goto b }",
		"ip daddr 10.0.0.300 accept",
		"ip6 daddr fd00::1 accept", // another family's field in an ip table
		"accept drop",
		"ip saddr . ip daddr 10.0.0.1",
		"mark set mark plus 1",
		"ip daddr { 10.0.0.1",
		"jump",
		"dnat to nowhere",
	} {
		if r, err := ParseRule(rule, knftables.IPv4Family); err == nil {
			t.Errorf("%q was read as %+v; the parser must refuse rules it does not know", rule, r)
		}
	}
}

// The lexer's references (what a script's rules name, for any rule) are the parser's
// for the rules it knows.
func TestRefsAgree(t *testing.T) {
	for _, s := range spellings {
		for _, text := range []string{s.written, s.listed} {
			var lexical []Ref
			ruleRefs(text, func(kind RefKind, name string) { lexical = append(lexical, Ref{kind, name}) })
			if parsed := mustParse(t, text).Refs(); !sameRefs(lexical, parsed) {
				t.Errorf("%q: the lexer finds %v, the parser %v", text, lexical, parsed)
			}
		}
	}
}

// sameRefs compares references as sets: the lexer finds them in text order, the
// parser by kind.
func sameRefs(a, b []Ref) bool {
	key := func(r Ref) string { return string(r.Kind) + " " + r.Name }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// Canonical undoes what nft's listing changes, and keeps apart what differs.
func TestCanonical(t *testing.T) {
	same := map[string]bool{
		"ip daddr { 198.19.0.0/16 } drop|ip daddr 198.19.0.0/16 drop":                                               true,
		"ip saddr != { 192.0.2.0/24 , 198.51.100.7 } drop|ip saddr != { 198.51.100.7, 192.0.2.0/24 } drop":          true,
		"ip daddr { 172.30.0.0/16,172.50.0.0/16 } drop|ip daddr {172.30.0.0/16, 172.50.0.0/16} drop":                true,
		"numgen random mod 2 vmap { 0 : goto a , 1 : goto b }|numgen  random mod 2 vmap { 1 : goto b, 0 : goto a }": true,
		"masquerade|masquerade fully-random":                                                                        false,
		"ip daddr 10.0.0.1 drop|ip daddr 10.0.0.2 drop":                                                             false,
		"reject|reject with tcp reset":                                                                              false,
		// The kernel merges an interval set: a LoadBalancer's VIP inside its source range.
		"ip saddr != { 203.0.113.0/24 , 203.0.113.10 } drop|ip saddr != 203.0.113.0/24 drop": true,
		"ip saddr != { 10.0.0.0/25 , 10.0.0.128/25 } drop|ip saddr != 10.0.0.0/24 drop":      true,
		"ip saddr != { 10.0.0.0/25 , 10.0.1.0/25 } drop|ip saddr != 10.0.0.0/24 drop":        false,
		"ip saddr { 10.0.0.1 , 10.0.0.2 , 10.0.0.3 } drop|ip saddr 10.0.0.1-10.0.0.3 drop":   true,
		"ip6 saddr != { 2001:db8::/64 , 2001:db8::5 } drop|ip6 saddr != 2001:db8::/64 drop":  true,
		"tcp dport { 80 , 81 } drop|tcp dport { 81 , 80 } drop":                              true,
		"ip saddr { 10.0.0.0/8 , 192.0.2.1 } drop|ip saddr { 10.0.0.0/8 , 192.0.2.2 } drop":  false,
	}
	for pair, want := range same {
		a, b, _ := strings.Cut(pair, "|")
		if got := Canonical(a) == Canonical(b); got != want {
			t.Errorf("Canonical(%q) = %q, Canonical(%q) = %q; the same: %v, want %v", a, Canonical(a), b, Canonical(b), got, want)
		}
	}
	if got := Canonical("ip daddr @cluster-ips reject"); got != "ip daddr @cluster-ips reject" {
		t.Errorf("a plain rule is its own canonical form, got %q", got)
	}
}

func TestParseVerdict(t *testing.T) {
	for text, want := range map[string]Verdict{
		"goto reject-chain": {Kind: Goto, Chain: "reject-chain"},
		"jump a":            {Kind: Jump, Chain: "a"},
		"drop":              {Kind: Drop},
	} {
		if got, err := ParseVerdict(text); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseVerdict(%q) = %+v, %v; want %+v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "goto", "10.0.0.1 . 80", "continue a"} {
		if _, err := ParseVerdict(bad); err == nil {
			t.Errorf("ParseVerdict(%q) read it", bad)
		}
	}
}
