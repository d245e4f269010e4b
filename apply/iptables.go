package apply

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
)

// IPTables loads iptables-mode rules with iptables-restore --noflush: only the chains
// that changed, kube-proxy's jumps from built-in chains in the same blocks, stale
// chains deleted; large restores staged in blocks (emit/iptables stage.go). Other
// software's chains and rules in the same tables are never named, so they stay.
type IPTables struct {
	// IPv6 selects ip6tables.
	IPv6 bool
	// Wait bounds the wait for the xtables lock (iptables-restore -w).
	Wait time.Duration
	// MaxChains is the most chain lines one restore block declares (0: no staging).
	MaxChains int
	// Tool runs iptables-save and iptables-restore; nil: the node's own tools (with
	// IPv6 and Wait). Tests give a FakeIPTables.
	Tool IPTablesTool
}

// DefaultMaxChains is the block size of staged restores. Measured on iptables-nft
// 1.8.9 loading 10,000 Services (about 100,000 chains) from cold (docs/node.md): blocks of
// 250 to 1,000 chain lines cost 10-15 s of CPU, 5,000 cost 29 s, 10,000 cost 55 s,
// and one block per table takes minutes; blocks of 100 cost more again (19 s).
const DefaultMaxChains = 500

// NewIPTables returns the backend for a service map's family.
func NewIPTables(family model.IPFamily, wait time.Duration) *IPTables {
	return &IPTables{IPv6: family == model.IPv6, Wait: wait, MaxChains: DefaultMaxChains}
}

