package syntax

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/svcgen/svcgen/model"
)

// Node is the ipvs-mode state of one node for one IP family: what the script sets up
// and what Parse* read back from a node. Every list is in the package's fixed order.
type Node struct {
	Family model.IPFamily
	// Sysctls are the kernel settings, in kube-proxy's order.
	Sysctls []Sysctl
	// Timeouts for "ipvsadm --set"; all zero leaves the kernel's.
	Timeouts Timeouts
	// Addresses are bound to kube-ipvs0 as host routes (/32, /128), sorted.
	Addresses []netip.Prefix
	// Sets are the 17 sets, in upstream's order, entries sorted.
	Sets []*Set
	// Services are the virtual servers in ipvsadm's save order (protocol, address,
	// port), real servers by address then port.
	Services []*VirtualServer
	// ExcludeCIDRs hold virtual servers kube-proxy does not own: the script never
	// deletes one inside them.
	ExcludeCIDRs []netip.Prefix
	// NAT and Filter are the companion chains: kube-proxy's restore payload.
	NAT, Filter Table
}

// Sysctl is one kernel setting.
type Sysctl struct {
	Name  string // dotted: net.ipv4.vs.conntrack
	Value string
}

// Timeouts are IPVS connection timeouts in seconds; 0 keeps the kernel's value.
type Timeouts struct {
	TCP, TCPFin, UDP int
}

// Table is a table of the iptables payload: the chains it declares (and so flushes)
// and its rules in kube-proxy's order, which interleaves chains.
type Table struct {
	Name   string
	Chains []string
	Rules  []Rule
}

// Add appends the rule "-A chain args...".
func (t *Table) Add(chain string, args ...string) {
	t.Rules = append(t.Rules, Rule{Chain: chain, Args: args})
}

// Rule is "-A Chain Args...".
type Rule struct {
	Chain string
	Args  []string
}

// VirtualServer is one IPVS service, with its real servers.
type VirtualServer struct {
	Protocol  model.Protocol
	Address   netip.AddrPort
	Scheduler string
	// Flags are the kernel's service flags (FlagPersistent, FlagSched2...).
	Flags uint32
	// Timeout is the persistence timeout in seconds (with FlagPersistent).
	Timeout uint32
	// Netmask is ipvsadm's -M when it is not the family's default; empty otherwise.
	Netmask string
	Reals   []RealServer
	// For names the service ports this virtual server serves ("ns/svc:port cluster
	// IP"); it is svcgen's annotation, not read back from a node.
	For []string
}

// Key is how ipvsadm names the service: "-t 10.0.0.1:80", "-u [fd00::1]:53",
// "--sctp-service 10.0.0.1:9".
func (vs *VirtualServer) Key() string {
	return protocolSwitch(vs.Protocol) + " " + vs.Address.String()
}

// Same reports whether vs is configured as o is (same key assumed): what "ipvsadm -Sn"
// shows of them, the scheduler, the flags and, with persistence, its timeout and
// netmask. A virtual server that differs is edited in place (kube-proxy's
// UpdateVirtualServer), so its address stays up and its connections go on.
func (vs *VirtualServer) Same(o *VirtualServer) bool {
	if vs.Scheduler != o.Scheduler || vs.Flags != o.Flags {
		return false
	}
	return vs.Flags&FlagPersistent == 0 || (vs.Timeout == o.Timeout && vs.Netmask == o.Netmask)
}

// ID names the virtual server by what the kernel keys it on: protocol, address, port.
func (vs *VirtualServer) ID() ServiceID { return ServiceID{vs.Protocol, vs.Address} }

// ServiceID names a virtual server: protocol and address:port ("-t 10.0.0.1:80").
type ServiceID struct {
	Protocol model.Protocol
	Address  netip.AddrPort
}

// RealID names a real server of a virtual server ("-t 10.0.0.1:80 -r 10.1.0.1:8080"):
// the same destination under two virtual servers is two real servers.
type RealID struct {
	Service ServiceID
	Real    netip.AddrPort
}

// RealID is the name of rs as a real server of vs.
func (vs *VirtualServer) RealID(rs RealServer) RealID { return RealID{vs.ID(), rs.Address} }

// Conns are the connections the kernel counts to a real server, as "ipvsadm -Ln"
// shows them: Active (ActiveConn, TCP connections established) and Inactive
// (InActConn, every other state: closing, TIME_WAIT, and UDP's).
type Conns struct {
	Active, Inactive int
}

// RealServer is one destination of a virtual server.
type RealServer struct {
	Address netip.AddrPort
	// Forward is the forwarding method: Masquerade (kube-proxy's), Route or Tunnel.
	Forward Forward
	Weight  int
}

// Forward is a forwarding method, as ipvsadm writes it.
type Forward string

// Forwarding methods.
const (
	Masquerade Forward = "-m"
	Route      Forward = "-g" // direct routing; ipvsadm also prints it for local-node
	Tunnel     Forward = "-i"
)

// Set is an ipset with its entries.
type Set struct {
	Name string
	Type string
	// Family is "inet" or "inet6" for hash sets, empty for bitmap:port.
	Family   string
	HashSize int
	MaxElem  int
	// Range is the port range of a bitmap:port set.
	Range string
	// Comment is what the set's iptables rules say about it (not stored in the set).
	Comment string
	Entries []string
}

// Set returns the set of that name, or nil.
func (n *Node) Set(name string) *Set {
	for _, s := range n.Sets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Service returns the virtual server of that key ("-t 10.0.0.1:80"), or nil.
func (n *Node) Service(key string) *VirtualServer {
	for _, vs := range n.Services {
		if vs.Key() == key {
			return vs
		}
	}
	return nil
}

// protocolNumber orders protocols as the kernel numbers them, which is ipvsadm's
// save order.
func protocolNumber(p model.Protocol) int {
	switch p {
	case model.TCP:
		return 6
	case model.UDP:
		return 17
	case model.SCTP:
		return 132
	}
	return 256
}

// SortServices puts virtual servers and their real servers in ipvsadm's save order.
func SortServices(vss []*VirtualServer) {
	slices.SortFunc(vss, func(a, b *VirtualServer) int {
		if c := cmp.Compare(protocolNumber(a.Protocol), protocolNumber(b.Protocol)); c != 0 {
			return c
		}
		return a.Address.Compare(b.Address)
	})
	for _, vs := range vss {
		if !slices.IsSortedFunc(vs.Reals, CompareReals) {
			slices.SortFunc(vs.Reals, CompareReals)
		}
	}
}

// CompareReals orders real servers as ipvsadm saves them: by address, then port.
func CompareReals(a, b RealServer) int { return a.Address.Compare(b.Address) }
