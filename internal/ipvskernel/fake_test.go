package ipvskernel

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

func service(a string, reals ...string) *syntax.VirtualServer {
	vs := &syntax.VirtualServer{Protocol: model.TCP, Address: netip.MustParseAddrPort(a), Scheduler: "rr"}
	for _, r := range reals {
		vs.Reals = append(vs.Reals, syntax.RealServer{Address: netip.MustParseAddrPort(r), Forward: syntax.Masquerade, Weight: 1})
	}
	return vs
}

// The fake IPVS refuses what the kernel refuses, with the kernel's errors.
func TestFakeIPVSRefuses(t *testing.T) {
	f := NewFake()
	h, err := f.Kernel().OpenIPVS()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	vs := service("10.0.0.1:80", "10.1.0.1:80")
	if err := h.AddService(vs); err != nil {
		t.Fatal(err)
	}
	if err := h.AddReal(vs, vs.Reals[0]); err != nil {
		t.Fatal(err)
	}
	other := service("10.0.0.2:80")
	six := syntax.RealServer{Address: netip.MustParseAddrPort("[fd00::1]:80"), Forward: syntax.Masquerade, Weight: 1}
	bad := *other
	bad.Scheduler = "fancy"
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"a virtual server that exists", h.AddService(vs), syscall.EEXIST},
		{"an unknown scheduler", h.AddService(&bad), syscall.ENOENT},
		{"an edit of a missing virtual server", h.UpdateService(other), syscall.ESRCH},
		{"a delete of a missing virtual server", h.DeleteService(other), syscall.ESRCH},
		{"a real server of a missing virtual server", h.AddReal(other, vs.Reals[0]), syscall.ESRCH},
		{"a real server that exists", h.AddReal(vs, vs.Reals[0]), syscall.EEXIST},
		{"a real server of the other family", h.AddReal(vs, six), syscall.EINVAL},
		{"an edit of a missing real server", h.UpdateReal(vs, six), syscall.ENOENT},
		{"a delete of a missing real server", h.DeleteReal(vs, six), syscall.ENOENT},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
	f.SetConns(vs.RealID(vs.Reals[0]), syntax.Conns{Active: 1, Inactive: 2})
	vss, conns, err := h.Services()
	if err != nil || len(vss) != 1 || len(vss[0].Reals) != 1 || conns[vs.RealID(vs.Reals[0])] != (syntax.Conns{Active: 1, Inactive: 2}) {
		t.Errorf("Services: %v %v %v", vss, conns, err)
	}
	if err := h.DeleteService(vs); err != nil {
		t.Fatal(err)
	}
	if _, conns, err := h.Services(); err != nil || len(conns) != 0 {
		t.Errorf("the connections of a deleted virtual server are still counted: %v %v", conns, err)
	}
}

// ipset restore stops at the first failing line, the lines before it done.
func TestFakeSetsStopAtFailure(t *testing.T) {
	f := NewFake()
	sets := f.Kernel().Sets
	ctx := context.Background()
	in := "create A hash:ip family inet hashsize 1024 maxelem 65536\nadd A 10.0.0.1\nadd B 10.0.0.2\nadd A 10.0.0.3\n"
	err := sets.Restore(ctx, []byte(in))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "add B: the set does not exist") {
		t.Errorf("an entry for a missing set: %v", err)
	}
	got, err := sets.Save(ctx)
	if err != nil || len(got) != 1 || !slices.Equal(got[0].Entries, []string{"10.0.0.1"}) {
		t.Errorf("after the failed restore: %v %v", got, err)
	}
	if err := sets.Restore(ctx, []byte("add A 10.0.0.1,tcp:80\n")); err == nil {
		t.Error("an entry that does not fit hash:ip was taken")
	}
}

