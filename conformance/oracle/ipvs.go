package oracle

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/kubernetes/pkg/proxy"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	ipvsnetlinktest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// dummyDevice is the interface the ipvs proxier binds every virtual address to
// (defaultDummyDevice in pkg/proxy/ipvs).
const dummyDevice = "kube-ipvs0"

// ipvsFakes are upstream's fakes for what the ipvs proxier changes on a node and this
// kernel cannot hold: it has no IPVS, no dummy links, and no xt_ipvs (which the
// proxier's iptables rules may use); the sysctls are faked so that the proxier can
// set those of IPVS. The oracle writes their state in the formats the real tools
// print. The sets are real: ipsets work here, so the proxier's own ipset runner makes
// them in the namespace, with its own defaults, for "ipset save" to read.
//
// A dual-stack run has one IPVS, one ipset runner and one sysctl for both families,
// as createProxier passes NewDualStackProxier, and an iptables and a netlink handle
// per family, as each family's NewProxier has.
type ipvsFakes struct {
	ipvs     *ipvstest.FakeIPVS
	sysctl   *sysctltest.Fake
	families []*familyFakes // in Params.Families' order
	dual     bool
}

// familyFakes are one family's fakes.
type familyFakes struct {
	family  v1.IPFamily
	ipt     utiliptables.Interface // the release's FakeIPTables behind quotedArgs
	netlink *ipvsnetlinktest.FakeNetlinkHandle
}

// newIPVSFakes makes the fakes and puts them in p. Each fake netlink handle is given
// the addresses of the namespace's interfaces, which is what the real one would list.
func newIPVSFakes(r Release, p *Params) (*ipvsFakes, error) {
	f := &ipvsFakes{ipvs: ipvstest.NewFake(), sysctl: sysctltest.NewFake(), dual: p.DualStack}
	p.IPTables = map[v1.IPFamily]utiliptables.Interface{}
	for _, family := range p.Families() {
		ff := &familyFakes{
			family:  family,
			ipt:     quotedArgs{r.FakeIPTables(family, r.RandomFully(utiliptables.New(protocolOf(family))))},
			netlink: ipvsnetlinktest.NewFakeNetlinkHandle(family == v1.IPv6Protocol),
		}
		if err := localAddresses(ff.netlink); err != nil {
			return nil, err
		}
		f.families = append(f.families, ff)
		p.IPTables[family] = ff.ipt
	}
	p.IPVS, p.IPSet, p.Sysctl = f.ipvs, utilipset.New(), f.sysctl
	return f, nil
}

// localAddresses gives the fake the namespace's interfaces and their addresses.
func localAddresses(h *ipvsnetlinktest.FakeNetlinkHandle) error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing the namespace's interfaces: %w", err)
	}
	for _, itf := range ifaces {
		addrs, err := itf.Addrs()
		if err != nil {
			return fmt.Errorf("addresses of %s: %w", itf.Name, err)
		}
		var ips []string
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				ips = append(ips, ipn.IP.String())
			}
		}
		if err := h.SetLocalAddresses(itf.Name, ips...); err != nil {
			return err
		}
	}
	return nil
}

// metaFields are the fields of pkg/proxy/metaproxier's metaProxier, which
// NewDualStackProxier returns, that hold each family's proxier.
var metaFields = map[v1.IPFamily]string{v1.IPv4Protocol: "ipv4Proxier", v1.IPv6Protocol: "ipv6Proxier"}

// inject puts each family's fake netlink handle into its proxier. NewProxier makes
// its own real handle (NewNetLinkHandle) into the unexported field netlinkHandle,
// with no argument to pass one; upstream's tests build the Proxier struct by hand
// instead, which would skip NewProxier. Nothing uses the handle before the first
// sync, so replacing it right after NewProxier is the one seam that keeps NewProxier
// whole. A dual-stack run's proxiers are inside the metaProxier.
func (f *ipvsFakes) inject(p proxy.Provider) error {
	if !f.dual {
		return injectNetlink(p, f.families[0].netlink)
	}
	for _, ff := range f.families {
		inner, err := unexported(p, metaFields[ff.family])
		if err != nil {
			return fmt.Errorf("ipvs NewDualStackProxier: %w", err)
		}
		provider, ok := inner.Interface().(proxy.Provider)
		if !ok {
			return fmt.Errorf("ipvs NewDualStackProxier: %s is a %s, not a proxy.Provider", metaFields[ff.family], inner.Type())
		}
		if err := injectNetlink(provider, ff.netlink); err != nil {
			return err
		}
	}
	return nil
}

// injectNetlink sets one ipvs Proxier's netlinkHandle to fake.
func injectNetlink(p proxy.Provider, fake *ipvsnetlinktest.FakeNetlinkHandle) error {
	field, err := unexported(p, "netlinkHandle")
	if err != nil {
		return fmt.Errorf("the oracle cannot fake kube-ipvs0: %w", err)
	}
	v := reflect.ValueOf(fake)
	if !v.Type().AssignableTo(field.Type()) {
		return fmt.Errorf("the ipvs Proxier's netlinkHandle is a %s, which the fake (%s) does not implement", field.Type(), v.Type())
	}
	field.Set(v)
	return nil
}

// unexported is the settable field name of the struct p points to.
func unexported(p any, name string) (reflect.Value, error) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("a %T, not a pointer to a struct", p)
	}
	field := v.Elem().FieldByName(name)
	if !field.IsValid() {
		return reflect.Value{}, fmt.Errorf("%T has no field %s any more", p, name)
	}
	return reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem(), nil
}

