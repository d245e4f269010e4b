package apply

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Cheap drift checks: nf_tables keeps one ruleset generation id per network namespace,
// which every committed transaction moves by one, whoever commits it (nft, iptables-nft,
// any other program). Reading it (NFT_MSG_GETGEN) costs one netlink round trip, where
// reading the rules back costs seconds at 10,000 Services. So the Applier remembers the
// generation at which the state it holds is exactly the kernel's, and skips the read
// while the generation has not moved.
//
// When the state is exact, and when not:
//
//   - After a read: the generation is read before and after it; if they are the same,
//     nothing committed during the read, and the state is the kernel's at that
//     generation. Otherwise it is not trusted (the next sync reads again).
//   - After a load: the generation g0 is read just before it and g1 just after, all
//     under the apply lock. The state after the load is exact at g1 only if the state
//     planned from was exact at g0 and the load's own transactions account for the
//     whole of g1-g0: a load of n transactions, each sure to change the ruleset, moves
//     the generation by exactly n, so g1-g0 == n leaves no room for another program's
//     commit between g0 and g1, in particular none between the end of the load and the
//     read of g1. ("Sure to change": a transaction that adds a rule or deletes
//     something; one that only adds elements or chains, or flushes, may be a no-op in
//     the kernel if another program made the same change first, and then a foreign
//     commit could hide behind it. After such a load, or any other, the state is not
//     trusted and the next sync reads.)
//
// Rules outside nf_tables are not covered: iptables-legacy and IPVS keep no generation,
// so those backends are read every time (see generationTracked).

// Generation reads a ruleset generation id; nil means there is none to read.
type Generation func() (uint32, error)

// NFTablesGeneration reads nf_tables' ruleset generation id in the network namespace of
// the calling thread, through netlink (NFT_MSG_GETGEN).
func NFTablesGeneration() (uint32, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		// struct nfgenmsg: family, version, resource id (big-endian).
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN) || len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("nf_tables generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, fmt.Errorf("nf_tables generation: %w", err)
		}
	}
	return 0, errors.New("nf_tables generation: the kernel's answer has no generation id")
}

// generationTracked is a backend whose rules live in nf_tables, so that the generation
// id moves whenever they change.
type generationTracked interface {
	InNFTables() bool
}

// Commits is what a plan's load commits to nf_tables: n transactions, and whether each
// is sure to change the ruleset (sure), so that the load moves the generation by
// exactly n.
type Commits struct {
	N    int
	Sure bool
}

// committer is a plan that knows its Commits.
type committer interface {
	Commits() Commits
}
