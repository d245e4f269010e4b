package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/mdlayher/netlink"
	"github.com/svcgen/svcgen/nftables/nlbatch"
	"golang.org/x/sys/unix"
)

// NetlinkNFT is nf_tables as apply uses it by default: a transaction that
// nftables/nlbatch can encode (a partial sync's: chains, the Services' rules, elements,
// affinity sets, the commit mark) goes to the kernel as one netlink batch, which is one
// nf_tables transaction exactly as "nft -f" of the same text is (all of it or none;
// the generation moves by one), with the messages nft would send; anything else (a
// whole table, a staged load, cleanup's delete) goes through nft -f whole, as does
// listing. The difference is time: nft reads the whole table into its cache before it
// sends a batch (1 to 2 s at 10,000 Services); the batch alone costs what the kernel
// takes to commit it (see BENCHMARKS.md, "nftables at kernel speed").
//
// A batch the kernel refuses changed nothing; the same text is then run through nft
// -f, so the error is nft's own (naming the line apply reports), or, should nft load
// it after all, the transaction is loaded once all the same.
type NetlinkNFT struct {
	ExecNFT
	// Loaded, when set, is told how each transaction was loaded: through netlink or,
	// with the reason, through nft -f (tests).
	Loaded func(netlinkBatch bool, why error)
}

// DefaultNFTKernel is the kernel apply's nftables backend uses: NetlinkNFT, or, with
// SVCGEN_NFT_LOADER=nft in the environment, ExecNFT alone (every transaction through
// nft -f, as before NetlinkNFT: for comparisons, and a way back should a kernel
// refuse what nft would load).
func DefaultNFTKernel() NFTKernel {
	if os.Getenv("SVCGEN_NFT_LOADER") == "nft" {
		return ExecNFT{}
	}
	return NetlinkNFT{}
}

func (k NetlinkNFT) Run(ctx context.Context, script []byte) error {
	var enc nlbatch.Encoder
	msgs, err := enc.Encode(script)
	if err == nil {
		err = sendBatch(msgs)
		if err == nil {
			k.loaded(true, nil)
			return nil
		}
		if !errors.Is(err, errNotCommitted) {
			// The kernel may have committed the batch: running it again could load
			// it twice. The caller reads the kernel again (apply forgets its state).
			return err
		}
	}
	k.loaded(false, err)
	return k.ExecNFT.Run(ctx, script)
}

func (k NetlinkNFT) loaded(nl bool, why error) {
	if k.Loaded != nil {
		k.Loaded(nl, why)
	}
}

// errBatch is a batch whose answer could not be read; errNotCommitted one that the
// kernel refused or that was never sent, so that nothing of it was committed.
var (
	errBatch        = errors.New("nf_tables batch")
	errNotCommitted = fmt.Errorf("%w not committed", errBatch)
)

// sendBatch sends messages as one nf_tables batch (one transaction) in the network
// namespace of the calling thread and waits for the kernel's answer to each.
func sendBatch(msgs []nlbatch.Message) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotCommitted, err)
	}
	defer c.Close()
	// Acknowledgements without the messages they answer, and room for many: a lost
	// one (ENOBUFS) would leave the batch's fate unknown.
	if err := c.SetOption(netlink.CapAcknowledge, true); err != nil {
		return fmt.Errorf("%w: %v", errNotCommitted, err)
	}
	if err := c.SetReadBuffer(4 << 20); err != nil {
		return fmt.Errorf("%w: %v", errNotCommitted, err)
	}
	batch := make([]netlink.Message, 0, len(msgs)+2)
	batch = append(batch, batchMark(unix.NFNL_MSG_BATCH_BEGIN))
	for _, m := range msgs {
		m.Header.Flags |= netlink.Acknowledge
		batch = append(batch, m.Message)
	}
	batch = append(batch, batchMark(unix.NFNL_MSG_BATCH_END))
	if _, err := c.SendMessages(batch); err != nil {
		return fmt.Errorf("%w: %v", errNotCommitted, err)
	}
	// The kernel has processed the batch by the time the send returns; each message
	// is acknowledged, or a refusal is reported (an error from the kernel: the whole
	// batch was aborted, nothing committed).
	for acked := 0; acked < len(msgs); {
		replies, err := c.Receive()
		// The kernel's refusal is an OpError of a bare Errno (mdlayher/netlink wraps
		// the socket's own errors, ENOBUFS say, in an os.SyscallError).
		var oe *netlink.OpError
		if errors.As(err, &oe) {
			if _, refused := oe.Err.(syscall.Errno); refused {
				return fmt.Errorf("%w: %v", errNotCommitted, err)
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errBatch, err)
		}
		acked += len(replies)
	}
	return nil
}

// batchMark is a batch's begin or end message for nf_tables.
func batchMark(t int) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(t), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES},
	}
}
