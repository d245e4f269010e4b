package apply

import (
	"fmt"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// ForMode returns the backend of a proxy mode for one IP family. wait bounds the waits
// for locks the mode's tools take (the xtables lock).
func ForMode(mode compiler.Mode, family model.IPFamily, wait time.Duration) (Backend, error) {
	switch mode {
	case compiler.IPTables, "":
		return NewIPTables(family, wait), nil
	case compiler.IPVS:
		return NewIPVS(family, wait), nil
	case compiler.NFTables:
		return NewNFTables(family), nil
	}
	return nil, fmt.Errorf("mode %s: unknown (want iptables, ipvs or nftables)", mode)
}

// Cleaners are what cleanup runs: every mode, both families. The iptables ones come
// first: they remove the rules that use the ipvs mode's sets.
func Cleaners(wait time.Duration) []Cleaner {
	return []Cleaner{NewIPTables(model.IPv4, wait), NewIPTables(model.IPv6, wait), NewIPVS(model.IPv4, wait), NewIPVS(model.IPv6, wait), NewNFTables(model.IPv4), NewNFTables(model.IPv6)}
}

// stateAs is from as a backend's own kind of state S; mode names the backend in the
// error. A state another backend read is the caller's mistake.
func stateAs[S State](mode string, from State) (S, error) {
	st, ok := from.(S)
	if !ok {
		return st, fmt.Errorf("%s: a state of another backend", mode)
	}
	return st, nil
}

// sameFamily checks that the service map is for the family of the backend named
// name (ipv6: an IPv6 backend).
func sameFamily(name string, ipv6 bool, sm *ir.ServiceMap) error {
	if (sm.Family == model.IPv6) != ipv6 {
		return fmt.Errorf("%s: the service map is for %s", name, sm.Family)
	}
	return nil
}
