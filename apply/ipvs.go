package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svcgen/svcgen/internal/ipvskernel"
	"github.com/svcgen/svcgen/internal/textutil"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsplan "github.com/svcgen/svcgen/ipvs/plan"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
)

// IPVS loads ipvs-mode state as kube-proxy's ipvs proxier does. ipvs/plan works out
// the typed operations, in kube-proxy's order: kernel settings; kube-ipvs0 and the
// addresses bound to it; the sets (one "ipset restore", entry by entry); virtual and
// real servers one by one, so connections to what stays are kept, and a real server
// that still has TCP connections is drained at weight 0 and deleted by a later sync
// once it has none (kube-proxy's graceful termination); the companion chains
// (iptables-restore --noflush, as the iptables backend loads them); then the addresses
// no virtual server uses any more are unbound. Every operation that succeeded is
// undone, in reverse, when a later one fails, and a set change that failed partway
// is undone too.
//
// The kernel is behind ipvskernel's interfaces (a Fake in tests). moby/ipvs reports
// success on a kernel without IPVS, so Read checks first and says so clearly.
type IPVS struct {
	IPv6   bool
	kernel ipvskernel.Kernel
	// tables reads and loads the companion chains: the iptables backend of the
	// family (over a FakeIPTables in tests).
	tables    *IPTables
	maxChains int
}

// NewIPVS returns the backend for a family; wait bounds the xtables lock wait.
func NewIPVS(family model.IPFamily, wait time.Duration) *IPVS {
	ipt := NewIPTables(family, wait)
	return &IPVS{IPv6: family == model.IPv6, kernel: ipvskernel.Host(runTool), tables: ipt, maxChains: ipt.MaxChains}
}

func (b *IPVS) Name() string {
	if b.IPv6 {
		return "ipvs (IPv6)"
	}
	return "ipvs"
}

// ipvsState is the node's ipvs-mode state of one family.
type ipvsState struct {
	noIPVS error // the kernel has no IPVS: only cleanup can run
	have   ipvsplan.Have
	rules  *ipState
}

// ipvsSysctls are the settings kube-proxy's ipvs proxier may set (ipvsrules.Build's).
var ipvsSysctls = []string{
	"net.ipv4.vs.conntrack", "net.ipv4.vs.expire_nodest_conn", "net.ipv4.vs.expire_quiescent_template",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce",
}

// Read reads the sysctls, kube-ipvs0, the sets, IPVS and the iptables tables.
func (b *IPVS) Read(ctx context.Context) (State, error) {
	k := b.kernel
	st := &ipvsState{noIPVS: k.Check(), have: ipvsplan.Have{Sysctls: map[string]string{}}}
	for _, name := range ipvsSysctls {
		v, ok, err := k.Sysctls.Get(name)
		if err != nil {
			return nil, fmt.Errorf("sysctl %s: %w", name, err)
		}
		if ok {
			st.have.Sysctls[name] = v
		}
	}
	var err error
	if st.have.Addresses, st.have.Link, err = k.Links.Addresses(ipvssyntax.DummyInterface, b.IPv6); err != nil {
		return nil, err
	}
	sets, err := k.Sets.Save(ctx)
	if err != nil {
		return nil, err
	}
	names := b.setNames()
	st.have.Sets = slices.DeleteFunc(sets, func(s *ipvssyntax.Set) bool { return !slices.Contains(names, s.Name) })
	if st.noIPVS == nil {
		if st.have.Services, st.have.Conns, err = b.readServices(); err != nil {
			return nil, err
		}
	}
	rules, err := b.tables.Read(ctx)
	if err != nil {
		return nil, err
	}
	st.rules = rules.(*ipState)
	return st, nil
}

func (b *IPVS) setNames() []string {
	var out []string
	for _, n := range ipvssyntax.SetNames() {
		out = append(out, ipvssyntax.SetName(n, b.IPv6))
	}
	return out
}

// readServices reads the virtual servers of the family with their real servers and
// the connections to them.
func (b *IPVS) readServices() ([]*ipvssyntax.VirtualServer, map[ipvssyntax.RealID]ipvssyntax.Conns, error) {
	h, err := b.kernel.OpenIPVS()
	if err != nil {
		return nil, nil, err
	}
	defer h.Close()
	vss, conns, err := h.Services()
	if err != nil {
		return nil, nil, err
	}
	vss = slices.DeleteFunc(vss, func(vs *ipvssyntax.VirtualServer) bool { return vs.Address.Addr().Is6() != b.IPv6 })
	return vss, conns, nil
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
	for _, vs := range s.have.Services {
		sec := &ruleview.Section{Table: "ipvs", Name: vs.Key(), Header: ipvssyntax.ServiceLine(vs), Owner: owner[vs.Key()], Rank: 1}
		for _, rs := range vs.Reals {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: ipvssyntax.RealLine(vs, rs)})
		}
		v.Sections = append(v.Sections, sec)
	}
	for _, set := range s.have.Sets {
		sec := &ruleview.Section{Table: "ipset", Name: set.Name, Header: ipvssyntax.CreateLine(set.Name, set)}
		for _, e := range set.Entries {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: ipvssyntax.SetLine("add", set.Name, e)})
		}
		v.Sections = append(v.Sections, sec)
	}
	if s.have.Link || len(s.have.Addresses) > 0 {
		sec := &ruleview.Section{Table: "link", Name: ipvssyntax.DummyInterface, Header: "link " + ipvssyntax.DummyInterface}
		for _, a := range s.have.Addresses {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: "address " + a.String()})
		}
		v.Sections = append(v.Sections, sec)
	}
	v.Sort()
	return v
}

