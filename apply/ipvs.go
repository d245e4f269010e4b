package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/ipvs"
	"github.com/svcgen/svcgen/internal/ipvskernel"
	"github.com/svcgen/svcgen/internal/textutil"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// IPVS loads ipvs-mode state as kube-proxy's ipvs proxier does, in its order: kernel
// settings; kube-ipvs0 and the addresses bound to it (vishvananda/netlink); the sets
// (ipset restore, entry by entry); virtual and real servers one by one through netlink
// (github.com/moby/ipvs), so connections to what stays are kept; the companion chains
// (iptables-restore --noflush, as the iptables backend loads them); then the addresses
// no virtual server uses any more are unbound. Every step that succeeded is undone, in
// reverse, when a later one fails.
//
// moby/ipvs reports success on a kernel without IPVS, so Read checks first
// (internal/ipvskernel) and says so clearly.
type IPVS struct {
	IPv6 bool
	ipt  *IPTables
}

// NewIPVS returns the backend for a family; wait bounds the xtables lock wait.
func NewIPVS(family model.IPFamily, wait time.Duration) *IPVS {
	return &IPVS{IPv6: family == model.IPv6, ipt: NewIPTables(family, wait)}
}

func (b *IPVS) Name() string {
	if b.IPv6 {
		return "ipvs (IPv6)"
	}
	return "ipvs"
}

// ipvsState is the node's ipvs-mode state of one family.
type ipvsState struct {
	noIPVS    error // the kernel has no IPVS: only cleanup can run
	sysctls   map[string]string
	link      bool // kube-ipvs0 exists
	addresses []netip.Prefix
	sets      []*ipvssyntax.Set           // kube-proxy's sets of the family
	services  []*ipvssyntax.VirtualServer // every virtual server of the family (not fwmark ones)
	rules     *ipState
}

// Read reads kube-ipvs0, the sets, IPVS and the iptables tables.
func (b *IPVS) Read(ctx context.Context) (State, error) {
	st := &ipvsState{sysctls: map[string]string{}}
	st.noIPVS = ipvskernel.Check()
	for _, name := range ipvsSysctls {
		if v, err := os.ReadFile(sysctlPath(name)); err == nil {
			st.sysctls[name] = strings.TrimSpace(string(v))
		}
	}
	if link, err := netlink.LinkByName(ipvssyntax.DummyInterface); err == nil {
		st.link = true
		addrs, err := netlink.AddrList(link, b.nlFamily())
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ipvssyntax.DummyInterface, err)
		}
		for _, a := range addrs {
			if p, ok := netip.AddrFromSlice(a.IP); ok {
				ones, _ := a.Mask.Size()
				st.addresses = append(st.addresses, netip.PrefixFrom(p.Unmap(), ones))
			}
		}
		slices.SortFunc(st.addresses, netip.Prefix.Compare)
	} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, fmt.Errorf("%s: %w", ipvssyntax.DummyInterface, err)
	}
	out, err := runTool(ctx, nil, "ipset", "save")
	if err != nil {
		return nil, err
	}
	sets, err := ipvssyntax.ParseSetsBytes("ipset save", out)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		if slices.Contains(b.setNames(), s.Name) {
			st.sets = append(st.sets, s)
		}
	}
	if st.noIPVS == nil {
		if st.services, err = b.readServices(); err != nil {
			return nil, err
		}
	}
	rules, err := b.ipt.Read(ctx)
	if err != nil {
		return nil, err
	}
	st.rules = rules.(*ipState)
	return st, nil
}

