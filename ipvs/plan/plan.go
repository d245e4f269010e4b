// Package plan is the ipvs sync: from what a node holds of one family's ipvs-mode
// state (Have: virtual servers with their real servers and the kernel's connection
// counts, sets, the addresses of kube-ipvs0, sysctls) and what it should hold (a
// syntax.Node), the typed operations that make one into the other (Plan), or that
// remove kube-proxy's state (Cleanup). It does no I/O: apply carries the operations
// out through the kernel's interfaces, and prints them with Op.Line.
//
// # Order
//
// Plan's operations come in one fixed order, kube-proxy's order of concerns: sysctls;
// kube-ipvs0 and the addresses to bind; the sets (created, entries added, entries
// deleted); IPVS; then the addresses to unbind. apply loads the companion chains
// (iptables rules, planned by iptables/plan) between IPVS and the unbinding. Within
// IPVS, the order is the script's awk program's (ipvs/syntax reconcile.awk): the
// virtual servers nobody wants are deleted; the wanted ones added or edited in place,
// in ipvsadm's order; the real servers no longer wanted retired (drained or deleted)
// in the node's order; the wanted ones added or set back, in ipvsadm's order. The
// shared cases of reconcile_test.go run the awk program and Plan on the same input
// and hold them to the same "ipvsadm -R" lines and the same drain decisions.
//
// # Ownership
//
// A virtual server of the other family, or inside ipvs.excludeCIDRs, is not
// kube-proxy's: Plan never deletes one and the state after keeps it. (Firewall-mark
// services never reach a Have: apply's reader and ipvs/syntax leave them out.)
//
// # Graceful termination
//
// A real server no longer wanted is retired as kube-proxy's graceful termination
// retires it (Retire).
package plan

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

// Have is what a node holds of one family's ipvs-mode state: what apply read from the
// kernel, or what a load left there (Change.After).
type Have struct {
	// Sysctls are the kernel settings read, by dotted name; a setting that could not
	// be read is absent.
	Sysctls map[string]string
	// Link: kube-ipvs0 exists.
	Link bool
	// Addresses are the family's addresses bound to kube-ipvs0, sorted.
	Addresses []netip.Prefix
	// Sets are kube-proxy's sets of the family, in ipvs/syntax's order.
	Sets []*syntax.Set
	// Services are the virtual servers with their real servers, in ipvsadm's order
	// (syntax.SortServices: real servers by address, then port).
	Services []*syntax.VirtualServer
	// Conns are the kernel's connection counts of the real servers (a real server
	// without an entry has none).
	Conns map[syntax.RealID]syntax.Conns
}

// Options choose what a plan does.
type Options struct {
	// Full edits every wanted virtual and real server that exists, whether it differs
	// or not (apply --full).
	Full bool
}

// Change is a plan: the operations in the order they run, the real servers it
// retires with what becomes of each, and the state the node is left in.
type Change struct {
	Ops     []Op
	Retired []Retired
	After   *Have
}

// Empty reports whether the change changes nothing.
func (c *Change) Empty() bool { return len(c.Ops) == 0 }

// Plan works out the operations that bring a node holding have to want, in the
// package's order. It does not change have or want; After may share their parts.
func Plan(have *Have, want *syntax.Node, opts Options) (*Change, error) {
	p := &planner{have: have, want: want, full: opts.Full, retiring: map[syntax.ServiceID][]syntax.RealServer{}}
	for _, s := range want.Sysctls {
		if v, ok := have.Sysctls[s.Name]; !ok || v != s.Value {
			p.add(Op{Kind: SetSysctl, Sysctl: s})
		}
	}
	if !have.Link {
		p.add(Op{Kind: AddLink})
	}
	for _, a := range missing(want.Addresses, have.Addresses) {
		p.add(Op{Kind: AddAddress, Address: a})
	}
	sets, err := SetChanges(have.Sets, want.Sets)
	if err != nil {
		return nil, err
	}
	if err := inOrder(have.Services, "the node's"); err != nil {
		return nil, err
	}
	if err := inOrder(want.Services, "the wanted"); err != nil {
		return nil, err
	}
	p.ops = append(p.ops, sets...)
	p.services()
	for _, a := range missing(have.Addresses, want.Addresses) {
		p.add(Op{Kind: DeleteAddress, Address: a})
	}
	return &Change{Ops: p.ops, Retired: p.retired, After: p.after()}, nil
}

