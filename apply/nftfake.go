package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// FakeNFT is nf_tables in memory behind NFTKernel, for tests that have no kernel to
// use (no root). It applies a script as the kernel commits a transaction
// (nftsyntax.Ruleset.Run): all of it or none, refusing what the kernel refuses (a
// rule that names a missing chain, set or map; deleting a chain still named; an
// element of a missing map...), with nft's error text naming the line. It lists
// kube-proxy's tables as "nft list table" does, and counts its commits as the ruleset
// generation does. It holds kube-proxy's tables only.
type FakeNFT struct {
	mu    sync.Mutex
	rules nftsyntax.Ruleset
	gen   uint32
	// Refuse, when set, sees each script before it runs: an error it returns is what
	// nft says, and the script changes nothing (a kernel that refuses for reasons of
	// its own: out of memory, a concurrent change...).
	Refuse func(script []byte) error
	// Missing: nft is not installed.
	Missing bool
	// Scripts are the scripts run, in order, refused ones too.
	Scripts [][]byte
}

// NewFakeNFT is an empty nf_tables.
func NewFakeNFT() *FakeNFT { return &FakeNFT{} }

func (f *FakeNFT) Check() error {
	if f.Missing {
		return errNoNFT
	}
	return nil
}

// Run applies a script as one transaction. A refusal reads as nft's:
// "/dev/stdin:3:1-40: Error: Could not process rule: No such file or directory".
func (f *FakeNFT) Run(_ context.Context, script []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Scripts = append(f.Scripts, bytes.Clone(script))
	if f.Refuse != nil {
		if err := f.Refuse(script); err != nil {
			return err
		}
	}
	commits, err := f.rules.Run(string(script))
	if err != nil {
		return nftError(script, err)
	}
	if commits {
		f.gen++
		if f.gen == 0 {
			f.gen++ // the kernel skips 0 when its generation wraps
		}
	}
	return nil
}

// nftError words a refused script as nft does.
func nftError(script []byte, err error) error {
	var le *nftsyntax.LineError
	if !errors.As(err, &le) {
		return fmt.Errorf("nft: %v", err)
	}
	line := ""
	if lines := strings.Split(string(script), "\n"); le.Line <= len(lines) {
		line = lines[le.Line-1]
	}
	msg := "syntax error, " + le.Err.Error()
	var r *nftsyntax.Refused
	if errors.As(err, &r) {
		errno := []rune(r.Errno.Error())
		errno[0] = unicode.ToUpper(errno[0])
		msg = "Could not process rule: " + string(errno)
	}
	return fmt.Errorf("nft: /dev/stdin:%d:1-%d: Error: %s; %s", le.Line, len(line), msg, line)
}

// List prints a table as "nft list table" does; nil when there is none.
func (f *FakeNFT) List(_ context.Context, family knftables.Family) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.rules.Tables[family]
	if st == nil {
		return nil, nil
	}
	var b bytes.Buffer
	err := nftsyntax.WriteListing(&b, st)
	return b.Bytes(), err
}

// Generation is the ruleset generation: it moves by one for each transaction that
// changed something (see generation.go). It is an Applier's Generation.
func (f *FakeNFT) Generation() (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, nil
}

// Table is kube-proxy's table of a family as the fake holds it (nil: none). The
// caller must not change it.
func (f *FakeNFT) Table(family knftables.Family) *nftsyntax.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rules.Tables[family]
}