// ipvsSysctls are the settings kube-proxy's ipvs proxier may set (ipvssyntax.Build's).
var ipvsSysctls = []string{
	"net.ipv4.vs.conntrack", "net.ipv4.vs.expire_nodest_conn", "net.ipv4.vs.expire_quiescent_template",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce",
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func (b *IPVS) nlFamily() int {
	if b.IPv6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func (b *IPVS) setNames() []string {
	var out []string
	for _, n := range ipvssyntax.SetNames() {
		out = append(out, ipvssyntax.SetName(n, b.IPv6))
	}
	return out
}

// readServices reads the virtual servers of the family with their real servers.
func (b *IPVS) readServices() ([]*ipvssyntax.VirtualServer, error) {
	h, err := ipvs.New("")
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	defer h.Close()
	svcs, err := h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("ipvs: listing virtual servers: %w", err)
	}
	var out []*ipvssyntax.VirtualServer
	for _, s := range svcs {
		if s.FWMark != 0 || (s.AddressFamily == unix.AF_INET6) != b.IPv6 {
			continue
		}
		vs := fromMoby(s)
		dests, err := h.GetDestinations(s)
		if err != nil {
			return nil, fmt.Errorf("ipvs: real servers of %s: %w", vs.Key(), err)
		}
		for _, d := range dests {
			vs.Reals = append(vs.Reals, realFromMoby(d, b.IPv6))
		}
		out = append(out, vs)
	}
	ipvssyntax.SortServices(out)
	return out, nil
}

// fromMoby is a virtual server as ipvsadm sees it. The kernel's own HASHED flag is
// dropped.
func fromMoby(s *ipvs.Service) *ipvssyntax.VirtualServer {
	a, _ := netip.AddrFromSlice(s.Address)
	if s.AddressFamily == unix.AF_INET {
		a = a.Unmap()
		if !a.Is4() && len(s.Address) >= 4 {
			a, _ = netip.AddrFromSlice(s.Address[:4])
		}
	}
	proto := map[uint16]model.Protocol{unix.IPPROTO_TCP: model.TCP, unix.IPPROTO_UDP: model.UDP, unix.IPPROTO_SCTP: model.SCTP}[s.Protocol]
	return &ipvssyntax.VirtualServer{Protocol: proto, Address: netip.AddrPortFrom(a, s.Port),
		Scheduler: s.SchedName, Flags: s.Flags &^ 0x2, Timeout: s.Timeout}
}

func realFromMoby(d *ipvs.Destination, ipv6 bool) ipvssyntax.RealServer {
	a, _ := netip.AddrFromSlice(d.Address)
	if !ipv6 {
		a = a.Unmap()
		if !a.Is4() && len(d.Address) >= 4 {
			a, _ = netip.AddrFromSlice(d.Address[:4])
		}
	}
	f := ipvssyntax.Masquerade
	switch d.ConnectionFlags & ipvs.ConnectionFlagFwdMask {
	case ipvs.ConnectionFlagDirectRoute, ipvs.ConnectionFlagLocalNode:
		f = ipvssyntax.Route
	case ipvs.ConnectionFlagTunnel:
		f = ipvssyntax.Tunnel
	}
	return ipvssyntax.RealServer{Address: netip.AddrPortFrom(a, d.Port), Forward: f, Weight: d.Weight}
}

func toMoby(vs *ipvssyntax.VirtualServer) *ipvs.Service {
	s := &ipvs.Service{
		Address: vs.Address.Addr().AsSlice(), Port: vs.Address.Port(), SchedName: vs.Scheduler,
		Flags: vs.Flags, Timeout: vs.Timeout, AddressFamily: unix.AF_INET, Netmask: 0xffffffff,
	}
	if vs.Address.Addr().Is6() {
		s.AddressFamily, s.Netmask = unix.AF_INET6, 128
	}
	s.Protocol = map[model.Protocol]uint16{model.TCP: unix.IPPROTO_TCP, model.UDP: unix.IPPROTO_UDP, model.SCTP: unix.IPPROTO_SCTP}[vs.Protocol]
	return s
}

func destToMoby(vs *ipvssyntax.VirtualServer, rs ipvssyntax.RealServer) *ipvs.Destination {
	flags := map[ipvssyntax.Forward]uint32{ipvssyntax.Masquerade: ipvs.ConnectionFlagMasq, ipvssyntax.Route: ipvs.ConnectionFlagDirectRoute, ipvssyntax.Tunnel: ipvs.ConnectionFlagTunnel}[rs.Forward]
	d := &ipvs.Destination{Address: rs.Address.Addr().AsSlice(), Port: rs.Address.Port(), Weight: rs.Weight, ConnectionFlags: flags, AddressFamily: unix.AF_INET}
	if vs.Address.Addr().Is6() {
		// The kernel takes a destination's family from the request and refuses one
		// that differs from the service's.
		d.AddressFamily = unix.AF_INET6
	}
	return d
}

// View shows the state for diff and audit: the iptables part as the iptables backend
// shows it, then every virtual server with its real servers (owned by the service port
// it is for, when the service map is given), the sets with their entries and the
// addresses of kube-ipvs0 (the node's).
func (s *ipvsState) View(opts ViewOptions) *ruleview.View {
	v := s.rules.View(opts)
	owner := map[string]string{}
	if opts.Map != nil {
		for _, vs := range ipvsrules.Build(opts.Map).Services {
			if len(vs.For) > 0 {
				owner[vs.Key()] = strings.Fields(vs.For[0])[0]
			}
		}
	}
	for _, vs := range s.services {
		sec := &ruleview.Section{Table: "ipvs", Name: vs.Key(), Header: ipvssyntax.ServiceLine(vs), Owner: owner[vs.Key()], Rank: 1}
		for _, rs := range vs.Reals {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: ipvssyntax.RealLine(vs, rs)})
		}
		v.Sections = append(v.Sections, sec)
	}
	for _, set := range s.sets {
		var b bytes.Buffer
		ipvssyntax.WriteSetChanges(&b, nil, []*ipvssyntax.Set{set})
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		sec := &ruleview.Section{Table: "ipset", Name: set.Name, Header: lines[0]}
		for _, l := range lines[1:] {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: l})
		}
		v.Sections = append(v.Sections, sec)
	}
	if s.link || len(s.addresses) > 0 {
		sec := &ruleview.Section{Table: "link", Name: ipvssyntax.DummyInterface, Header: "link " + ipvssyntax.DummyInterface}
		for _, a := range s.addresses {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: "address " + a.String()})
		}
		v.Sections = append(v.Sections, sec)
	}
	v.Sort()
	return v
}

