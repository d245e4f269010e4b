package ipvskernel

import (
	"context"
	"net/netip"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// Kernel is what apply's ipvs backend changes, each part behind a small interface so
// that a Fake can stand in for it: IPVS (moby/ipvs's netlink), the sets (the ipset
// tool), kube-ipvs0 and its addresses (netlink), the sysctls (/proc/sys).
type Kernel struct {
	// Check returns nil when the kernel has IPVS, else why not (wrapping ErrMissing).
	Check func() error
	// OpenIPVS opens IPVS in the calling thread's network namespace; the caller
	// closes it.
	OpenIPVS func() (IPVS, error)
	Sets     IPSets
	Links    Links
	Sysctls  Sysctls
}

// IPVS is the kernel's IPVS table, as kube-proxy's pkg/proxy/ipvs/util.Interface is,
// in ipvs/syntax's model. Errors are the kernel's (errors.Is(err, unix.EEXIST) for a
// virtual server that exists, ESRCH for a missing one, ENOENT for a missing real
// server or an unknown scheduler).
type IPVS interface {
	// Services lists the virtual servers of both families with their real servers,
	// in ipvsadm's order, and the connections the kernel counts to each real server.
	// Firewall-mark services are left out: svcgen neither makes nor models them.
	Services() ([]*syntax.VirtualServer, map[syntax.RealID]syntax.Conns, error)
	// AddService adds a virtual server, without its real servers.
	AddService(vs *syntax.VirtualServer) error
	// UpdateService changes a virtual server's scheduler, flags and timeout in place.
	UpdateService(vs *syntax.VirtualServer) error
	// DeleteService deletes a virtual server with its real servers.
	DeleteService(vs *syntax.VirtualServer) error
	AddReal(vs *syntax.VirtualServer, rs syntax.RealServer) error
	// UpdateReal sets a real server's forwarding method and weight.
	UpdateReal(vs *syntax.VirtualServer, rs syntax.RealServer) error
	DeleteReal(vs *syntax.VirtualServer, rs syntax.RealServer) error
	Close()
}

// IPSets is the kernel's ipsets, as the ipset tool shows and changes them.
type IPSets interface {
	// Save lists every set with its entries ("ipset save").
	Save(ctx context.Context) ([]*syntax.Set, error)
	// Restore runs "ipset restore -exist" input: its commands in order, stopping at
	// the first that fails, whose error it returns (those before it stay done).
	Restore(ctx context.Context, input []byte) error
}

// Links is the network links and their addresses.
type Links interface {
	// Addresses lists a link's addresses of one family, sorted; ok is false when
	// there is no such link.
	Addresses(link string, ipv6 bool) (addrs []netip.Prefix, ok bool, err error)
	// AddDummy adds a dummy link.
	AddDummy(link string) error
	DeleteLink(link string) error
	AddAddress(link string, p netip.Prefix) error
	DeleteAddress(link string, p netip.Prefix) error
}

// Sysctls is the kernel's settings, by dotted name ("net.ipv4.vs.conntrack").
type Sysctls interface {
	// Get reads a setting; ok is false when the kernel has no such setting.
	Get(name string) (value string, ok bool, err error)
	Set(name, value string) error
}

// Runner runs a tool with stdin and returns its stdout; its error says what the tool
// said on stderr.
type Runner func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)

// Host is the running kernel (in the calling thread's network namespace): IPVS
// through moby/ipvs, links through netlink, the sets through the ipset tool run by
// run, the sysctls under /proc/sys.
func Host(run Runner) Kernel {
	return Kernel{
		Check:    Check,
		OpenIPVS: func() (IPVS, error) { return OpenIPVS("") },
		Sets:     IPSetTool{Run: run},
		Links:    netlinkLinks{},
		Sysctls:  ProcSysctls{Root: "/proc/sys"},
	}
}
