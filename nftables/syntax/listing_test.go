package syntax

import (
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// A listing is read back in knftables' spelling where nft only respells a rule; other
// tables are passed over; dynamic sets' entries are state, not ruleset.
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
	m := st.Maps[ServiceIPsMap]
	if len(m.Elements) != 2 || strings.Join(m.Elements[1].Key, " . ") != "fd00::11 . udp . 53" || m.Elements[1].Value[0] != "drop" || *m.Elements[1].Comment != "ns/svc:dns" {
		t.Errorf("map elements read as %+v", m.Elements)
	}
}
