//go:build !linux

package ipvskernel

import (
	"errors"
	"net/netip"
)

// ErrMissing is returned (wrapped) when the kernel has no IPVS.
var ErrMissing = errors.New("the kernel has no IPVS")

// Check reports that IPVS is Linux only.
func Check() error { return ErrMissing }

// OpenIPVS reports that IPVS is Linux only.
func OpenIPVS(string) (IPVS, error) { return nil, ErrMissing }

// netlinkLinks has no links to show off Linux.
type netlinkLinks struct{}

var errLinux = errors.New("network links are Linux only")

func (netlinkLinks) Addresses(string, bool) ([]netip.Prefix, bool, error) { return nil, false, nil }
func (netlinkLinks) AddDummy(string) error                                { return errLinux }
func (netlinkLinks) DeleteLink(string) error                              { return errLinux }
func (netlinkLinks) AddAddress(string, netip.Prefix) error                { return errLinux }
func (netlinkLinks) DeleteAddress(string, netip.Prefix) error             { return errLinux }