// stateOf is the state a node holding exactly the built state has, besides what the
// base (the node's other rules) holds.
func (b *IPVS) stateOf(want *ipvssyntax.Node, base *iptsyntax.Ruleset) (*ipvsState, error) {
	rules, err := companionRules(want, base)
	if err != nil {
		return nil, err
	}
	sysctls := map[string]string{}
	for _, s := range want.Sysctls {
		sysctls[s.Name] = s.Value
	}
	return &ipvsState{sysctls: sysctls, link: true, addresses: want.Addresses, sets: want.Sets,
		services: slices.Clone(want.Services), rules: &ipState{rs: rules}}, nil
}

// companionRules is base with kube-proxy's ipvs chains written over it and its jumps
// from the built-in chains inserted where missing.
func companionRules(want *ipvssyntax.Node, base *iptsyntax.Ruleset) (*iptsyntax.Ruleset, error) {
	var payload bytes.Buffer
	if err := ipvssyntax.WritePayload(&payload, want); err != nil {
		return nil, err
	}
	rs := base.Clone()
	if err := rs.Restore("ipvs payload", &payload); err != nil {
		return nil, err
	}
	iptsyntax.EnsureJumps(rs, jumpRules())
	return rs, nil
}

// jumpRules are kube-proxy's ipvs-mode jumps in the order it ensures them.
func jumpRules() []iptsyntax.Jump {
	var out []iptsyntax.Jump
	for _, j := range ipvssyntax.Jumps {
		out = append(out, iptsyntax.Jump{Table: j.Table, From: j.From, Args: j.Args()})
	}
	return out
}

// Want is the state of a node holding exactly sm's ipvs-mode state.
func (b *IPVS) Want(sm *ir.ServiceMap) (State, error) {
	return b.stateOf(ipvsrules.Build(sm), &iptsyntax.Ruleset{})
}

