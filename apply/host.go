package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/model"
	"sigs.k8s.io/knftables"
)

// What kube-proxy checks on a host before it makes its proxiers, and how svcgen
// follows it (cmd/kube-proxy/app/server_linux.go, platformCheckSupported, and
// server.go, which calls it):
//
//   - iptables and ipvs modes: a family is supported when its tool works (iptables,
//     ip6tables: the nat table's POSTROUTING chain can be listed). Neither working is
//     an error; one not working leaves that family out, and kube-proxy runs
//     single-stack.
//   - nftables mode: both families pass this check; the proxier of each then makes
//     its table (knftables.New checks "add table" with nft --check), and a family
//     whose table cannot be made stops kube-proxy with an error.
//   - every mode: IPv6 also needs the kernel: /proc/net/if_inet6 present and
//     net.ipv6.conf.all.disable_ipv6 not 1 (both per network namespace); otherwise
//     IPv6 is left out.
//   - the primary family (the first node IP's) unsupported is an error.

// ErrNoFamily marks a family this host cannot program in a mode, which kube-proxy
// leaves out (running single-stack).
var ErrNoFamily = errors.New("no support for the IP family on this host")

// familyChecker is a backend that can tell whether this host lets it program its
// family: nil, an error wrapping ErrNoFamily (the family is left out), or another
// error (kube-proxy would not start).
type familyChecker interface {
	CheckFamily(ctx context.Context) error
}

// CheckFamily: the family's iptables tool works (kube-proxy's Present).
func (b *IPTables) CheckFamily(ctx context.Context) error {
	if err := b.tool().Present(ctx); err != nil {
		return fmt.Errorf("%w: %s cannot be used: %v", ErrNoFamily, b.Name(), err)
	}
	return nil
}

// CheckFamily: ipvs mode needs the family's iptables tool, as the iptables mode does.
func (b *IPVS) CheckFamily(ctx context.Context) error { return b.tables.CheckFamily(ctx) }

// CheckFamily: a table of the family can be made (nft --check), as knftables.New
// checks when kube-proxy makes the family's proxier.
func (b *NFTables) CheckFamily(ctx context.Context) error {
	k, ok := b.kernel().(interface {
		CheckTable(ctx context.Context, family knftables.Family) error
	})
	if !ok || b.kernel().Check() != nil {
		return nil // a kernel that cannot tell; without nft, the load says so
	}
	if err := k.CheckTable(ctx, b.family()); err != nil {
		return fmt.Errorf("%s: cannot make the %s kube-proxy table: %w", b.Name(), b.family(), err)
	}
	return nil
}

// CheckTable asks nft whether the kernel takes a table of the family, without
// making it: "nft --check" sends the transaction and aborts it, so nothing changes
// (not even the ruleset generation).
func (ExecNFT) CheckTable(ctx context.Context, family knftables.Family) error {
	_, err := runTool(ctx, []byte("add table "+string(family)+" kube-proxy\n"), "nft", "--check", "-f", "-")
	return err
}

// CheckTable asks Refuse, as a load of the same script would.
func (f *FakeNFT) CheckTable(_ context.Context, family knftables.Family) error {
	if f.Refuse != nil {
		return f.Refuse([]byte("add table " + string(family) + " kube-proxy\n"))
	}
	return nil
}

// Unsupported says why this host cannot program c's family (nil: it can, or c
// cannot tell). The kernel's IPv6 support is not part of it (see KernelIPv6).
func Unsupported(ctx context.Context, c Cleaner) error {
	if fc, ok := c.(familyChecker); ok {
		return fc.CheckFamily(ctx)
	}
	return nil
}

// KernelIPv6 says why this network namespace's kernel does no IPv6 (nil: it does),
// as kube-proxy checks it.
func KernelIPv6() error {
	if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
		return errors.New("the kernel has no IPv6 (no /proc/net/if_inet6)")
	}
	data, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	if err == nil && strings.TrimSpace(string(data)) == "1" {
		return errors.New("IPv6 is disabled (net.ipv6.conf.all.disable_ipv6 = 1)")
	}
	return nil
}

// HostFamilies is platformCheckSupported for a run: of the run's families (one
// backend each; primary is the family of the node's first IP), which the host can
// program. It returns which to keep, why each family left out is (left, "" for one
// kept), or the error kube-proxy would stop with. ipv6 is the kernel's check
// (KernelIPv6; nil: none).
func HostFamilies(ctx context.Context, families []model.IPFamily, backends []Backend, primary model.IPFamily, ipv6 func() error) (keep []bool, left []string, err error) {
	why := make([]error, len(families))
	for i, fam := range families {
		if fam == model.IPv6 && ipv6 != nil {
			if err := ipv6(); err != nil {
				why[i] = fmt.Errorf("%w: %v", ErrNoFamily, err)
				continue
			}
		}
		why[i] = Unsupported(ctx, backends[i])
	}
	// In kube-proxy's order: the platform check (no family; the primary one), then
	// the proxiers, which fail for a family they cannot program (nftables' table).
	keep, left = make([]bool, len(families)), make([]string, len(families))
	var noPrimary, fatal error
	for i, fam := range families {
		switch {
		case why[i] == nil:
			keep[i] = true
		case !errors.Is(why[i], ErrNoFamily):
			keep[i], fatal = true, cmp.Or(fatal, why[i])
		case fam == primary:
			noPrimary = fmt.Errorf("no support for the primary IP family %s (kube-proxy would not start): %w", fam, why[i])
		default:
			left[i] = fmt.Sprintf("%s left out, as kube-proxy runs single-stack on this host: %v", fam, why[i])
		}
	}
	if !slices.Contains(keep, true) {
		return nil, nil, fmt.Errorf("none of the run's IP families can be programmed on this host: %w", errors.Join(why...))
	}
	if noPrimary != nil {
		return nil, nil, noPrimary
	}
	if fatal != nil {
		return nil, nil, fatal
	}
	return keep, left, nil
}
