package nlbatch

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAsNft holds Encode to what nft 1.0.6 sent for the same transactions
// (testdata/partial-*.mnl: nft --check --debug=mnl -f partial-*.nft on a table of 30
// generated Services, with one endpoint moved in a Service with ClientIP affinity and
// one in a Service without; the v1.35 and v1.37 layouts): the same messages in the same
// order, attribute for attribute (see Comparable for the set ids). The real-kernel
// tests in e2e (TestNFTNetlinkEncodesAsNft) do the same for golden and random changes.
func TestAsNft(t *testing.T) {
	for _, v := range []string{"1.35", "1.37"} {
		script, err := os.ReadFile("testdata/partial-" + v + ".nft")
		if err != nil {
			t.Fatal(err)
		}
		dump, err := os.ReadFile("testdata/partial-" + v + ".mnl")
		if err != nil {
			t.Fatal(err)
		}
		sent, err := ParseMNL(dump)
		if err != nil {
			t.Fatal(err)
		}
		nft := Batch(sent)
		var enc Encoder
		msgs, err := enc.Encode(script)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		var ours []Sent
		for _, m := range msgs {
			ours = append(ours, Sent{Type: uint16(m.Header.Type), Data: m.Data})
		}
		want, got := Comparable(nft), Comparable(ours)
		if len(want) < 10 {
			t.Fatalf("%s: only %d messages read from nft's dump", v, len(want))
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, nft sent %d", v, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: message %d (script line %d):\n%s\nnft sent:\n%s", v, i, msgs[i].Line, got[i], want[i])
			}
		}
		// each operation's messages carry its line
		if !slices.IsSortedFunc(msgs, func(a, b Message) int { return a.Line - b.Line }) || msgs[0].Line != 1 {
			t.Errorf("%s: lines out of order", v)
		}
	}
}

// TestNotEncodable: what a partial sync does not write, and rule terms nlbatch does
// not know, are refused whole (the caller runs nft -f), naming the line.
func TestNotEncodable(t *testing.T) {
	for _, script := range []string{
		"add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n",
		"delete table ip kube-proxy\n",
		"add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n",
		"add rule ip kube-proxy external-X/y iifname cbr0 goto service-X/y\n",
		"add rule ip kube-proxy firewall-X/y ip saddr != { 10.0.0.0/8 , 1.2.3.4 } drop\n",
		"add rule ip kube-proxy nat-postrouting masquerade fully-random\n",
		"add rule ip kube-proxy filter-input ct state new jump firewall-check\n",
		"add rule ip kube-proxy c ip daddr 10.0.0.1 reject\n",
		"add map ip kube-proxy m { type ipv4_addr : verdict ; }\n",
		"add set ip kube-proxy s { type ipv4_addr ; flags interval ; }\n",
		"add element ip kube-proxy nodeport-ips { 10.0.0.0/8 }\n",
		"add chain ip kube-proxy ok\nadd rule ip kube-proxy ok ip6 saddr ::1 drop\n",
	} {
		var enc Encoder
		_, err := enc.Encode([]byte(script))
		if !errors.Is(err, ErrNotEncodable) {
			t.Errorf("%q: %v, want ErrNotEncodable", script, err)
		} else if !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("%q: %v, want the line named", script, err)
		}
	}
}

// TestEncodeForms: each term of the rules nlbatch knows becomes the expressions nft
// makes of it (by name, in order), and a rule's comment its user data.
func TestEncodeForms(t *testing.T) {
	for _, c := range []struct {
		rule  string
		exprs string
	}{
		{`ip saddr 10.1.2.3 jump mark-for-masquerade`, "payload cmp immediate"},
		{`ip daddr 10.0.0.1 ip saddr != 10.0.0.0/9 jump mark-for-masquerade`, "payload cmp payload bitwise cmp immediate"},
		{`ip saddr 10.0.0.0/16 goto service-X/y comment "short-circuit pod traffic"`, "payload cmp immediate"},
		{`meta l4proto tcp dnat to 10.0.0.1:80`, "meta cmp immediate immediate nat"},
		{`fib saddr type local mark set mark or 0x4000 comment "masquerade"`, "fib cmp meta bitwise meta"},
		{`update @affinity-X { ip saddr }`, "payload dynset"},
		{`ip saddr @affinity-X goto endpoint-X`, "payload lookup immediate"},
		{`numgen random mod 2 vmap { 0 : goto a , 1 : goto b }`, "numgen lookup"},
		{`meta l4proto udp dnat ip addr . port to numgen random mod 1 map { 0 : 10.0.0.1 . 53 }`, "meta cmp numgen lookup nat"},
		{`drop`, "immediate"},
	} {
		var enc Encoder
		msgs, err := enc.Encode([]byte("add rule ip kube-proxy c " + c.rule + "\n"))
		if err != nil {
			t.Errorf("%s: %v", c.rule, err)
			continue
		}
		rule := msgs[len(msgs)-1]
		if rule.Header.Type&0xff != unix.NFT_MSG_NEWRULE {
			t.Fatalf("%s: last message %d, want a rule", c.rule, rule.Header.Type)
		}
		tree := Tree(uint16(rule.Header.Type), rule.Data)
		var names []string
		for l := range strings.Lines(tree) {
			f := strings.Fields(l)
			if len(f) == 2 && f[0] == "1" && len(l)-len(strings.TrimLeft(l, " ")) == 6 {
				if name := exprName(f[1]); name != "" {
					names = append(names, name)
				}
			}
		}
		if got := strings.Join(names, " "); got != c.exprs {
			t.Errorf("%s: expressions %q, want %q\n%s", c.rule, got, c.exprs, tree)
		}
		if strings.Contains(c.rule, "comment") != strings.Contains(tree, "\n  7 00") {
			t.Errorf("%s: comment and user data do not agree\n%s", c.rule, tree)
		}
		if anon := strings.Contains(c.rule, "{ 0"); anon != (len(msgs) == 3) {
			t.Errorf("%s: %d messages (an anonymous map is a set and its elements before the rule)", c.rule, len(msgs))
		}
	}
}

// exprName reads an expression's name from Tree's hex of it ("7061796c6f616400").
func exprName(hex string) string {
	var b []byte
	for i := 0; i+1 < len(hex); i += 2 {
		var c byte
		for _, h := range hex[i : i+2] {
			c <<= 4
			switch {
			case h >= '0' && h <= '9':
				c |= byte(h - '0')
			case h >= 'a' && h <= 'f':
				c |= byte(h - 'a' + 10)
			default:
				return ""
			}
		}
		b = append(b, c)
	}
	if len(b) == 0 || b[len(b)-1] != 0 {
		return ""
	}
	return string(b[:len(b)-1])
}
