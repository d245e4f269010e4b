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
// What the kernel does (net/netfilter/nf_tables_api.c, and measured in
// TestGenerationCountsCommits): each message of a batch that changes something puts
// an entry on the transaction's commit list; nf_tables_commit returns at once, without
// moving the generation, when that list is empty, and otherwise moves base_seq (the
// generation id) by one, skipping 0 when it wraps. An "add element" of an element
// already there, a "flush" of an empty chain or set, and an iptables-nft restore block
// that declares an empty chain as it is make no entry, so a transaction of only such
// lines may commit nothing. A new rule, and a delete of anything, always make one.
//
// So every transaction svcgen loads carries a commit mark: it adds a chain of its own
// and deletes it again (nftplan.Load.MarkCommits' svcgen-commit, iptables.Options.MarkCommits'
// SVCGEN-COMMIT, declared and deleted in each block). The delete is always an entry
// (the chain is there: the same transaction added it, or another program made one of
// that name, which the mark then deletes), so each transaction moves the generation by
// exactly one whatever the kernel holds, and nothing of the mark is left after it.
// (The alternative, "create element" and "create chain" where the plan knows the
// object is absent, covers neither flushes nor iptables-nft's chain lines, and turns a
// concurrent writer into a refused load to handle.)
//
// When the state is exact, and when not:
//
//   - After a read: the generation is read before and after it; if they are the same,
//     nothing committed during the read, and the state is the kernel's at that
//     generation. Otherwise it is not trusted (the next sync reads again).
//   - After a load: the generation g0 is read just before it and g1 just after, all
//     under the apply lock. The state after the load is exact at g1 only if the state
//     planned from was exact at g0 and the load's own transactions account for the
//     whole of g1-g0: a load of n transactions, each sure to change the ruleset (its
//     commit mark), moves the generation by exactly n, so g1-g0 == n leaves no room
//     for another program's commit between g0 and g1, in particular none between the
//     end of the load and the read of g1. Such a commit makes g1-g0 larger, and the
//     next sync reads. (A transaction of another program that commits nothing changes
//     nothing either.) A load without the mark on every transaction (cleanup's) is not
//     counted, nor is one across the wrap past 0: the next sync reads.
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
// is sure to change the ruleset (sure: it adds a rule or deletes something, as the
// commit mark does), so that the load moves the generation by exactly n.
type Commits struct {
	N    int
	Sure bool
}

// committer is a plan that knows its Commits.
type committer interface {
	Commits() Commits
}