func (b *IPTables) Name() string {
	if b.IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// tool is the IPTablesTool the backend runs.
func (b *IPTables) tool() IPTablesTool {
	if b.Tool != nil {
		return b.Tool
	}
	return execIPTables{name: b.Name(), wait: b.Wait}
}

// InNFTables reports whether the rules live in nf_tables (iptables-nft), so that the
// generation id covers them; iptables-legacy's do not.
func (b *IPTables) InNFTables() bool { return b.tool().InNFTables() }

// ipState is the kernel's tables as iptables-save printed them, or as a load left
// them (the model of a restore, iptsyntax.Ruleset.Restore, kept up to date).
type ipState struct {
	rs *iptsyntax.Ruleset
	// pending is a restore the kernel has taken and rs not yet: the model is brought
	// up to date when it is next needed, so a one-shot apply does not spend a second
	// on a state nobody reads.
	pending []byte
	// sm is the service map the state was loaded from, nil when it was read from the
	// kernel: with it, the next plan skips the Services that did not change.
	sm *ir.ServiceMap
}

// ruleset returns the state's rules, up to date.
func (s *ipState) ruleset() *iptsyntax.Ruleset {
	if s.pending != nil {
		if err := s.rs.Restore("loaded", bytes.NewReader(s.pending)); err != nil {
			panic(fmt.Sprintf("svcgen's own restore does not parse: %v", err)) // a bug, not input
		}
		s.pending = nil
	}
	return s.rs
}

func (s *ipState) View(opts ViewOptions) *ruleview.View {
	owners := iptsyntax.FindOwners(s.ruleset())
	if opts.Map != nil {
		for k, v := range iptrules.MapOwners(opts.Map) {
			owners[k] = v
		}
	}
	scope := iptsyntax.KubeProxyOnly
	if opts.All {
		scope = iptsyntax.Everything
	}
	rs := s.ruleset()
	if opts.Installed {
		rs = iptsyntax.WithJumps(rs)
	}
	return rs.View(owners, scope)
}

// Want is kube-proxy's payload for sm with the jumps from built-in chains.
func (b *IPTables) Want(sm *ir.ServiceMap) (State, error) {
	var buf strings.Builder // read as it is, not copied: 30 MB at 10,000 Services
	if err := iptrules.Write(&buf, sm, iptrules.Options{Format: iptrules.NoFlush}); err != nil {
		return nil, err
	}
	rs, err := iptsyntax.ParseString("compiled", buf.String())
	if err != nil {
		return nil, err
	}
	return &ipState{rs: iptsyntax.WithJumps(rs)}, nil
}

// Parse reads iptables-restore input or iptables-save output.
func (b *IPTables) Parse(name string, data []byte) (State, error) {
	rs, err := iptsyntax.ParseBytes(name, data)
	if err != nil {
		return nil, err
	}
	return &ipState{rs: rs}, nil
}

// Tables the iptables backend reads: it loads into filter and nat; cleanup also removes
// kube-proxy's canary chain from mangle.
var ipTables = []string{"filter", "nat", "mangle"}

// Read runs iptables-save once for every table and keeps the ones kube-proxy uses.
// (iptables-nft reads the whole ruleset whatever -t says: with 100,000 chains in nat,
// "iptables-save -t filter" costs as much as "iptables-save".)
func (b *IPTables) Read(ctx context.Context) (State, error) {
	out, err := b.tool().Save(ctx)
	if err != nil {
		return nil, err
	}
	if err := compatible(out); err != nil {
		return nil, err
	}
	rs, err := iptsyntax.ParseBytes(b.Name()+"-save", out)
	if err != nil {
		return nil, err
	}
	kept := rs.Tables[:0]
	for _, t := range rs.Tables {
		if slices.Contains(ipTables, t.Name) {
			kept = append(kept, t)
		}
	}
	rs.Tables = kept
	return &ipState{rs: rs}, nil
}

// ipPlan is a restore against a state.
type ipPlan struct {
	from    *ipState
	sm      *ir.ServiceMap // nil for cleanup
	payload []byte
	after   *ipState
}

// owners names the chains of the plan, for a refused rule: the rules being replaced
// or removed name theirs (a chain of a Service that is going away too), the service
// map the chains it adds. Only worked out when a restore fails.
func (p *ipPlan) owners() iptsyntax.Owners {
	o := iptsyntax.FindOwners(p.from.ruleset())
	if p.sm != nil {
		maps.Copy(o, iptrules.MapOwners(p.sm))
	}
	return o
}

func (p *ipPlan) Empty() bool { return iptsyntax.CountLines(p.payload).Blocks == 0 }

// Commits: iptables-nft commits each block of the restore as one transaction, which
// the commit mark of a plan makes sure to change the ruleset (cleanup's blocks may not be).
func (p *ipPlan) Commits() Commits {
	n, sure := iptsyntax.Commits(p.payload)
	return Commits{N: n, Sure: sure}
}

func (p *ipPlan) After() State {
	if p.after == nil {
		rs := p.from.ruleset().Clone()
		if err := rs.Restore("plan", bytes.NewReader(p.payload)); err != nil {
			panic(fmt.Sprintf("svcgen's own restore does not parse: %v", err)) // a bug, not input
		}
		p.after = &ipState{rs: rs, sm: p.sm}
	}
	return p.after
}

func (p *ipPlan) Summary() Summary {
	c := iptsyntax.CountLines(p.payload)
	return Summary{Chains: c.Chains - c.DeletedChains, Rules: c.Rules, Deleted: c.DeletedRules + c.DeletedChains, Text: c.String()}
}

// Plan writes the partial restore with --minimal against the state: the service chains
// that differ, the fixed chains whose rules differ, the jumps that are missing. A state
// this backend loaded remembers its service map, so only the Services that differ
// from it are looked at, and with a hint from that map only the ones it names.
func (b *IPTables) Plan(sm *ir.ServiceMap, from State, opts PlanOptions) (Plan, error) {
	st, err := stateAs[*ipState]("iptables", from)
	if err != nil {
		return nil, err
	}
	if err := sameFamily(b.Name(), b.IPv6, sm); err != nil {
		return nil, err
	}
	o := iptplan.Options{
		Previous:    st.ruleset(),
		Minimal:     !opts.Full,
		FullSync:    opts.Full,
		EnsureJumps: true,
		PreviousMap: st.sm,
	}
	if h := opts.Hint; h != nil && st.sm != nil && h.Since == st.sm {
		o.Changed = h.Changed
	}
	change, err := iptplan.Partial(sm, o)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := change.Write(&buf, iptplan.Blocks{MaxChains: b.MaxChains, MarkCommits: true}); err != nil {
		return nil, err
	}
	return &ipPlan{from: st, sm: sm, payload: buf.Bytes()}, nil
}

// Cleanup plans the restore that removes kube-proxy's chains and jumps in every table.
func (b *IPTables) Cleanup(from State) (Plan, error) {
	st, err := stateAs[*ipState]("iptables", from)
	if err != nil {
		return nil, err
	}
	to, err := iptplan.Cleaned(st.ruleset())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := iptplan.WriteTransition(&buf, st.ruleset(), to, b.MaxChains); err != nil {
		return nil, err
	}
	return &ipPlan{from: st, payload: buf.Bytes(), after: &ipState{rs: to}}, nil
}

// Load restores the plan's payload. If a block fails, the blocks before it are
// committed (each is its own transaction): they are rolled back with the transition
// from what they left to the state the plan started from.
func (b *IPTables) Load(ctx context.Context, p Plan) (State, error) {
	pl, ok := p.(*ipPlan)
	if !ok {
		return nil, fmt.Errorf("iptables: a plan of another backend")
	}
	var err error
	if !pl.Empty() {
		err = b.ensureCounters(ctx, pl.payload)
		if err == nil {
			err = b.tool().Restore(ctx, pl.payload)
		}
	}
	if err == nil {
		if pl.after != nil {
			return pl.after, nil
		}
		// The kernel now holds what the model of the restore says; update the state
		// in place rather than copying a large ruleset.
		pl.from.pending = pl.payload
		pl.from.sm = pl.sm
		return pl.from, nil
	}
	le := &LoadError{Mode: b.Name(), Err: err}
	if n := iptsyntax.FailedLine(err.Error()); n > 0 {
		le.Rule = iptsyntax.Line(pl.payload, n)
		le.Service = pl.owners().LineOwner(le.Rule)
		if le.Rule == "COMMIT" {
			le.Rule = ""
		}
		le.Rollback = b.rollback(ctx, pl, n)
	} else {
		le.Rollback = b.rollbackFromKernel(ctx, pl)
	}
	return nil, le
}

// ensureCounters makes the nfacct counters when the payload's rules count: all of
// kube-proxy's, as it makes them all on each sync, and any other a rule names. A node
// that cannot make them needs a NodeEnvironment saying so ("iptables: {nfacct:
// false}"), as kube-proxy leaves the match out when its probe fails.
func (b *IPTables) ensureCounters(ctx context.Context, payload []byte) error {
	named := iptsyntax.Counters(payload)
	if len(named) == 0 {
		return nil
	}
	names := slices.Clone(iptrules.Counters)
	for _, n := range named {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if err := b.tool().EnsureCounters(ctx, names); err != nil {
		return fmt.Errorf("%w (the rules count packets with nfacct; on a node without nfnetlink_acct, say iptables: {nfacct: false} in its NodeEnvironment)", err)
	}
	return nil
}

// rollback puts back what the blocks before the failing line changed.
func (b *IPTables) rollback(ctx context.Context, pl *ipPlan, failed int) error {
	committed := 0
	for _, c := range iptsyntax.Blocks(pl.payload) {
		if c < failed {
			committed = c
		}
	}
	if committed == 0 {
		return nil // the first block failed: nothing was changed
	}
	now := pl.from.ruleset().Clone()
	if err := now.Restore("committed", bytes.NewReader(iptsyntax.Head(pl.payload, committed))); err != nil {
		return err
	}
	return b.transition(ctx, now, pl.from.ruleset())
}

// rollbackFromKernel reads the kernel when the tool did not say which line failed, and
// puts back every chain of the two tables the plan touched.
func (b *IPTables) rollbackFromKernel(ctx context.Context, pl *ipPlan) error {
	now, err := b.Read(ctx)
	if err != nil {
		return err
	}
	return b.transition(ctx, now.(*ipState).ruleset(), pl.from.ruleset())
}

func (b *IPTables) transition(ctx context.Context, from, to *iptsyntax.Ruleset) error {
	var buf bytes.Buffer
	if err := iptplan.WriteTransition(&buf, from, to, b.MaxChains); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return nil
	}
	return b.tool().Restore(ctx, buf.Bytes())
}

// compatible refuses an iptables-save that could not show a table whole: iptables-nft
// prints "# Table `nat' is incompatible, use 'nft' tool." when a table holds rules that
// another nftables program wrote in its own way. Loading against such a half-read table
// could undo that program's rules.
func compatible(save []byte) error {
	for _, l := range strings.Split(string(save), "\n") {
		if strings.HasPrefix(l, "#") && strings.Contains(l, "incompatible") {
			return fmt.Errorf("iptables-save cannot read the whole table (%s); svcgen will not load against it", strings.TrimSpace(strings.TrimPrefix(l, "#")))
		}
	}
	return nil
}
