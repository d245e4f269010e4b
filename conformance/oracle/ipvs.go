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
type ipvsFakes struct {
	ipt     utiliptables.Interface // the release's FakeIPTables behind quotedArgs
	ipvs    *ipvstest.FakeIPVS
	sysctl  *sysctltest.Fake
	netlink *ipvsnetlinktest.FakeNetlinkHandle
	family  v1.IPFamily
}

// newIPVSFakes makes the fakes and puts them in p. The fake netlink handle is given
// the addresses of the namespace's interfaces, which is what the real one would list.
func newIPVSFakes(r Release, p *Params) (*ipvsFakes, error) {
	f := &ipvsFakes{
		ipt:     quotedArgs{r.FakeIPTables(p.Family, r.RandomFully(utiliptables.New(protocolOf(p.Family))))},
		ipvs:    ipvstest.NewFake(),
		sysctl:  sysctltest.NewFake(),
		netlink: ipvsnetlinktest.NewFakeNetlinkHandle(p.Family == v1.IPv6Protocol),
		family:  p.Family,
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing the namespace's interfaces: %w", err)
	}
	for _, itf := range ifaces {
		addrs, err := itf.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", itf.Name, err)
		}
		var ips []string
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				ips = append(ips, ipn.IP.String())
			}
		}
		if err := f.netlink.SetLocalAddresses(itf.Name, ips...); err != nil {
			return nil, err
		}
	}
	p.IPTables, p.IPVS, p.IPSet, p.Sysctl = f.ipt, f.ipvs, utilipset.New(), f.sysctl
	return f, nil
}

// inject puts the fake netlink handle into the proxier. NewProxier makes its own
// real handle (NewNetLinkHandle) into the unexported field netlinkHandle, with no
// argument to pass one; upstream's tests build the Proxier struct by hand instead,
// which would skip NewProxier. Nothing uses the handle before the first sync, so
// replacing it right after NewProxier is the one seam that keeps NewProxier whole.
func (f *ipvsFakes) inject(p proxy.Provider) error {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("ipvs NewProxier returned a %T, not a pointer to the Proxier struct", p)
	}
	field := v.Elem().FieldByName("netlinkHandle")
	if !field.IsValid() {
		return fmt.Errorf("the ipvs Proxier (%T) has no netlinkHandle field any more: the oracle cannot fake kube-ipvs0", p)
	}
	fake := reflect.ValueOf(f.netlink)
	if !fake.Type().AssignableTo(field.Type()) {
		return fmt.Errorf("the ipvs Proxier's netlinkHandle is a %s, which the fake (%s) does not implement", field.Type(), fake.Type())
	}
	reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(fake)
	return nil
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

// write leaves the fakes' state in dir, in the formats of the real tools:
// ipvsadm.rules ("ipvsadm -Sn"), iptables.rules ("iptables-save" of every table),
// addresses (kube-ipvs0's, one prefix a line) and sysctl.conf (the sysctls the proxier
// set, "name = value"). The sets are in the namespace.
func (f *ipvsFakes) write(dir string) error {
	if dir == "" {
		return fmt.Errorf("ipvs mode needs -out DIR for the fakes' state")
	}
	var ipt bytes.Buffer
	if err := f.ipt.SaveInto("", &ipt); err != nil {
		return fmt.Errorf("saving the fake iptables: %w", err)
	}
	rules, err := f.ipvsRules()
	if err != nil {
		return err
	}
	addrs, err := f.addresses()
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

// ipvsRules prints the virtual and real servers as "ipvsadm -Sn" does (services
// sorted, each followed by its real servers).
func (f *ipvsFakes) ipvsRules() (string, error) {
	vss, err := f.ipvs.GetVirtualServers()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, vs := range vss {
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

// addresses are kube-ipvs0's, each with the host prefix length EnsureAddressBind
// gives it.
func (f *ipvsFakes) addresses() (string, error) {
	addrs, err := f.netlink.ListBindAddress(dummyDevice)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", dummyDevice, err)
	}
	bits := "/32"
	if f.family == v1.IPv6Protocol {
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
