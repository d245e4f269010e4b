package apply

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/svcgen/svcgen/internal/ipvskernel"
	ipvsplan "github.com/svcgen/svcgen/ipvs/plan"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
)

// ipvsOp is one change to the kernel, with what it is (as ipvsadm, ipset or ip would
// say it) and the service ports it is for. do carries it out and returns how to undo
// what it did: nil when it did nothing to undo; for a set change, also when it failed
// partway (ipset restore keeps the lines before the one that failed).
type ipvsOp struct {
	what, service string
	do            func(r *ipvsRun) (undo func(r *ipvsRun) error, err error)
}

// ipvsRun is what ops talk to IPVS with, for one load.
type ipvsRun struct {
	ctx context.Context
	h   ipvskernel.IPVS
}

// ops turns the planned operations into ops, in their order: the set operations in a
// row go to ipset as one restore, and the companion chains (if any) load before the
// first address is unbound. from are the sets the plan starts from.
func (b *IPVS) ops(planned []ipvsplan.Op, chains *ipvsOp, from []*ipvssyntax.Set) ([]ipvsOp, error) {
	var out []ipvsOp
	for i := 0; i < len(planned); {
		op := planned[i]
		if chains != nil && op.Kind == ipvsplan.DeleteAddress {
			out, chains = append(out, *chains), nil
		}
		if !op.IsSet() {
			out = append(out, b.op(op))
			i++
			continue
		}
		j := i
		for j < len(planned) && planned[j].IsSet() {
			j++
		}
		sets, err := b.setsOp(planned[i:j], from)
		if err != nil {
			return nil, err
		}
		out, i = append(out, sets), j
	}
	if chains != nil {
		out = append(out, *chains)
	}
	return out, nil
}

// op is one operation on IPVS, a link, an address or a sysctl.
func (b *IPVS) op(op ipvsplan.Op) ipvsOp {
	o := ipvsOp{what: op.Line(), service: op.For()}
	if op.IsIPVS() {
		do, undo := ipvsChange(op)
		o.do = func(r *ipvsRun) (func(*ipvsRun) error, error) {
			if err := do(r.h); err != nil {
				return nil, err
			}
			return func(r *ipvsRun) error { return undo(r.h) }, nil
		}
		return o
	}
	o.do = func(*ipvsRun) (func(*ipvsRun) error, error) {
		undo, err := b.hostChange(op)
		if err != nil || undo == nil {
			return nil, err
		}
		return func(*ipvsRun) error { return undo() }, nil
	}
	return o
}

// ipvsChange is an IPVS operation and its undoing. Deleting a virtual server is
// undone by adding it back with its real servers (its connections are gone).
func ipvsChange(op ipvsplan.Op) (do, undo func(ipvskernel.IPVS) error) {
	vs, rs, was := op.Service, op.Real, op.WasReal
	switch op.Kind {
	case ipvsplan.AddService:
		return func(h ipvskernel.IPVS) error { return h.AddService(vs) }, func(h ipvskernel.IPVS) error { return h.DeleteService(vs) }
	case ipvsplan.EditService:
		return func(h ipvskernel.IPVS) error { return h.UpdateService(vs) }, func(h ipvskernel.IPVS) error { return h.UpdateService(op.Was) }
	case ipvsplan.DeleteService:
		return func(h ipvskernel.IPVS) error { return h.DeleteService(vs) }, func(h ipvskernel.IPVS) error { return restoreService(h, vs) }
	case ipvsplan.AddReal:
		return func(h ipvskernel.IPVS) error { return h.AddReal(vs, rs) }, func(h ipvskernel.IPVS) error { return h.DeleteReal(vs, rs) }
	case ipvsplan.EditReal, ipvsplan.DrainReal:
		return func(h ipvskernel.IPVS) error { return h.UpdateReal(vs, rs) }, func(h ipvskernel.IPVS) error { return h.UpdateReal(vs, was) }
	case ipvsplan.DeleteReal:
		return func(h ipvskernel.IPVS) error { return h.DeleteReal(vs, rs) }, func(h ipvskernel.IPVS) error { return h.AddReal(vs, rs) }
	}
	bad := func(ipvskernel.IPVS) error { return fmt.Errorf("%q is not an IPVS operation", op.Line()) }
	return bad, bad
}

// restoreService adds a deleted virtual server back with its real servers.
func restoreService(h ipvskernel.IPVS, vs *ipvssyntax.VirtualServer) error {
	if err := h.AddService(vs); err != nil {
		return err
	}
	for _, rs := range vs.Reals {
		if err := h.AddReal(vs, rs); err != nil {
			return err
		}
	}
	return nil
}

// hostChange carries out an operation on a sysctl, kube-ipvs0 or its addresses, and
// returns how to undo it (nil: it is not undone, as deleting the link at cleanup).
func (b *IPVS) hostChange(op ipvsplan.Op) (undo func() error, err error) {
	k, link := b.kernel, ipvssyntax.DummyInterface
	switch op.Kind {
	case ipvsplan.SetSysctl:
		name := op.Sysctl.Name
		old, had, err := k.Sysctls.Get(name)
		if err != nil {
			return nil, err
		}
		if err := k.Sysctls.Set(name, op.Sysctl.Value); err != nil || !had {
			return nil, err
		}
		return func() error { return k.Sysctls.Set(name, old) }, nil
	case ipvsplan.AddLink:
		return func() error { return k.Links.DeleteLink(link) }, k.Links.AddDummy(link)
	case ipvsplan.DeleteLink:
		return nil, k.Links.DeleteLink(link)
	case ipvsplan.AddAddress:
		return func() error { return k.Links.DeleteAddress(link, op.Address) }, k.Links.AddAddress(link, op.Address)
	case ipvsplan.DeleteAddress:
		return func() error { return k.Links.AddAddress(link, op.Address) }, k.Links.DeleteAddress(link, op.Address)
	}
	return nil, fmt.Errorf("%q is not an operation on the host", op.Line())
}

// setsOp loads set operations with one ipset restore. Its undo puts the sets it
// touches back as they were in from, reading them first: ipset stops at the first
// line it refuses, so a failed restore has done the lines before it.
func (b *IPVS) setsOp(ops []ipvsplan.Op, from []*ipvssyntax.Set) (ipvsOp, error) {
	var in bytes.Buffer
	if err := ipvsplan.WriteSets(&in, ops); err != nil {
		return ipvsOp{}, err
	}
	var names []string
	destroy := true
	for _, op := range ops {
		if !slices.Contains(names, op.Set.Name) {
			names = append(names, op.Set.Name)
		}
		destroy = destroy && op.Kind == ipvsplan.DestroySet
	}
	what := "ipset restore (sets)"
	if destroy {
		what = "ipset destroy (kube-proxy's sets)"
	}
	return ipvsOp{what: what, do: func(r *ipvsRun) (func(*ipvsRun) error, error) {
		err := b.kernel.Sets.Restore(r.ctx, in.Bytes())
		return func(r *ipvsRun) error { return b.setsBack(r.ctx, from, names) }, err
	}}, nil
}

// setsBack puts the named sets back as they were in was.
func (b *IPVS) setsBack(ctx context.Context, was []*ipvssyntax.Set, names []string) error {
	now, err := b.kernel.Sets.Save(ctx)
	if err != nil {
		return err
	}
	back, err := ipvsplan.SetsBack(now, was, names)
	if err != nil || len(back) == 0 {
		return err
	}
	var in bytes.Buffer
	if err := ipvsplan.WriteSets(&in, back); err != nil {
		return err
	}
	return b.kernel.Sets.Restore(ctx, in.Bytes())
}