// stateOf is the state a node holding exactly the built state has, besides what the
// base (the node's other rules) holds.
func stateOf(want *ipvssyntax.Node, base *iptsyntax.Ruleset) (*ipvsState, error) {
	rules, err := companionRules(want, base)
	if err != nil {
		return nil, err
	}
	sysctls := map[string]string{}
	for _, s := range want.Sysctls {
		sysctls[s.Name] = s.Value
	}
	have := ipvsplan.Have{Sysctls: sysctls, Link: true, Addresses: want.Addresses, Sets: want.Sets,
		Services: slices.Clone(want.Services)}
	return &ipvsState{have: have, rules: &ipState{rs: rules}}, nil
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
	return stateOf(ipvsrules.Build(sm), &iptsyntax.Ruleset{})
}

// Parse reads an ipvs script written by svcgen compile -m ipvs.
func (b *IPVS) Parse(name string, data []byte) (State, error) {
	n, err := ipvssyntax.ParseScript(name, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return stateOf(n, &iptsyntax.Ruleset{})
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

// Plan works out the operations that turn the state into sm's (ipvsplan.Plan), and
// the transition of the companion chains, loaded between IPVS and the unbinding.
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
	change, err := ipvsplan.Plan(&st.have, want, ipvsplan.Options{Full: opts.Full})
	if err != nil {
		return nil, err
	}
	rules, err := companionRules(want, st.rules.ruleset())
	if err != nil {
		return nil, err
	}
	c := countOps(change.Ops)
	chains, err := b.chainsOp(st.rules.ruleset(), rules, &c)
	if err != nil {
		return nil, err
	}
	ops, err := b.ops(change.Ops, chains, st.have.Sets)
	if err != nil {
		return nil, err
	}
	after := &ipvsState{have: *change.After, rules: &ipState{rs: rules}}
	return &ipvsPlan{from: st, after: after, ops: ops, summary: c.summary()}, nil
}

type ipvsCount struct {
	addrs, setEntries, vsAdded, vsUpdated, vsDeleted, rsChanged int
	chains                                                      iptsyntax.Count
}

// countOps counts what the operations change, for the summary.
func countOps(ops []ipvsplan.Op) ipvsCount {
	var c ipvsCount
	for _, op := range ops {
		switch op.Kind {
		case ipvsplan.AddAddress, ipvsplan.DeleteAddress:
			c.addrs++
		case ipvsplan.AddEntry, ipvsplan.DelEntry, ipvsplan.DestroySet:
			c.setEntries++
		case ipvsplan.AddService:
			c.vsAdded++
		case ipvsplan.EditService:
			c.vsUpdated++
		case ipvsplan.DeleteService:
			c.vsDeleted++
		case ipvsplan.AddReal, ipvsplan.EditReal, ipvsplan.DrainReal, ipvsplan.DeleteReal:
			c.rsChanged++
		}
	}
	return c
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

// chainsOp is the op that loads the companion chains: the transition from the tables
// now to the tables with kube-proxy's ipvs chains and jumps (nil when none differ).
func (b *IPVS) chainsOp(from, to *iptsyntax.Ruleset, c *ipvsCount) (*ipvsOp, error) {
	var fwd bytes.Buffer
	if err := iptplan.WriteTransition(&fwd, from, to, b.maxChains); err != nil {
		return nil, err
	}
	if fwd.Len() == 0 {
		return nil, nil
	}
	c.chains = iptsyntax.CountLines(fwd.Bytes())
	payload := fwd.Bytes()
	return &ipvsOp{what: b.tables.Name() + "-restore (companion chains)", do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		if err := b.tables.tool().Restore(r.ctx, payload); err != nil {
			return nil, err
		}
		return func(r *ipvsRun) error { return b.tables.transition(r.ctx, to, from) }, nil
	}}, nil
}

// Load carries out the ops in order; when one fails, what the ones before it did (and
// what it did itself, for a set change that failed partway) is undone in reverse
// order.
func (b *IPVS) Load(ctx context.Context, p Plan) (State, error) {
	pl, ok := p.(*ipvsPlan)
	if !ok {
		return nil, fmt.Errorf("ipvs: a plan of another backend")
	}
	if len(pl.ops) == 0 {
		return pl.after, nil
	}
	r := &ipvsRun{ctx: ctx}
	if pl.from.noIPVS == nil {
		h, err := b.kernel.OpenIPVS()
		if err != nil {
			return nil, err
		}
		defer h.Close()
		r.h = h
	}
	var undo []func(*ipvsRun) error
	for _, op := range pl.ops {
		u, err := op.do(r)
		if u != nil {
			undo = append(undo, u)
		}
		if err == nil {
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

// Cleanup removes what kube-proxy's ipvs mode made of this family (ipvsplan.Cleanup):
// its virtual servers, its sets, and kube-ipvs0 (by the IPv4 cleaner; the link holds
// both families). The companion chains go with the iptables cleaners, which run first:
// a set cannot be destroyed while a rule uses it.
func (b *IPVS) Cleanup(from State) (Plan, error) {
	st, err := stateAs[*ipvsState]("ipvs", from)
	if err != nil {
		return nil, err
	}
	change := ipvsplan.Cleanup(&st.have, b.IPv6)
	ops, err := b.ops(change.Ops, nil, st.have.Sets)
	if err != nil {
		return nil, err
	}
	after := &ipvsState{have: *change.After, rules: st.rules}
	return &ipvsPlan{from: st, after: after, ops: ops, summary: countOps(change.Ops).summary()}, nil
}