// Parse reads an ipvs script written by svcgen compile -m ipvs.
func (b *IPVS) Parse(name string, data []byte) (State, error) {
	n, err := ipvssyntax.ParseScript(name, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return b.stateOf(n, &iptsyntax.Ruleset{})
}

// ipvsOp is one change to the kernel, with what it is (as ipvsadm or ip would say
// it) and the service ports it is for. do carries it out and returns how to undo it.
type ipvsOp struct {
	what, service string
	do            func(r *ipvsRun) (undo func(r *ipvsRun) error, err error)
}

// ipvsRun is what ops talk to the kernel with.
type ipvsRun struct {
	ctx context.Context
	h   *ipvs.Handle
	b   *IPVS
}

type ipvsPlan struct {
	from    *ipvsState
	after   *ipvsState
	ops     []ipvsOp
	summary Summary
}

func (p *ipvsPlan) Empty() bool      { return len(p.ops) == 0 }
func (p *ipvsPlan) After() State     { return p.after }
func (p *ipvsPlan) Summary() Summary { return p.summary }

// Plan works out the operations that turn the state into sm's, in kube-proxy's order.
func (b *IPVS) Plan(sm *ir.ServiceMap, from State, opts PlanOptions) (Plan, error) {
	st, err := stateAs[*ipvsState]("ipvs", from)
	if err != nil {
		return nil, err
	}
	if st.noIPVS != nil {
		return nil, fmt.Errorf("%s: %w: %v", b.Name(), ErrNoKernelSupport, st.noIPVS)
	}
	if err := sameFamily(b.Name(), b.IPv6, sm); err != nil {
		return nil, err
	}
	want := ipvsrules.Build(sm)
	after, err := b.stateOf(want, st.rules.ruleset())
	if err != nil {
		return nil, err
	}
	p := &ipvsPlan{from: st, after: after}
	var c ipvsCount
	for name, v := range st.sysctls {
		if _, set := after.sysctls[name]; !set {
			after.sysctls[name] = v
		}
	}
	p.sysctls(st, want)
	if !st.link {
		p.ops = append(p.ops, linkAdd())
	}
	for _, a := range want.Addresses {
		if !slices.Contains(st.addresses, a) {
			p.ops = append(p.ops, addrOp(a, true))
			c.addrs++
		}
	}
	if err := p.sets(st.sets, want.Sets, &c); err != nil {
		return nil, err
	}
	p.services(st.services, want, opts.Full, &c)
	if err := p.rules(b, st.rules.ruleset(), after.rules.ruleset(), &c); err != nil {
		return nil, err
	}
	for _, a := range st.addresses {
		if !slices.Contains(want.Addresses, a) {
			p.ops = append(p.ops, addrOp(a, false))
			c.addrs++
		}
	}
	// Virtual servers svcgen does not own stay: keep them in the state after.
	for _, vs := range st.services {
		if excluded(vs, want.ExcludeCIDRs) {
			after.services = append(after.services, vs)
		}
	}
	ipvssyntax.SortServices(after.services)
	p.summary = c.summary()
	return p, nil
}

type ipvsCount struct {
	addrs, setEntries, vsAdded, vsUpdated, vsDeleted, rsChanged int
	chains                                                      iptsyntax.Count
}

func (c ipvsCount) summary() Summary {
	return Summary{
		Chains: c.chains.Chains - c.chains.DeletedChains, Rules: c.chains.Rules + c.rsChanged, Deleted: c.vsDeleted,
		Text: fmt.Sprintf("%s added, %d updated, %d deleted, %s, %s, %s; iptables: %s",
			textutil.Count(c.vsAdded, "virtual server", "virtual servers"), c.vsUpdated, c.vsDeleted,
			textutil.Count(c.rsChanged, "real server change", "real server changes"),
			textutil.Count(c.setEntries, "set entry", "set entries"), textutil.Count(c.addrs, "address", "addresses"), c.chains),
	}
}

// sysctls adds an op for each kernel setting that differs.
func (p *ipvsPlan) sysctls(st *ipvsState, want *ipvssyntax.Node) {
	for _, s := range want.Sysctls {
		if st.sysctls[s.Name] == s.Value {
			continue
		}
		path, value := sysctlPath(s.Name), s.Value
		p.ops = append(p.ops, ipvsOp{what: "sysctl " + s.Name + "=" + value, do: func(*ipvsRun) (func(*ipvsRun) error, error) {
			old, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
				return nil, err
			}
			return func(*ipvsRun) error { return os.WriteFile(path, old, 0o644) }, nil
		}})
	}
}

func linkAdd() ipvsOp {
	return ipvsOp{what: "ip link add " + ipvssyntax.DummyInterface + " type dummy", do: func(*ipvsRun) (func(*ipvsRun) error, error) {
		link := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: ipvssyntax.DummyInterface}}
		if err := netlink.LinkAdd(link); err != nil {
			return nil, err
		}
		return func(*ipvsRun) error { return netlink.LinkDel(link) }, nil
	}}
}

