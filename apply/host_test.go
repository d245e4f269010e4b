package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/model"
)

// HostFamilies follows kube-proxy's platformCheckSupported: a family whose tool does
// not work, or IPv6 on a kernel without it, is left out with a warning; the primary
// family left out, or every family, is an error; in nftables mode a family whose
// table cannot be made is an error (kube-proxy's proxier would not start).
func TestHostFamilies(t *testing.T) {
	ctx := context.Background()
	both := []model.IPFamily{model.IPv4, model.IPv6}
	iptables := func(absent4, absent6 error) []Backend {
		var out []Backend
		for i, absent := range []error{absent4, absent6} {
			b, fake := fakeBackend(t, "", 0)
			b.IPv6, fake.Absent = i == 1, absent
			out = append(out, b)
		}
		return out
	}
	nft := func(refuse func([]byte) error) []Backend {
		var out []Backend
		for _, fam := range both {
			b := NewNFTables(fam)
			b.Kernel = &FakeNFT{Refuse: refuse}
			out = append(out, b)
		}
		return out
	}
	ipvs := func(absent6 error) []Backend {
		var out []Backend
		for i, b := range iptables(nil, absent6) {
			out = append(out, &IPVS{IPv6: i == 1, tables: b.(*IPTables)})
		}
		return out
	}
	noIPv6 := func() error { return errors.New("IPv6 is disabled (net.ipv6.conf.all.disable_ipv6 = 1)") }
	noTool := errors.New("ip6tables: can't initialize ip6tables table `nat'")
	for _, tc := range []struct {
		name     string
		backends []Backend
		primary  model.IPFamily
		ipv6     func() error
		keep     []bool
		warning  string // why IPv6 is left out ("" when kept)
		err      string
	}{
		{name: "iptables, both work", backends: iptables(nil, nil), primary: model.IPv4, keep: []bool{true, true}},
		{name: "no ip6tables", backends: iptables(nil, noTool), primary: model.IPv4, keep: []bool{true, false},
			warning: "IPv6 left out, as kube-proxy runs single-stack on this host: no support for the IP family on this host: ip6tables cannot be used: ip6tables: can't initialize"},
		{name: "no ip6tables, IPv6 primary", backends: iptables(nil, noTool), primary: model.IPv6,
			err: "no support for the primary IP family IPv6 (kube-proxy would not start)"},
		{name: "neither tool", backends: iptables(noTool, noTool), primary: model.IPv4,
			err: "none of the run's IP families can be programmed on this host: no support for the IP family on this host: iptables cannot be used"},
		{name: "IPv6 disabled", backends: iptables(nil, nil), primary: model.IPv4, ipv6: noIPv6, keep: []bool{true, false},
			warning: "IPv6 left out, as kube-proxy runs single-stack on this host: no support for the IP family on this host: IPv6 is disabled"},
		{name: "nftables, IPv6 disabled", backends: nft(nil), primary: model.IPv4, ipv6: noIPv6, keep: []bool{true, false}, warning: "IPv6 left out"},
		{name: "nftables, both", backends: nft(nil), primary: model.IPv4, keep: []bool{true, true}},
		{name: "nftables, no ip6 table", primary: model.IPv4, backends: nft(func(s []byte) error {
			if strings.Contains(string(s), "ip6") {
				return errors.New("Error: Could not process rule: Operation not supported")
			}
			return nil
		}), err: "nftables (IPv6): cannot make the ip6 kube-proxy table: Error: Could not process rule"},
		{name: "ipvs, no ip6tables", backends: ipvs(noTool), primary: model.IPv4, keep: []bool{true, false}, warning: "ip6tables cannot be used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, left, err := HostFamilies(ctx, both, tc.backends, tc.primary, tc.ipv6)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keep) != 2 || keep[0] != tc.keep[0] || keep[1] != tc.keep[1] {
				t.Errorf("keep %v, want %v", keep, tc.keep)
			}
			switch {
			case len(left) != 2 || left[0] != "":
				t.Errorf("left %q, want IPv4 kept", left)
			case tc.warning == "" && left[1] != "":
				t.Errorf("IPv6 left out: %q, want it kept", left[1])
			case tc.warning != "" && !strings.Contains(left[1], tc.warning):
				t.Errorf("IPv6 left out: %q, want %q", left[1], tc.warning)
			}
		})
	}
}

// A single-family run on a host without that family's tool: kube-proxy would not
// start; a single IPv6 run on a kernel without IPv6 neither.
func TestHostFamiliesSingle(t *testing.T) {
	b, fake := fakeBackend(t, "", 0)
	fake.Absent = errors.New("iptables: command not found")
	if _, _, err := HostFamilies(context.Background(), []model.IPFamily{model.IPv4}, []Backend{b}, model.IPv4, nil); err == nil || !strings.Contains(err.Error(), "iptables cannot be used") {
		t.Errorf("err %v", err)
	}
	b6, _ := fakeBackend(t, "", 0)
	b6.IPv6 = true
	if _, _, err := HostFamilies(context.Background(), []model.IPFamily{model.IPv6}, []Backend{b6}, model.IPv6, func() error { return errors.New("no /proc/net/if_inet6") }); err == nil || !strings.Contains(err.Error(), "none of the run's IP families can be programmed on this host: no support for the IP family on this host: no /proc/net/if_inet6") {
		t.Errorf("err %v", err)
	}
}
