package apply

import (
	"fmt"
	"time"

	"github.com/svcgen/svcgen/compiler"
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