func addrOp(a netip.Prefix, add bool) ipvsOp {
	verb := "add"
	if !add {
		verb = "del"
	}
	change := func(add bool) error {
		link, err := netlink.LinkByName(ipvssyntax.DummyInterface)
		if err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(a.String())
		if err != nil {
			return err
		}
		if add {
			return netlink.AddrAdd(link, addr)
		}
		return netlink.AddrDel(link, addr)
	}
	return ipvsOp{what: "ip addr " + verb + " " + a.String() + " dev " + ipvssyntax.DummyInterface, do: func(*ipvsRun) (func(*ipvsRun) error, error) {
		if err := change(add); err != nil {
			return nil, err
		}
		return func(*ipvsRun) error { return change(!add) }, nil
	}}
}

// sets adds one op that loads the entry changes with ipset restore.
func (p *ipvsPlan) sets(from, to []*ipvssyntax.Set, c *ipvsCount) error {
	var fwd, back bytes.Buffer
	if err := ipvssyntax.WriteSetChanges(&fwd, from, to); err != nil {
		return err
	}
	if fwd.Len() == 0 {
		return nil
	}
	for _, l := range strings.Split(fwd.String(), "\n") {
		if strings.HasPrefix(l, "add ") || strings.HasPrefix(l, "del ") {
			c.setEntries++
		}
	}
	// Undo: the entries back, then the sets that were created destroyed.
	ipvssyntax.WriteSetChanges(&back, to, from)
	var created []*ipvssyntax.Set
	for _, s := range to {
		if !slices.ContainsFunc(from, func(o *ipvssyntax.Set) bool { return o.Name == s.Name }) {
			created = append(created, s)
		}
	}
	ipvssyntax.WriteDestroySets(&back, created)
	p.ops = append(p.ops, ipvsOp{what: "ipset restore (sets)", do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		if _, err := runTool(r.ctx, fwd.Bytes(), "ipset", "restore", "-exist"); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error {
			_, err := runTool(r.ctx, back.Bytes(), "ipset", "restore", "-exist")
			return err
		}, nil
	}})
	return nil
}

// services adds the virtual-server and real-server ops: new and changed ones in the
// wanted order, then the virtual servers nobody wants (those inside excludeCIDRs stay).
func (p *ipvsPlan) services(from []*ipvssyntax.VirtualServer, want *ipvssyntax.Node, full bool, c *ipvsCount) {
	have := map[string]*ipvssyntax.VirtualServer{}
	for _, vs := range from {
		have[vs.Key()] = vs
	}
	for _, vs := range want.Services {
		old := have[vs.Key()]
		svc := strings.Join(vs.For, ", ")
		switch {
		case old == nil:
			p.ops = append(p.ops, vsOp(vs, nil, svc))
			c.vsAdded++
			old = &ipvssyntax.VirtualServer{}
		case full || old.Scheduler != vs.Scheduler || old.Flags != vs.Flags || old.Timeout != vs.Timeout:
			p.ops = append(p.ops, vsOp(vs, old, svc))
			c.vsUpdated++
		}
		for _, rs := range vs.Reals {
			i := slices.IndexFunc(old.Reals, func(o ipvssyntax.RealServer) bool { return o.Address == rs.Address })
			if i < 0 || full || old.Reals[i] != rs {
				var prev *ipvssyntax.RealServer
				if i >= 0 {
					prev = &old.Reals[i]
				}
				p.ops = append(p.ops, rsOp(vs, rs, prev, true, svc))
				c.rsChanged++
			}
		}
		for _, rs := range old.Reals {
			if !slices.ContainsFunc(vs.Reals, func(o ipvssyntax.RealServer) bool { return o.Address == rs.Address }) {
				p.ops = append(p.ops, rsOp(vs, rs, nil, false, svc))
				c.rsChanged++
			}
		}
	}
	for _, vs := range from {
		if want.Service(vs.Key()) == nil && !excluded(vs, want.ExcludeCIDRs) {
			p.ops = append(p.ops, vsDelOp(vs))
			c.vsDeleted++
		}
	}
}

