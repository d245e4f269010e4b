package apply

import (
	"context"
	"errors"
	"os/exec"
	"strings"

	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// NFTKernel is nf_tables as the nftables backend uses it, through the nft command:
// one script loaded as one transaction, and kube-proxy's table listed. FakeNFT stands
// in for it where there is no kernel to use (tests without root).
type NFTKernel interface {
	// Check says why nft cannot run here (nil: it can).
	Check() error
	// Run loads a script ("nft -f -") as one nf_tables transaction: all of it or, when
	// the kernel refuses any of it, none. The error says what nft says, with the line
	// it refused ("/dev/stdin:12:1-40: Error: ...").
	Run(ctx context.Context, script []byte) error
	// List prints kube-proxy's table of a family as "nft list table" does; nil when
	// there is no such table.
	List(ctx context.Context, family knftables.Family) ([]byte, error)
}

// ExecNFT runs the nft command.
type ExecNFT struct{}

// errNoNFT: the nft command is not installed.
var errNoNFT = errors.New("the nft command is not installed")

func (ExecNFT) Check() error {
	if _, err := exec.LookPath("nft"); err != nil {
		return errNoNFT
	}
	return nil
}

func (ExecNFT) Run(ctx context.Context, script []byte) error {
	_, err := runTool(ctx, script, "nft", "-f", "-")
	return err
}

func (ExecNFT) List(ctx context.Context, family knftables.Family) ([]byte, error) {
	table := string(family) + " " + nftsyntax.TableName
	list, err := runTool(ctx, nil, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	if !strings.Contains("\n"+string(list), "\ntable "+table+"\n") {
		return nil, nil
	}
	return runTool(ctx, nil, "nft", "list", "table", string(family), nftsyntax.TableName)
}
