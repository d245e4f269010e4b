//go:build !linux

package ipvskernel

import "errors"

// ErrMissing is returned (wrapped) when the kernel has no IPVS.
var ErrMissing = errors.New("the kernel has no IPVS")

// Check reports that IPVS is Linux only.
func Check() error { return ErrMissing }