// The Nth change fails and changes nothing; the calls say what was asked.
func TestFakeFailAt(t *testing.T) {
	f := NewFake()
	k := f.Kernel()
	boom := errors.New("boom")
	f.FailAt(2, boom)
	p := netip.MustParsePrefix("10.0.0.1/32")
	if err := k.Links.AddDummy("kube-ipvs0"); err != nil {
		t.Fatal(err)
	}
	if err := k.Links.AddAddress("kube-ipvs0", p); !errors.Is(err, boom) {
		t.Errorf("second change: %v, want boom", err)
	}
	if addrs, ok, err := k.Links.Addresses("kube-ipvs0", false); err != nil || !ok || len(addrs) != 0 {
		t.Errorf("the failed change left %v (%v)", addrs, err)
	}
	if err := k.Links.AddAddress("kube-ipvs0", p); err != nil {
		t.Errorf("third change: %v", err)
	}
	want := []string{"ip link add kube-ipvs0 type dummy", "ip addr add 10.0.0.1/32 dev kube-ipvs0: boom", "ip addr add 10.0.0.1/32 dev kube-ipvs0"}
	if !slices.Equal(f.Calls(), want) {
		t.Errorf("calls %q, want %q", f.Calls(), want)
	}
}

func TestFakeLinksAndSysctls(t *testing.T) {
	k := NewFake().Kernel()
	p := netip.MustParsePrefix("10.0.0.1/32")
	if err := k.Links.AddAddress("kube-ipvs0", p); err == nil {
		t.Error("an address went onto a missing link")
	}
	if err := k.Links.AddDummy("kube-ipvs0"); err != nil {
		t.Fatal(err)
	}
	if err := k.Links.AddDummy("kube-ipvs0"); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("a link added twice: %v", err)
	}
	if err := k.Links.AddAddress("kube-ipvs0", p); err != nil {
		t.Fatal(err)
	}
	if err := k.Links.AddAddress("kube-ipvs0", p); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("an address bound twice: %v", err)
	}
	if err := k.Links.DeleteAddress("kube-ipvs0", netip.MustParsePrefix("10.0.0.2/32")); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("a missing address unbound: %v", err)
	}
	if err := k.Sysctls.Set("net.ipv4.vs.nonesuch", "1"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a missing sysctl set: %v", err)
	}
	if v, ok, err := k.Sysctls.Get("net.ipv4.vs.conntrack"); v != "0" || !ok || err != nil {
		t.Errorf("conntrack: %q %v %v", v, ok, err)
	}
}

// ProcSysctls reads and writes files under its root; a missing one is not an error.
func TestProcSysctls(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net/ipv4/vs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "net/ipv4/vs/conntrack"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := ProcSysctls{Root: root}
	if err := p.Set("net.ipv4.vs.conntrack", "1"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := p.Get("net.ipv4.vs.conntrack"); v != "1" || !ok || err != nil {
		t.Errorf("conntrack: %q %v %v", v, ok, err)
	}
	if _, ok, err := p.Get("net.ipv4.vs.nonesuch"); ok || err != nil {
		t.Errorf("a missing sysctl: %v %v", ok, err)
	}
}

// IPSetTool runs "ipset save" and "ipset restore -exist".
func TestIPSetTool(t *testing.T) {
	var ran []string
	tool := IPSetTool{Run: func(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
		ran = append(ran, name+" "+strings.Join(args, " ")+" <"+string(stdin))
		return []byte("create S hash:ip family inet hashsize 1024 maxelem 65536\nadd S 10.0.0.1\n"), nil
	}}
	sets, err := tool.Save(context.Background())
	if err != nil || len(sets) != 1 || sets[0].Entries[0] != "10.0.0.1" {
		t.Errorf("save: %v %v", sets, err)
	}
	if err := tool.Restore(context.Background(), []byte("add S 10.0.0.2\n")); err != nil {
		t.Fatal(err)
	}
	want := []string{"ipset save <", "ipset restore -exist <add S 10.0.0.2\n"}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}