// inOrder checks that each virtual server's real servers are in ipvsadm's order, as
// the plan walks them side by side.
func inOrder(vss []*syntax.VirtualServer, whose string) error {
	for _, vs := range vss {
		if !slices.IsSortedFunc(vs.Reals, syntax.CompareReals) {
			return fmt.Errorf("%s real servers of %s are not in ipvsadm's order", whose, vs.Key())
		}
	}
	return nil
}

// hasReal reports whether the real servers, in ipvsadm's order, include one at addr.
func hasReal(reals []syntax.RealServer, addr netip.AddrPort) bool {
	_, found := slices.BinarySearchFunc(reals, addr, func(rs syntax.RealServer, a netip.AddrPort) int { return rs.Address.Compare(a) })
	return found
}

// missing are the addresses of a that b lacks, in a's order.
func missing(a, b []netip.Prefix) []netip.Prefix {
	in := make(map[netip.Prefix]bool, len(b))
	for _, p := range b {
		in[p] = true
	}
	var out []netip.Prefix
	for _, p := range a {
		if !in[p] {
			out = append(out, p)
		}
	}
	return out
}

type planner struct {
	have     *Have
	want     *syntax.Node
	full     bool
	ops      []Op
	retired  []Retired
	retiring map[syntax.ServiceID][]syntax.RealServer // kept at weight 0, by virtual server
}

func (p *planner) add(op Op) { p.ops = append(p.ops, op) }

// owned reports whether a virtual server of the node is kube-proxy's to delete: of
// the family, outside excludeCIDRs.
func (p *planner) owned(vs *syntax.VirtualServer) bool {
	a := vs.Address.Addr()
	if a.Is6() != (p.want.Family == model.IPv6) {
		return false
	}
	return !slices.ContainsFunc(p.want.ExcludeCIDRs, func(c netip.Prefix) bool { return c.Contains(a) })
}

// after is the state the change leaves: the wanted state, with the real servers kept
// draining and the virtual servers that are not kube-proxy's.
func (p *planner) after() *Have {
	a := &Have{Sysctls: maps.Clone(p.have.Sysctls), Link: true, Addresses: p.want.Addresses,
		Sets: slices.Clone(p.want.Sets), Conns: map[syntax.RealID]syntax.Conns{}}
	if a.Sysctls == nil {
		a.Sysctls = map[string]string{}
	}
	for _, s := range p.want.Sysctls {
		a.Sysctls[s.Name] = s.Value
	}
	for _, s := range p.have.Sets {
		if p.want.Set(s.Name) == nil {
			a.Sets = append(a.Sets, s)
		}
	}
	wanted := map[syntax.ServiceID]bool{}
	for _, vs := range p.want.Services {
		wanted[vs.ID()] = true
		if kept := p.retiring[vs.ID()]; len(kept) > 0 {
			c := *vs
			c.Reals = append(slices.Clone(vs.Reals), kept...)
			slices.SortFunc(c.Reals, syntax.CompareReals)
			vs = &c
		}
		a.Services = append(a.Services, vs)
	}
	for _, vs := range p.have.Services {
		if !wanted[vs.ID()] && !p.owned(vs) {
			a.Services = append(a.Services, vs)
		}
	}
	syntax.SortServices(a.Services)
	kept := make(map[syntax.ServiceID]*syntax.VirtualServer, len(a.Services))
	for _, vs := range a.Services {
		kept[vs.ID()] = vs
	}
	for id, c := range p.have.Conns {
		if vs := kept[id.Service]; vs != nil && hasReal(vs.Reals, id.Real) {
			a.Conns[id] = c
		}
	}
	return a
}