// quotedArgs passes rules the proxier ensures one by one (its jumps) to the fake
// with arguments that hold spaces quoted, as iptables-save would print them: the
// fake joins arguments with spaces, which would lose where a --comment ends.
type quotedArgs struct{ utiliptables.Interface }

func (q quotedArgs) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	return q.Interface.EnsureRule(pos, table, chain, quote(args)...)
}

func (q quotedArgs) DeleteRule(table utiliptables.Table, chain utiliptables.Chain, args ...string) error {
	return q.Interface.DeleteRule(table, chain, quote(args)...)
}

func quote(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if strings.ContainsAny(a, " \t\"") || a == "" {
			out[i] = strconv.Quote(a)
		}
	}
	return out
}

// write leaves the fakes' state in dir (a dual-stack run's in dir/v4 and dir/v6, as
// svcgen compile --split writes it), in the formats of the real tools:
// ipvsadm.rules ("ipvsadm -Sn" of the family's virtual servers), iptables.rules
// ("iptables-save" or "ip6tables-save" of every table), addresses (kube-ipvs0's of
// the family, one prefix a line) and sysctl.conf (the sysctls the proxiers set,
// "name = value": the node's, in each family's folder). The sets are in the
// namespace.
func (f *ipvsFakes) write(dir string) error {
	if dir == "" {
		return fmt.Errorf("ipvs mode needs -out DIR for the fakes' state")
	}
	for _, ff := range f.families {
		out := dir
		if f.dual {
			out = filepath.Join(dir, suffix(ff.family))
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
		}
		if err := f.writeFamily(ff, out); err != nil {
			return err
		}
	}
	return nil
}

// suffix is svcgen's name of a family's outputs: v4 or v6.
func suffix(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return "v6"
	}
	return "v4"
}

func (f *ipvsFakes) writeFamily(ff *familyFakes, dir string) error {
	var ipt bytes.Buffer
	if err := ff.ipt.SaveInto("", &ipt); err != nil {
		return fmt.Errorf("saving the fake %s: %w", protocolOf(ff.family), err)
	}
	rules, err := f.ipvsRules(ff.family)
	if err != nil {
		return err
	}
	addrs, err := ff.addresses()
	if err != nil {
		return err
	}
	files := map[string]string{
		"ipvsadm.rules":  rules,
		"iptables.rules": ipt.String(),
		"addresses":      addrs,
		"sysctl.conf":    f.sysctls(),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ipvsRules prints the family's virtual and real servers as "ipvsadm -Sn" does
// (services sorted, each followed by its real servers).
func (f *ipvsFakes) ipvsRules(family v1.IPFamily) (string, error) {
	vss, err := f.ipvs.GetVirtualServers()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, vs := range vss {
		if (vs.Address.To4() == nil) != (family == v1.IPv6Protocol) {
			continue
		}
		key := serviceKey(vs)
		lines = append(lines, serviceLine(key, vs))
		rss, err := f.ipvs.GetRealServers(vs)
		if err != nil {
			return "", err
		}
		for _, rs := range rss {
			lines = append(lines, fmt.Sprintf("-a %s -r %s -m -w %d", key, hostPort(rs.Address, rs.Port), rs.Weight))
		}
	}
	sort.Strings(lines)
	return joinLines(lines), nil
}

func serviceKey(vs *utilipvs.VirtualServer) string {
	sw := "-t"
	switch vs.Protocol {
	case "UDP":
		sw = "-u"
	case "SCTP":
		sw = "--sctp-service"
	}
	return sw + " " + hostPort(vs.Address, vs.Port)
}

// serviceLine is an "-A" line; -b names the scheduler flags as ipvsadm does.
func serviceLine(key string, vs *utilipvs.VirtualServer) string {
	line := "-A " + key + " -s " + vs.Scheduler
	if vs.Flags&utilipvs.FlagPersistent != 0 {
		line += fmt.Sprintf(" -p %d", vs.Timeout)
	}
	var flags []string
	for _, bit := range []struct {
		mask        utilipvs.ServiceFlags
		sh, generic string
	}{{0x8, "-fallback", "flag-1"}, {0x10, "-port", "flag-2"}, {0x20, "", "flag-3"}} {
		if vs.Flags&bit.mask == 0 {
			continue
		}
		if (vs.Scheduler == "sh" || vs.Scheduler == "mh") && bit.sh != "" {
			flags = append(flags, vs.Scheduler+bit.sh)
		} else {
			flags = append(flags, bit.generic)
		}
	}
	if len(flags) > 0 {
		line += " -b " + strings.Join(flags, ",")
	}
	return line
}

func hostPort(ip net.IP, port uint16) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

// addresses are kube-ipvs0's as the family's handle lists them, each with the host
// prefix length EnsureAddressBind gives it.
func (ff *familyFakes) addresses() (string, error) {
	addrs, err := ff.netlink.ListBindAddress(dummyDevice)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", dummyDevice, err)
	}
	bits := "/32"
	if ff.family == v1.IPv6Protocol {
		bits = "/128"
	}
	var lines []string
	for _, a := range addrs {
		lines = append(lines, a+bits)
	}
	sort.Strings(lines)
	return joinLines(lines), nil
}

func (f *ipvsFakes) sysctls() string {
	var lines []string
	for name, v := range f.sysctl.Settings {
		lines = append(lines, fmt.Sprintf("%s = %d", strings.ReplaceAll(name, "/", "."), v))
	}
	sort.Strings(lines)
	return joinLines(lines)
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