// excluded: a virtual server inside excludeCIDRs is not kube-proxy's to delete.
func excluded(vs *ipvssyntax.VirtualServer, cidrs []netip.Prefix) bool {
	for _, c := range cidrs {
		if c.Contains(vs.Address.Addr()) {
			return true
		}
	}
	return false
}

// vsOp adds a virtual server, or updates old to vs in place (kube-proxy's
// UpdateService: the address stays up).
func vsOp(vs, old *ipvssyntax.VirtualServer, svc string) ipvsOp {
	what := ipvssyntax.ServiceLine(vs)
	if old != nil {
		what = "-E" + strings.TrimPrefix(what, "-A")
	}
	return ipvsOp{what: what, service: svc, do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		if old == nil {
			if err := r.h.NewService(toMoby(vs)); err != nil {
				return nil, err
			}
			return func(r *ipvsRun) error { return r.h.DelService(toMoby(vs)) }, nil
		}
		if err := r.h.UpdateService(toMoby(vs)); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error { return r.h.UpdateService(toMoby(old)) }, nil
	}}
}

// vsDelOp deletes a virtual server; undoing it puts it back with its real servers.
func vsDelOp(vs *ipvssyntax.VirtualServer) ipvsOp {
	return ipvsOp{what: "-D " + vs.Key(), do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		if err := r.h.DelService(toMoby(vs)); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error {
			if err := r.h.NewService(toMoby(vs)); err != nil {
				return err
			}
			for _, rs := range vs.Reals {
				if err := r.h.NewDestination(toMoby(vs), destToMoby(vs, rs)); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}}
}

// rsOp adds a real server (prev nil), updates prev to rs, or deletes rs (add false).
func rsOp(vs *ipvssyntax.VirtualServer, rs ipvssyntax.RealServer, prev *ipvssyntax.RealServer, add bool, svc string) ipvsOp {
	what := ipvssyntax.RealLine(vs, rs)
	switch {
	case !add:
		what = "-d " + vs.Key() + " -r " + rs.Address.String()
	case prev != nil:
		what = "-e" + strings.TrimPrefix(what, "-a")
	}
	return ipvsOp{what: what, service: svc, do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		s, d := toMoby(vs), destToMoby(vs, rs)
		switch {
		case !add:
			if err := r.h.DelDestination(s, d); err != nil {
				return nil, err
			}
			return func(r *ipvsRun) error { return r.h.NewDestination(s, d) }, nil
		case prev != nil:
			if err := r.h.UpdateDestination(s, d); err != nil {
				return nil, err
			}
			return func(r *ipvsRun) error { return r.h.UpdateDestination(s, destToMoby(vs, *prev)) }, nil
		}
		if err := r.h.NewDestination(s, d); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error { return r.h.DelDestination(s, d) }, nil
	}}
}

// rules adds the op that loads the companion chains: the transition from the tables
// now to the tables with kube-proxy's ipvs chains and jumps.
func (p *ipvsPlan) rules(b *IPVS, from, to *iptsyntax.Ruleset, c *ipvsCount) error {
	var fwd bytes.Buffer
	if err := iptplan.WriteTransition(&fwd, from, to, b.ipt.MaxChains); err != nil {
		return err
	}
	if fwd.Len() == 0 {
		return nil
	}
	c.chains = iptsyntax.CountLines(fwd.Bytes())
	payload := fwd.Bytes()
	p.ops = append(p.ops, ipvsOp{what: b.ipt.tool("-restore") + " (companion chains)", do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		if _, err := b.ipt.restore(r.ctx, payload); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error { return b.ipt.transition(r.ctx, to, from) }, nil
	}})
	return nil
}

