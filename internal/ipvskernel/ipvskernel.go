//go:build linux

// Package ipvskernel is the kernel as apply's ipvs backend sees it: IPVS, the
// ipsets, links and addresses, sysctls, each behind a small interface (Kernel) with
// the running kernel's implementation (Host: moby/ipvs, the ipset tool, netlink,
// /proc/sys) and an in-memory Fake that behaves like it, so that loads, rollbacks and
// undos are tested without root. The qemu guest of e2e/ipvsvm tests Host for real.
//
// Check tells whether the running kernel has IPVS, before anything talks to it
// through github.com/moby/ipvs. That library reports success on a kernel without
// IPVS (moby/ipvs issue 27: its commands go out with generic-netlink family 0, which
// the kernel merely acknowledges), so a caller that does not check first "programs"
// virtual servers that never exist.
package ipvskernel

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
)

// ErrMissing is returned (wrapped) when the kernel has no IPVS.
var ErrMissing = errors.New("the kernel has no IPVS")

// Check returns nil when the kernel answers for the generic-netlink family "IPVS",
// which exists once the ip_vs module is loaded (or built in). It does not load the
// module: modprobe ip_vs first where that is wanted. The family is kernel-wide, so
// the answer holds in every network namespace.
func Check() error {
	fam, err := netlink.GenlFamilyGet("IPVS")
	if err == nil && fam != nil && fam.ID != 0 {
		return nil
	}
	hint := "load it with modprobe ip_vs"
	if _, serr := os.Stat("/sys/module/ip_vs"); serr == nil {
		hint = "the ip_vs module is loaded but its netlink family did not answer"
	}
	if err == nil {
		err = errors.New("no family id")
	}
	return fmt.Errorf("%w (generic-netlink family IPVS: %v; %s)", ErrMissing, err, hint)
}
