package apply

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/emit/nft"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/ruleview"
	"sigs.k8s.io/knftables"
)

// NFTables loads nftables-mode rules into kube-proxy's table of one family, and only
// there: with the table in place, one "nft -f" transaction with what changed (the
// minimal partial sync: only the chains whose rules differ, and the elements that
// differ), all of it or none; without it, the whole table in one
// transaction, or, for a large table (more than StageAbove objects), in the five
// transactions of emit/nft's Stages, which load a 10,000-Service table in a minute
// where one transaction takes five (see README). A failed staged load deletes the
// table it was building: there was none before.
type NFTables struct {
	IPv6       bool
	StageAbove int
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

// table is "ip kube-proxy" or "ip6 kube-proxy".
func (b *NFTables) table() string { return string(b.family()) + " kube-proxy" }

// nftState is kube-proxy's table of one family (none when st is nil).
type nftState struct {
	family knftables.Family
	rs     *nft.Ruleset // nil: no table
	// sm is the service map a load built the state from (nil when it was read): a
	// plan of the same map has nothing to do.
	sm *ir.ServiceMap
}

func (s *nftState) table() *nft.State {
	if s.rs == nil {
		return nil
	}
	return s.rs.Tables[s.family]
}

// Read lists kube-proxy's table. Without nft, or without the table, the state is
// empty (cleanup has nothing to do; apply creates the table, or says nft is missing).
func (b *NFTables) Read(ctx context.Context) (State, error) {
	st := &nftState{family: b.family()}
	if _, err := exec.LookPath("nft"); err != nil {
		return st, nil
	}
	list, err := runTool(ctx, nil, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	if !strings.Contains("\n"+string(list), "\ntable "+b.table()+"\n") {
		return st, nil
	}
	out, err := runTool(ctx, nil, "nft", "list", "table", string(b.family()), "kube-proxy")
	if err != nil {
		return nil, err
	}
	if st.rs, err = nft.ParseBytes("nft list table "+b.table(), out); err != nil {
		return nil, err
	}
	return st, nil
}

// View shows the table as "add" lines, one section per chain, set and map; a
// per-service chain (its name holds the Service) and the elements that lead to it
// belong to that service port.
func (s *nftState) View(ViewOptions) *ruleview.View {
	v := &ruleview.View{}
	t := s.table()
	if t == nil {
		return v
	}
	var buf bytes.Buffer
	if err := nft.WriteState(&buf, t); err != nil {
		panic(fmt.Sprintf("nft: a parsed table does not write: %v", err)) // a bug, not input
	}
	sections := map[string]*ruleview.Section{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "add" {
			continue
		}
		kind, name := f[1], f[4]
		switch kind {
		case "chain", "set", "map":
			sec := &ruleview.Section{Table: string(s.family) + " kube-proxy", Name: name, Header: line, Owner: nftPort(name), Rank: 1}
			if kind != "chain" {
				sec.Rank = 0
			}
			sections[name] = sec
			v.Sections = append(v.Sections, sec)
		case "rule", "element":
			sec := sections[name]
			if sec == nil {
				continue
			}
			l := ruleview.Line{Text: line}
			if kind == "rule" {
				l.Key = name + " " + nft.Canonical(strings.Join(f[5:], " "))
			} else {
				l.Owner = nftPort(line)
			}
			sec.Lines = append(sec.Lines, l)
		}
	}
	// Elements have no order (the kernel lists them in its own).
	for _, sec := range v.Sections {
		if !strings.HasPrefix(sec.Header, "add chain ") {
			slices.SortFunc(sec.Lines, func(a, b ruleview.Line) int { return strings.Compare(a.Text, b.Text) })
		}
	}
	v.Sort()
	return v
}

// nftPort is the service port ("ns/svc:port") of the first per-service name in text
// (a chain's name, a rule or an element line), "" if none.
func nftPort(text string) string {
	for _, w := range strings.Fields(text) {
		if p := nft.PortOf(w); p != "" {
			return p
		}
	}
	return ""
}

type nftPlan struct {
	from   *nftState
	after  *nftState
	txs    [][]byte
	staged bool
}

func (p *nftPlan) Empty() bool { return len(p.txs) == 0 }

// Commits: each transaction with text is one commit of nft -f, sure to change the
// ruleset by its commit mark (see nft.Transactions); cleanup's "delete table" is too.
func (p *nftPlan) Commits() Commits {
	c := Commits{Sure: true}
	for _, tx := range p.txs {
		if len(bytes.TrimSpace(tx)) > 0 {
			c.N++
			c.Sure = c.Sure && nft.SureChange(tx)
		}
	}
	return c
}
func (p *nftPlan) After() State { return p.after }
func (p *nftPlan) Summary() Summary {
	var s Summary
	counts := map[string]int{}
	for _, tx := range p.txs {
		for _, l := range strings.Split(string(tx), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || len(f) >= 5 && f[1] == "chain" && f[4] == nft.CommitChain {
				continue // the commit mark (see nft.Transactions) changes nothing
			}
			counts[f[0]+" "+f[1]]++
			switch {
			case f[0] == "add" && f[1] == "rule":
				s.Rules++
			case f[0] == "add" && f[1] == "chain":
				s.Chains++
			case f[0] == "delete":
				s.Deleted++
			}
		}
	}
	s.Text = fmt.Sprintf("%s, %s, %s added; %d flushed; %d deleted; in %s",
		textutil.Count(counts["add chain"], "chain", "chains"), textutil.Count(counts["add rule"], "rule", "rules"),
		textutil.Count(counts["add element"], "element", "elements"), counts["flush chain"], s.Deleted,
		textutil.Count(len(p.txs), "transaction", "transactions"))
	return s
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
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("%s: %w: the nft command is not installed", b.Name(), ErrNoKernelSupport)
	}
	if st.sm == sm && !opts.Full {
		// The map this state was loaded from (apply --watch's interval with nothing
		// changed): nothing to compare. The state is the kernel's as far as the
		// applier knows (it reads the kernel when it cannot tell).
		return &nftPlan{from: st, after: st}, nil
	}
	prev, stageAbove := st.rs, b.StageAbove
	if st.table() != nil {
		stageAbove = 0 // staging is for a node without the table: it is not atomic
	}
	if opts.Full {
		prev = nil // the whole table, replacing the old one in the same transaction
	}
	txs, err := nft.Transactions(sm, prev, stageAbove, true)
	if err != nil {
		return nil, err
	}
	want := nft.Build(sm)
	after := &nftState{family: b.family(), rs: &nft.Ruleset{Tables: map[knftables.Family]*nft.State{want.Family: want}}, sm: sm}
	return &nftPlan{from: st, after: after, txs: txs, staged: len(txs) > 1}, nil
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
		if _, err := runTool(ctx, tx, "nft", "-f", "-"); err != nil {
			le := &LoadError{Mode: b.Name(), Err: err}
			if m := nftLine.FindStringSubmatch(err.Error()); m != nil {
				n, _ := strconv.Atoi(m[1])
				if lines := strings.Split(string(tx), "\n"); n >= 1 && n <= len(lines) {
					le.Rule = lines[n-1]
					le.Service = nftPort(le.Rule)
				}
			}
			if i > 0 && pl.staged {
				// The stages before built a table that was not there: take it away.
				_, le.Rollback = runTool(ctx, []byte("delete table "+b.table()+"\n"), "nft", "-f", "-")
			}
			return nil, le
		}
	}
	return pl.after, nil
}

// Cleanup deletes kube-proxy's table of the family, the whole of it.
func (b *NFTables) Cleanup(from State) (Plan, error) {
	st, err := stateAs[*nftState]("nftables", from)
	if err != nil {
		return nil, err
	}
	p := &nftPlan{from: st, after: &nftState{family: b.family()}}
	if st.table() != nil {
		p.txs = [][]byte{[]byte("delete table " + b.table() + "\n")}
	}
	return p, nil
}

// Want is the table of sm.
func (b *NFTables) Want(sm *ir.ServiceMap) (State, error) {
	st := nft.Build(sm)
	return &nftState{family: st.Family, rs: &nft.Ruleset{Tables: map[knftables.Family]*nft.State{st.Family: st}}}, nil
}

// Parse reads an nft script of svcgen's or "nft list" output.
func (b *NFTables) Parse(name string, data []byte) (State, error) {
	rs, err := nft.ParseBytes(name, data)
	if err != nil {
		return nil, err
	}
	return &nftState{family: b.family(), rs: rs}, nil
}
