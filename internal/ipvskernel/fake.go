package ipvskernel

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/svcgen/svcgen/ipvs/syntax"
)

// Fake is a kernel in memory that behaves like the real one where apply can tell: it
// refuses a virtual server that exists (EEXIST), one with an unknown scheduler
// (ENOENT), any change to a missing virtual server (ESRCH) or real server (ENOENT), a
// real server of the other family (EINVAL), a set entry that does not fit its set or
// names a missing set (stopping "ipset restore" there, as ipset does, the lines before
// it done), an address on a missing link, an address bound twice (EEXIST) and a
// missing sysctl (ENOENT). It counts the connections to each real server as a test
// sets them, and can be told to fail its Nth change, so that load, rollback and undo
// are tested without root. It is safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	noIPVS   error
	services map[syntax.ServiceID]*syntax.VirtualServer
	conns    map[syntax.RealID]syntax.Conns
	sets     []*syntax.Set
	links    map[string][]netip.Prefix
	sysctls  map[string]string
	changes  int
	fail     map[int]error
	calls    []string
}

// NewFake is a kernel with IPVS and no virtual server, set or link, whose sysctls
// are the ones kube-proxy's ipvs mode sets, at the kernel's defaults.
func NewFake() *Fake {
	return &Fake{
		services: map[syntax.ServiceID]*syntax.VirtualServer{},
		conns:    map[syntax.RealID]syntax.Conns{},
		links:    map[string][]netip.Prefix{},
		fail:     map[int]error{},
		sysctls: map[string]string{
			"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0", "net.ipv4.vs.expire_quiescent_template": "0",
			"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.ip_forward": "0", "net.ipv4.conf.all.arp_ignore": "0",
			"net.ipv4.conf.all.arp_announce": "0",
		},
	}
}

// Kernel is the fake behind the kernel's interfaces.
func (f *Fake) Kernel() Kernel {
	return Kernel{
		Check:    f.check,
		OpenIPVS: func() (IPVS, error) { return fakeIPVS{f}, nil },
		Sets:     fakeSets{f},
		Links:    fakeLinks{f},
		Sysctls:  fakeSysctls{f},
	}
}

// WithoutIPVS makes the fake a kernel without IPVS: Check fails, as on these machines.
func (f *Fake) WithoutIPVS() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noIPVS = fmt.Errorf("%w (a fake without it)", ErrMissing)
}

func (f *Fake) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.noIPVS
}

// FailAt makes the nth change from now (1 is the next) fail with err, changing
// nothing. Changes are the calls that write: to IPVS, a restore of the sets, to links
// and addresses, to a sysctl; reads are not counted.
func (f *Fake) FailAt(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[f.changes+n] = err
}

// Calls are the changes asked of the fake so far, each as the tool would say it,
// failed ones with the error.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// SetConns sets the connections the kernel counts to a real server.
func (f *Fake) SetConns(id syntax.RealID, c syntax.Conns) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[id] = c
}

// change counts a change and says whether it is the one to fail. The caller holds
// the lock.
func (f *Fake) change(what string, do func() error) error {
	f.changes++
	err := f.fail[f.changes]
	delete(f.fail, f.changes)
	if err == nil {
		err = do()
	}
	if err != nil {
		what += ": " + err.Error()
	}
	f.calls = append(f.calls, what)
	return err
}

// State is everything the fake holds, as the tools would print it: "ipvsadm -Sn"
// with the connection counts, "ipset save", the links with their addresses, the
// sysctls. Two fakes in the same state print the same.
func (f *Fake) State() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b bytes.Buffer
	vss := f.list()
	if err := syntax.WriteRules(&b, vss); err != nil {
		panic(err) // a bytes.Buffer does not fail
	}
	for _, vs := range vss {
		for _, rs := range vs.Reals {
			if c, ok := f.conns[vs.RealID(rs)]; ok {
				fmt.Fprintf(&b, "# conns %s -r %s: %d active, %d inactive\n", vs.Key(), rs.Address, c.Active, c.Inactive)
			}
		}
	}
	if err := syntax.WriteSave(&b, f.sets); err != nil {
		panic(err)
	}
	for _, name := range slices.Sorted(maps.Keys(f.links)) {
		fmt.Fprintf(&b, "link %s %v\n", name, f.links[name])
	}
	for _, name := range slices.Sorted(maps.Keys(f.sysctls)) {
		fmt.Fprintf(&b, "%s = %s\n", name, f.sysctls[name])
	}
	return b.String()
}

// list is the virtual servers, copied, in ipvsadm's order. The caller holds the lock.
func (f *Fake) list() []*syntax.VirtualServer {
	var out []*syntax.VirtualServer
	for _, vs := range f.services {
		c := *vs
		c.Reals = slices.Clone(vs.Reals)
		out = append(out, &c)
	}
	syntax.SortServices(out)
	return out
}

type fakeSets struct{ f *Fake }

func (s fakeSets) Save(context.Context) ([]*syntax.Set, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return syntax.RestoreSets("ipset save", s.f.sets, strings.NewReader(""))
}

func (s fakeSets) Restore(_ context.Context, input []byte) error {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.change("ipset restore -exist", func() error {
		sets, err := syntax.RestoreSets("ipset restore", f.sets, bytes.NewReader(input))
		f.sets = sets
		return err
	})
}

type fakeSysctls struct{ f *Fake }

func (s fakeSysctls) Get(name string) (string, bool, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	v, ok := s.f.sysctls[name]
	return v, ok, nil
}

func (s fakeSysctls) Set(name, value string) error {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.change("sysctl "+name+"="+value, func() error {
		if _, ok := f.sysctls[name]; !ok {
			return fmt.Errorf("sysctl %s: %w", name, syscall.ENOENT)
		}
		f.sysctls[name] = value
		return nil
	})
}