// Load carries out the ops in order; when one fails, the ones before it are undone in
// reverse order.
func (b *IPVS) Load(ctx context.Context, p Plan) (State, error) {
	pl, ok := p.(*ipvsPlan)
	if !ok {
		return nil, fmt.Errorf("ipvs: a plan of another backend")
	}
	if len(pl.ops) == 0 {
		return pl.after, nil
	}
	r := &ipvsRun{ctx: ctx, b: b}
	if pl.from.noIPVS == nil {
		h, err := ipvs.New("")
		if err != nil {
			return nil, fmt.Errorf("ipvs: %w", err)
		}
		defer h.Close()
		r.h = h
	}
	var undo []func(*ipvsRun) error
	for _, op := range pl.ops {
		u, err := op.do(r)
		if err == nil {
			if u != nil {
				undo = append(undo, u)
			}
			continue
		}
		le := &LoadError{Mode: b.Name(), Rule: op.what, Service: op.service, Err: err}
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](r); err != nil {
				errs = append(errs, err)
			}
		}
		le.Rollback = errors.Join(errs...)
		return nil, le
	}
	return pl.after, nil
}

// Cleanup removes what kube-proxy's ipvs mode made of this family: its virtual servers
// (those bound to kube-ipvs0 or listed in its sets: node ports on the node's addresses),
// its sets, and kube-ipvs0 (by the IPv4 cleaner; the link holds both families). The
// companion chains go with the iptables cleaners, which run first: a set cannot be
// destroyed while a rule uses it.
func (b *IPVS) Cleanup(from State) (Plan, error) {
	st, err := stateAs[*ipvsState]("ipvs", from)
	if err != nil {
		return nil, err
	}
	p := &ipvsPlan{from: st, after: &ipvsState{rules: st.rules}}
	var c ipvsCount
	owned := kubeProxyServices(st)
	for _, vs := range st.services {
		if owned(vs) {
			p.ops = append(p.ops, vsDelOp(vs))
			c.vsDeleted++
		} else {
			p.after.services = append(p.after.services, vs)
		}
	}
	if len(st.sets) > 0 {
		var destroy bytes.Buffer
		ipvssyntax.WriteDestroySets(&destroy, st.sets)
		sets := st.sets
		p.ops = append(p.ops, ipvsOp{what: "ipset destroy (kube-proxy's sets)", do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
			if _, err := runTool(r.ctx, destroy.Bytes(), "ipset", "restore"); err != nil {
				return nil, err
			}
			return func(r *ipvsRun) error {
				var back bytes.Buffer
				ipvssyntax.WriteSetChanges(&back, nil, sets)
				_, err := runTool(r.ctx, back.Bytes(), "ipset", "restore", "-exist")
				return err
			}, nil
		}})
		c.setEntries += len(st.sets)
	}
	if st.link && !b.IPv6 {
		p.ops = append(p.ops, ipvsOp{what: "ip link del " + ipvssyntax.DummyInterface, do: func(*ipvsRun) (func(*ipvsRun) error, error) {
			link, err := netlink.LinkByName(ipvssyntax.DummyInterface)
			if err != nil {
				return nil, err
			}
			return nil, netlink.LinkDel(link)
		}})
	}
	p.summary = c.summary()
	return p, nil
}

// kubeProxyServices says which virtual servers kube-proxy made, from its own records:
// an address bound to kube-ipvs0 (or listed in KUBE-IPVS-IPS), or a node port listed
// in its node-port sets.
func kubeProxyServices(st *ipvsState) func(*ipvssyntax.VirtualServer) bool {
	bound := map[netip.Addr]bool{}
	for _, a := range st.addresses {
		bound[a.Addr()] = true
	}
	entries := map[string]map[string]bool{}
	for _, s := range st.sets {
		m := map[string]bool{}
		for _, e := range s.Entries {
			m[e] = true
		}
		entries[s.Name] = m
	}
	in := func(set, entry string) bool {
		for _, name := range []string{set, strings.Replace(set, "KUBE-", "KUBE-6-", 1)} {
			if entries[name][entry] {
				return true
			}
		}
		return false
	}
	return func(vs *ipvssyntax.VirtualServer) bool {
		a, port := vs.Address.Addr(), fmt.Sprint(vs.Address.Port())
		if bound[a] || in("KUBE-IPVS-IPS", a.String()) {
			return true
		}
		switch vs.Protocol {
		case model.TCP:
			return in("KUBE-NODE-PORT-TCP", port)
		case model.UDP:
			return in("KUBE-NODE-PORT-UDP", port)
		case model.SCTP:
			return in("KUBE-NODE-PORT-SCTP-HASH", a.String()+",sctp:"+port)
		}
		return false
	}
}
