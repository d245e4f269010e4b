package plan

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// Kind is what an operation does. The constants are in the order Plan emits them
// (Cleanup's DestroySet and DeleteLink come last).
type Kind uint8

// Kinds of operation.
const (
	SetSysctl     Kind = iota + 1 // Sysctl
	AddLink                       // kube-ipvs0, a dummy link
	AddAddress                    // Address bound to kube-ipvs0
	CreateSet                     // Set, without its entries
	AddEntry                      // Entry into Set
	DelEntry                      // Entry out of Set
	DeleteService                 // Service (the node's, with its real servers)
	AddService                    // Service, without its real servers
	EditService                   // Service in place; Was is the node's
	DrainReal                     // Real of Service set to weight 0; WasReal is the node's
	DeleteReal                    // Real of Service
	AddReal                       // Real of Service
	EditReal                      // Real of Service, to its forwarding method and weight; WasReal is the node's
	DeleteAddress                 // Address unbound from kube-ipvs0
	DestroySet                    // Set
	DeleteLink                    // kube-ipvs0
)

// Op is one typed change to the kernel: what apply carries out (and knows how to undo)
// and what its Line says.
type Op struct {
	Kind    Kind
	Sysctl  syntax.Sysctl
	Address netip.Prefix
	// Set is the set of CreateSet, DestroySet, AddEntry and DelEntry (for the last two
	// only its name counts).
	Set   *syntax.Set
	Entry string
	// Service is the virtual server: the wanted one, or the node's for DeleteService
	// (with the real servers to put back should it be undone). Was is the node's, for
	// EditService.
	Service, Was *syntax.VirtualServer
	// Real is the real server as the operation leaves it (for DeleteReal, as it was);
	// WasReal is the node's, for DrainReal and EditReal.
	Real, WasReal syntax.RealServer
}

// IsIPVS reports whether the operation changes IPVS (a virtual or real server): the
// operations the script's awk program prints too.
func (op Op) IsIPVS() bool { return op.Kind >= DeleteService && op.Kind <= EditReal }

// IsSet reports whether the operation is an "ipset restore" command.
func (op Op) IsSet() bool {
	return op.Kind == CreateSet || op.Kind == AddEntry || op.Kind == DelEntry || op.Kind == DestroySet
}

// Line says the operation as the tool that does it would: an "ipvsadm -R" line for
// IPVS, an "ipset restore" line for the sets, ip's and sysctl's commands otherwise.
func (op Op) Line() string {
	switch op.Kind {
	case SetSysctl:
		return "sysctl " + op.Sysctl.Name + "=" + op.Sysctl.Value
	case AddLink:
		return "ip link add " + syntax.DummyInterface + " type dummy"
	case DeleteLink:
		return "ip link del " + syntax.DummyInterface
	case AddAddress, DeleteAddress:
		return "ip addr " + map[Kind]string{AddAddress: "add", DeleteAddress: "del"}[op.Kind] + " " + op.Address.String() + " dev " + syntax.DummyInterface
	case CreateSet:
		return syntax.CreateLine(op.Set.Name, op.Set)
	case AddEntry, DelEntry:
		return syntax.SetLine(map[Kind]string{AddEntry: "add", DelEntry: "del"}[op.Kind], op.Set.Name, op.Entry)
	case DestroySet:
		return syntax.SetLine("destroy", op.Set.Name)
	case DeleteService, AddService, EditService:
		return syntax.ServiceCommand(map[Kind]string{DeleteService: "-D", AddService: "-A", EditService: "-E"}[op.Kind], op.Service)
	case DrainReal, DeleteReal, AddReal, EditReal:
		return syntax.RealCommand(map[Kind]string{DrainReal: "-e", DeleteReal: "-d", AddReal: "-a", EditReal: "-e"}[op.Kind], op.Service, op.Real)
	}
	return fmt.Sprintf("operation %d", op.Kind)
}

// For names the service ports an IPVS operation serves ("ns/svc:port cluster IP"),
// for errors; empty for other operations and for virtual servers read from a node.
func (op Op) For() string {
	if op.Service == nil {
		return ""
	}
	return strings.Join(op.Service.For, ", ")
}

// WriteSets writes set operations as "ipset restore -exist" input, one line each, in
// their order. Any other operation is an error: only the sets go through ipset.
func WriteSets(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	for _, op := range ops {
		if !op.IsSet() {
			return fmt.Errorf("%q is not an ipset command", op.Line())
		}
		bw.WriteString(op.Line() + "\n")
	}
	return bw.Flush()
}
