package apply

import (
	"bytes"
	"context"
	"os/exec"
	"strings"

	"github.com/svcgen/svcgen/ruleview"
)

// NFTablesCleaner removes kube-proxy's nftables-mode tables ("ip kube-proxy" and
// "ip6 kube-proxy", as kube-proxy's own cleanup does) in one nft transaction. Where nft
// is not installed there is nothing of that mode to remove.
type NFTablesCleaner struct{}

func (NFTablesCleaner) Name() string { return "nftables" }

// nftTables are kube-proxy's tables, as "nft list tables" names them.
var nftTables = []string{"table ip kube-proxy", "table ip6 kube-proxy"}

// nftState holds kube-proxy's tables as nft lists them.
type nftState struct {
	tables map[string]string // "table ip kube-proxy" -> its listing
}

func (NFTablesCleaner) Read(ctx context.Context) (State, error) {
	st := &nftState{tables: map[string]string{}}
	if _, err := exec.LookPath("nft"); err != nil {
		return st, nil
	}
	list, err := runTool(ctx, nil, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(list), "\n") {
		l = strings.TrimSpace(l)
		for _, t := range nftTables {
			if l == t {
				out, err := runTool(ctx, nil, "nft", append([]string{"list"}, strings.Fields(t)...)...)
				if err != nil {
					return nil, err
				}
				st.tables[t] = string(out)
			}
		}
	}
	return st, nil
}

func (s *nftState) View(ViewOptions) *ruleview.View {
	v := &ruleview.View{}
	for _, t := range nftTables {
		listing, ok := s.tables[t]
		if !ok {
			continue
		}
		sec := &ruleview.Section{Table: "nftables", Name: t, Header: t}
		for _, l := range strings.Split(strings.TrimSpace(listing), "\n") {
			sec.Lines = append(sec.Lines, ruleview.Line{Text: l})
		}
		v.Sections = append(v.Sections, sec)
	}
	return v
}

type nftPlan struct {
	script []byte
}

func (p *nftPlan) Empty() bool  { return len(p.script) == 0 }
func (p *nftPlan) After() State { return &nftState{} }
func (p *nftPlan) Summary() Summary {
	n := bytes.Count(p.script, []byte("\n"))
	return Summary{Deleted: n, Text: strings.TrimSpace(strings.ReplaceAll(string(p.script), "\n", "; "))}
}

// Cleanup deletes kube-proxy's tables, the whole of each.
func (NFTablesCleaner) Cleanup(from State) (Plan, error) {
	var b bytes.Buffer
	for _, t := range nftTables {
		if _, ok := from.(*nftState).tables[t]; ok {
			b.WriteString("delete " + t + "\n")
		}
	}
	return &nftPlan{script: b.Bytes()}, nil
}

// Load runs the plan as one nft transaction: all of it or none.
func (NFTablesCleaner) Load(ctx context.Context, p Plan) (State, error) {
	pl := p.(*nftPlan)
	if pl.Empty() {
		return pl.After(), nil
	}
	if _, err := runTool(ctx, pl.script, "nft", "-f", "-"); err != nil {
		return nil, &LoadError{Mode: "nftables", Err: err}
	}
	return pl.After(), nil
}
