package plan

import (
	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
)

// Retirement is what becomes of a real server its virtual server no longer wants.
type Retirement uint8

const (
	// Delete: the real server goes now.
	Delete Retirement = iota + 1
	// Drain: the real server is set to weight 0, so new connections avoid it while
	// open ones go on; a later plan deletes it once it has none.
	Drain
	// Draining: the real server is at weight 0 already and still has connections: it
	// stays as it is.
	Draining
)

func (r Retirement) String() string {
	return map[Retirement]string{Delete: "delete", Drain: "drain", Draining: "draining"}[r]
}

// Retired is the decision on one real server.
type Retired struct {
	ID  syntax.RealID
	How Retirement
}

// Retire decides as kube-proxy's graceful termination does
// (pkg/proxy/ipvs/graceful_termination.go, GracefulDeleteRS and deleteRsFunc, with
// utilipvs.IsRsGracefulTerminationNeeded): a real server of a TCP virtual server that
// the kernel still counts connections to, active or inactive (ActiveConn +
// InactiveConn != 0), is drained at weight 0 rather than deleted, and deleted by a
// later sync that finds it with none. A real server of a UDP or SCTP virtual server
// is deleted at once, whatever its connections: there is no graceful termination for
// them, and with expire_nodest_conn=1 the kernel drops their connections on the next
// packet.
func Retire(vs *syntax.VirtualServer, rs syntax.RealServer, c syntax.Conns) Retirement {
	switch {
	case vs.Protocol != model.TCP || c.Active+c.Inactive == 0:
		return Delete
	case rs.Weight == 0:
		return Draining
	}
	return Drain
}

// services plans IPVS in the awk program's order (see the package doc). Virtual
// servers are matched by a map; their real servers, both lists in ipvsadm's order, by
// walking the two side by side (a map of every real server of a large node costs more
// than the rest of the plan).
func (p *planner) services() {
	wanted := make(map[syntax.ServiceID]*syntax.VirtualServer, len(p.want.Services))
	for _, vs := range p.want.Services {
		wanted[vs.ID()] = vs
	}
	have := make(map[syntax.ServiceID]*syntax.VirtualServer, len(p.have.Services))
	for _, vs := range p.have.Services {
		have[vs.ID()] = vs
		if wanted[vs.ID()] == nil && p.owned(vs) {
			p.add(Op{Kind: DeleteService, Service: vs})
		}
	}
	for _, vs := range p.want.Services {
		switch old := have[vs.ID()]; {
		case old == nil:
			p.add(Op{Kind: AddService, Service: vs})
		case p.full || !vs.Same(old):
			p.add(Op{Kind: EditService, Service: vs, Was: old})
		}
	}
	for _, vs := range p.have.Services {
		if w := wanted[vs.ID()]; w != nil {
			matchReals(vs.Reals, w.Reals, func(rs syntax.RealServer, wanted *syntax.RealServer) {
				if wanted == nil {
					p.retire(vs, w, rs)
				}
			})
		}
	}
	for _, vs := range p.want.Services {
		var old []syntax.RealServer
		if o := have[vs.ID()]; o != nil {
			old = o.Reals
		}
		matchReals(vs.Reals, old, func(rs syntax.RealServer, was *syntax.RealServer) {
			switch {
			case was == nil:
				p.add(Op{Kind: AddReal, Service: vs, Real: rs})
			case p.full || *was != rs:
				p.add(Op{Kind: EditReal, Service: vs, Real: rs, WasReal: *was})
			}
		})
	}
}

// matchReals calls f for each real server of a with the one of the same address in b,
// or nil. Both lists are in ipvsadm's order (by address, then port), as Have and
// syntax.Node hold them.
func matchReals(a, b []syntax.RealServer, f func(rs syntax.RealServer, match *syntax.RealServer)) {
	j := 0
	for _, rs := range a {
		for j < len(b) && b[j].Address.Compare(rs.Address) < 0 {
			j++
		}
		if j < len(b) && b[j].Address == rs.Address {
			f(rs, &b[j])
		} else {
			f(rs, nil)
		}
	}
}

// retire decides on rs, a real server of the node's virtual server vs that is not
// wanted; the operations name the wanted virtual server w (the same key, with the
// service ports it is for).
func (p *planner) retire(vs, w *syntax.VirtualServer, rs syntax.RealServer) {
	id := vs.RealID(rs)
	how := Retire(vs, rs, p.have.Conns[id])
	p.retired = append(p.retired, Retired{ID: id, How: how})
	switch how {
	case Delete:
		p.add(Op{Kind: DeleteReal, Service: w, Real: rs})
		return
	case Drain:
		drained := rs
		drained.Weight = 0
		p.add(Op{Kind: DrainReal, Service: w, Real: drained, WasReal: rs})
		rs = drained
	}
	p.retiring[vs.ID()] = append(p.retiring[vs.ID()], rs)
}
