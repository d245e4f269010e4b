package apply

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/ruleview"
	"sigs.k8s.io/knftables"
)

// NFTables loads nftables-mode rules into kube-proxy's table of one family, and only
// there: with the table in place, one "nft -f" transaction with what changed (the
// minimal partial sync: only the chains whose rules differ, and the elements that
// differ), all of it or none; without it, the whole table in one
// transaction, or, for a large table (more than StageAbove objects), in the five
// transactions of nftables/rules' Stages, which load a 10,000-Service table in a minute
// where one transaction takes five (see docs/compile.md, "nftables mode"). A failed staged load deletes the
// table it was building: there was none before.
type NFTables struct {
	IPv6       bool
	StageAbove int
	// Kernel loads and lists the table (nil: DefaultNFTKernel).
	Kernel NFTKernel
}

// DefaultStageAbove stages the cold load of a table of more objects than this: about
// 3,000 Services of 10 endpoints (measured on nft 1.0.6: 1,000 Services load in 1.5-2.4 s
// in one transaction, 3.5 s staged; 10,000 in 312 s and 53 s).
const DefaultStageAbove = 100000

// NewNFTables returns the backend for a family.
func NewNFTables(family model.IPFamily) *NFTables {
	return &NFTables{IPv6: family == model.IPv6, StageAbove: DefaultStageAbove}
}

// InNFTables: the table is nf_tables' own (the generation id covers it).
func (b *NFTables) InNFTables() bool { return true }

func (b *NFTables) Name() string {
	if b.IPv6 {
		return "nftables (IPv6)"
	}
	return "nftables"
}

func (b *NFTables) family() knftables.Family {
	if b.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

func (b *NFTables) kernel() NFTKernel {
	if b.Kernel == nil {
		return DefaultNFTKernel()
	}
	return b.Kernel
}

// nftState is kube-proxy's table of one family: read or parsed (rs), or the table of
// the service map a load built it from (sm); none when both are nil.
type nftState struct {
	family knftables.Family
	rs     *nftsyntax.Ruleset
	// sm is the service map a load built the state from (nil when it was read): a
	// plan of the same map has nothing to do, and a plan of another looks at the
	// Services that changed since only (those a hint from sm names, else those that
	// differ). Its table's objects (rs) are made when something asks for them (a
	// whole plan, a view): a sync at 10,000 Services would otherwise spend more time
	// making them than planning.
	sm *ir.ServiceMap
	// keys counts the element keys of sm's table (nftplan.Keys), for those plans;
	// nil until one needs it, and handed on to the state such a plan leaves.
	keys *nftplan.Keys
}

func (s *nftState) ruleset() *nftsyntax.Ruleset {
	if s.rs == nil && s.sm != nil {
		s.rs = nftsyntax.Of(nftrules.Build(s.sm))
	}
	return s.rs
}

func (s *nftState) table() *nftsyntax.State {
	if s.ruleset() == nil {
		return nil
	}
	return s.rs.Tables[s.family]
}

// Read lists kube-proxy's table. Without nft, or without the table, the state is
// empty (cleanup has nothing to do; apply creates the table, or says nft is missing).
func (b *NFTables) Read(ctx context.Context) (State, error) {
	st := &nftState{family: b.family()}
	if b.kernel().Check() != nil {
		return st, nil
	}
	out, err := b.kernel().List(ctx, b.family())
	if err != nil || out == nil {
		return st, err
	}
	if st.rs, err = nftsyntax.ParseBytes("nft list table "+string(b.family())+" "+nftsyntax.TableName, out); err != nil {
		return nil, err
	}
	return st, nil
}

// View shows the table (see nftsyntax.State.View).
func (s *nftState) View(ViewOptions) *ruleview.View { return s.table().View() }

type nftPlan struct {
	from   *nftState
	after  *nftState
	txs    []nftplan.Tx
	staged bool
	// since is the change of a plan from the changed Services (nftplan.Since),
	// whose load moves the key counts of from's table on to after's.
	since *nftplan.Change
}

func (p *nftPlan) Empty() bool { return len(p.txs) == 0 }

// Commits: each transaction is one commit of nft -f, sure to change the ruleset by its
// commit mark (see nftplan.Load); cleanup's "delete table" is too.
func (p *nftPlan) Commits() Commits {
	c := Commits{N: len(p.txs), Sure: true}
	for _, tx := range p.txs {
		c.Sure = c.Sure && tx.Counts.Sure()
	}
	return c
}

func (p *nftPlan) After() State { return p.after }

// Summary counts what the transactions write, the commit mark left out.
func (p *nftPlan) Summary() Summary {
	var n nftsyntax.Counts
	for _, tx := range p.txs {
		n = n.Plus(tx.Counts)
	}
	return Summary{Chains: n.Chains, Rules: n.Rules, Deleted: n.Deleted,
		Text: fmt.Sprintf("%s, %s, %s added; %d flushed; %d deleted; in %s",
			textutil.Count(n.Chains, "chain", "chains"), textutil.Count(n.Rules, "rule", "rules"),
			textutil.Count(n.Elements, "element", "elements"), n.Flushed, n.Deleted,
			textutil.Count(len(p.txs), "transaction", "transactions"))}
}

// Plan works out the transactions.
func (b *NFTables) Plan(sm *ir.ServiceMap, from State, opts PlanOptions) (Plan, error) {
	st, err := stateAs[*nftState]("nftables", from)
	if err != nil {
		return nil, err
	}
	if err := sameFamily(b.Name(), b.IPv6, sm); err != nil {
		return nil, err
	}
	if err := b.kernel().Check(); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", b.Name(), ErrNoKernelSupport, err)
	}
	if st.sm == sm && !opts.Full {
		// The map this state was loaded from (apply --watch's interval with nothing
		// changed): nothing to compare. The state is the kernel's as far as the
		// applier knows (it reads the kernel when it cannot tell).
		return &nftPlan{from: st, after: st}, nil
	}
	if st.sm != nil && !opts.Full {
		// The Services the hint names, when it is from the map the state was loaded
		// from; else the ones that differ between the two maps (as the iptables
		// backend does).
		var changed []string
		if h := opts.Hint; h != nil && h.Since == st.sm {
			changed = h.Changed
		} else {
			changed = ir.ChangedServices(st.sm, sm)
		}
		if p, err := b.planSince(st, sm, changed); p != nil || err != nil {
			return p, err
		}
	}
	prev, stageAbove := st.ruleset(), b.StageAbove
	if st.table() != nil {
		stageAbove = 0 // staging is for a node without the table: it is not atomic
	}
	if opts.Full {
		prev = nil // the whole table, replacing the old one in the same transaction
	}
	t := nftrules.NewTable(sm)
	txs, err := nftplan.Partial(t, nftplan.Options{Previous: prev, Minimal: true}).Transactions(nftplan.Load{StageAbove: stageAbove, MarkCommits: true})
	if err != nil {
		return nil, err
	}
	after := &nftState{family: b.family(), sm: sm}
	return &nftPlan{from: st, after: after, txs: txs, staged: len(txs) > 1}, nil
}

