package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcgen/svcgen/internal/nfacct"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
)

// IPTablesTool is the kernel as the iptables backend sees it: one family's
// iptables-save and iptables-restore. Every change svcgen makes, the jumps from the
// built-in chains included, goes through Restore, block by block, as kube-proxy loads
// its chains; svcgen runs no single-rule iptables command.
type IPTablesTool interface {
	// Save returns iptables-save's output: every table.
	Save(ctx context.Context) ([]byte, error)
	// Restore runs iptables-restore --noflush. Each block (from "*table" to COMMIT) is
	// one transaction: a block that fails changes nothing and the blocks after it are
	// not run; the blocks before it stay committed. The error says "line N failed"
	// when the tool names the line.
	Restore(ctx context.Context, payload []byte) error
	// InNFTables reports whether the rules live in nf_tables (iptables-nft), so that
	// nf_tables' generation id covers them; iptables-legacy's do not.
	InNFTables() bool
	// EnsureCounters makes the nfacct counters that rules name, keeping those that
	// exist, as kube-proxy does before each restore.
	EnsureCounters(ctx context.Context, names []string) error
	// Present says why the tool cannot be used on this host (nil: it can), as
	// kube-proxy asks before it runs a proxier of the family: the nat table's
	// POSTROUTING chain can be listed.
	Present(ctx context.Context) error
}

// execIPTables runs the tools of the node: iptables-save and iptables-restore (or the
// ip6tables ones), waiting for the xtables lock at most wait.
type execIPTables struct {
	name string // "iptables" or "ip6tables"
	wait time.Duration
}

func (t execIPTables) Save(ctx context.Context) ([]byte, error) {
	return runTool(ctx, nil, t.name+"-save")
}

func (t execIPTables) Restore(ctx context.Context, payload []byte) error {
	wait := max(1, int((t.wait+time.Second-1)/time.Second))
	_, err := runTool(ctx, payload, t.name+"-restore", "--noflush", "--wait", strconv.Itoa(wait), "--wait-interval", "100000")
	return err
}

func (t execIPTables) Present(ctx context.Context) error {
	wait := max(1, int((t.wait+time.Second-1)/time.Second))
	_, err := runTool(ctx, nil, t.name, "--wait", strconv.Itoa(wait), "-t", "nat", "-n", "-L", "POSTROUTING")
	return err
}

// InNFTables asks "iptables -V", which says "(nf_tables)" or "(legacy)".
func (t execIPTables) InNFTables() bool {
	out, err := runTool(context.Background(), nil, t.name, "-V")
	return err == nil && strings.Contains(string(out), "nf_tables")
}

// EnsureCounters makes the counters through nfnetlink_acct in svcgen's own network
// namespace, where the tools it runs work too.
func (t execIPTables) EnsureCounters(_ context.Context, names []string) error {
	return nfacct.Ensure(names...)
}

func runTool(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s: %s", name, strings.ReplaceAll(msg, "\n", "; "))
	}
	return out, nil
}

// FakeIPTables is an in-memory IPTablesTool that behaves as iptables-restore does for
// what svcgen sends it: each block is parsed and applied to a copy of the table and
// committed whole, a block the kernel would refuse (a jump to a missing chain, -X of
// a chain still referenced or not empty, -D of a missing rule) fails with "line N
// failed" and changes nothing, and blocks after a failure are not run. FailLine makes
// a chosen line fail, as a kernel short of memory or a concurrent writer would.
type FakeIPTables struct {
	mu    sync.Mutex
	rules *iptsyntax.Ruleset
	// FailLine, when more than zero, fails the restore at that line of the next
	// payload (counted as iptables-restore counts, from 1), once.
	FailLine int
	// Failed is the line the last failed restore failed at.
	Failed int
	// Restores counts the restores run.
	Restores int
	// Counters are the nfacct counters that exist; a rule naming another is refused.
	Counters map[string]bool
	// Absent, when set, is why the tool cannot be used here (Present returns it).
	Absent error
}

// NewFakeIPTables starts from the ruleset text (iptables-save form; "" for empty
// tables).
func NewFakeIPTables(text string) (*FakeIPTables, error) {
	rs, err := iptsyntax.ParseBytes("fake", []byte(text))
	if err != nil {
		return nil, err
	}
	return &FakeIPTables{rules: rs}, nil
}

func (f *FakeIPTables) InNFTables() bool { return true }

func (f *FakeIPTables) Present(context.Context) error { return f.Absent }

func (f *FakeIPTables) EnsureCounters(_ context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Counters == nil {
		f.Counters = map[string]bool{}
	}
	for _, n := range names {
		f.Counters[n] = true
	}
	return nil
}

// Save prints the tables as iptables-save does: chain lines, then rules.
func (f *FakeIPTables) Save(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b bytes.Buffer
	saved := f.rules.Clone()
	for _, t := range saved.Tables {
		t.Deleted = nil
		for _, c := range t.Chains {
			c.Declared = true
		}
	}
	err := saved.Write(&b)
	return b.Bytes(), err
}

// Restore applies the payload block by block.
func (f *FakeIPTables) Restore(_ context.Context, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores++
	failAt := f.FailLine
	f.FailLine = 0
	start := 0
	for _, end := range iptsyntax.Blocks(payload) {
		block := iptsyntax.Head(payload, end)[len(iptsyntax.Head(payload, start)):]
		if failAt > start && failAt <= end {
			return f.fail(failAt, errors.New("refused (FailLine)"))
		}
		for _, c := range iptsyntax.Counters(block) {
			if !f.Counters[c] {
				return f.fail(start+1, fmt.Errorf("nfacct counter %q does not exist", c))
			}
		}
		next := f.rules.Clone()
		if err := next.Restore("payload", bytes.NewReader(block)); err != nil {
			return f.fail(start+1, err)
		}
		if err := dangling(next); err != nil {
			return f.fail(end, err) // the kernel refuses at COMMIT
		}
		f.rules = next
		start = end
	}
	return nil
}

func (f *FakeIPTables) fail(line int, err error) error {
	f.Failed = line
	return fmt.Errorf("iptables-restore: line %d failed: %v", line, err)
}

// Text is the fake's tables as Save prints them.
func (f *FakeIPTables) Text() string {
	out, _ := f.Save(context.Background())
	return string(out)
}

// targets are the iptables targets svcgen and kube-proxy write: a -j naming anything
// else names a chain, which must exist.
var targets = map[string]bool{
	"ACCEPT": true, "DROP": true, "RETURN": true, "REJECT": true, "DNAT": true, "SNAT": true,
	"MASQUERADE": true, "MARK": true, "CONNMARK": true, "LOG": true, "NOTRACK": true, "CT": true,
}

// dangling finds what the kernel refuses when it commits a block: a rule that jumps
// to a chain the table does not have (also one just deleted with -X).
func dangling(rs *iptsyntax.Ruleset) error {
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if to := iptsyntax.RuleTarget(r.Args); to != "" && !targets[to] && t.Chain(to) == nil {
					return fmt.Errorf("chain %s: a rule jumps to %s, which table %s does not have", c.Name, to, t.Name)
				}
			}
		}
	}
	return nil
}