// planSince plans from the state a load of a map left, looking at the Services that
// changed since only (nftplan.Since): the same transaction as the whole plan, at the
// cost of the changed Services. Nil when Since declines (the caller plans the whole
// table).
func (b *NFTables) planSince(st *nftState, sm *ir.ServiceMap, changed []string) (*nftPlan, error) {
	if st.keys == nil {
		st.keys = nftplan.NewKeys(nftrules.NewTable(st.sm))
	}
	c, ok := nftplan.Since(st.sm, st.keys, sm, changed, true)
	if !ok {
		return nil, nil
	}
	txs, err := c.Transactions(nftplan.Load{MarkCommits: true})
	if err != nil {
		return nil, err
	}
	return &nftPlan{from: st, after: &nftState{family: b.family(), sm: sm}, txs: txs, since: c}, nil
}

// nftLine finds the line nft names in an error ("/dev/stdin:12:1-40: Error: ...").
var nftLine = regexp.MustCompile(`:(\d+):\d+(?:-\d+)?: Error`)

// Load runs the transactions in order.
func (b *NFTables) Load(ctx context.Context, p Plan) (State, error) {
	pl, ok := p.(*nftPlan)
	if !ok {
		return nil, fmt.Errorf("nftables: a plan of another backend")
	}
	for i, tx := range pl.txs {
		if err := b.kernel().Run(ctx, tx.Text); err != nil {
			le := &LoadError{Mode: b.Name(), Err: err}
			le.Rule, le.Service = refusedLine(tx.Text, err)
			if i > 0 && pl.staged {
				// The stages before built a table that was not there: take it away.
				le.Rollback = b.kernel().Run(ctx, b.deleteTable().Text)
			}
			return nil, le
		}
	}
	if pl.since != nil && pl.from.keys != nil && pl.since.MoveKeys(pl.from.keys) {
		// The counts are the loaded table's now; the state before is gone.
		pl.after.keys, pl.from.keys = pl.from.keys, nil
	}
	return pl.after, nil
}

// refusedLine is the line of a transaction that nft's error names, and the service
// port it is for.
func refusedLine(tx []byte, err error) (line, port string) {
	m := nftLine.FindStringSubmatch(err.Error())
	if m == nil {
		return "", ""
	}
	n, _ := strconv.Atoi(m[1])
	if lines := strings.Split(string(tx), "\n"); n >= 1 && n <= len(lines) {
		return lines[n-1], nftsyntax.LinePort(lines[n-1])
	}
	return "", ""
}

// deleteTable is the transaction that deletes kube-proxy's table of the family.
func (b *NFTables) deleteTable() nftplan.Tx {
	var buf bytes.Buffer
	w := nftsyntax.NewWriter(&buf, b.family())
	w.Ops([]nftsyntax.Op{nftsyntax.DeleteTable()})
	if err := w.Flush(); err != nil {
		panic(fmt.Sprintf("nftables: delete table does not write: %v", err)) // a bug, not input
	}
	return nftplan.Tx{Text: buf.Bytes(), Counts: w.Counts()}
}

// Cleanup deletes kube-proxy's table of the family, the whole of it.
func (b *NFTables) Cleanup(from State) (Plan, error) {
	st, err := stateAs[*nftState]("nftables", from)
	if err != nil {
		return nil, err
	}
	p := &nftPlan{from: st, after: &nftState{family: b.family()}}
	if st.table() != nil {
		p.txs = []nftplan.Tx{b.deleteTable()}
	}
	return p, nil
}

// Want is the table of sm.
func (b *NFTables) Want(sm *ir.ServiceMap) (State, error) {
	st := nftrules.Build(sm)
	return &nftState{family: st.Family, rs: nftsyntax.Of(st)}, nil
}

// Parse reads an nft script of svcgen's or "nft list" output.
func (b *NFTables) Parse(name string, data []byte) (State, error) {
	rs, err := nftsyntax.ParseBytes(name, data)
	if err != nil {
		return nil, err
	}
	return &nftState{family: b.family(), rs: rs}, nil
}
