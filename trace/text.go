package trace

import (
	"bufio"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// WriteText prints a result for people: the packet, then its path as a tree (rules
// grouped under their chain, every hashed chain followed by its Service, a branch
// wherever the packet can go more than one way, with the branch's probability), then
// the outcomes.
//
//	tcp 10.0.0.2 -> 172.30.0.44:80, from a pod on this node (ns/client)
//	nat PREROUTING
//	  -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
//	...
//	nat KUBE-SVC-4SW47YFZTEDKD3PK  (ns4/svc4:p80)
//	├─ 1/2
//	│  nat KUBE-SVC-4SW47YFZTEDKD3PK  (ns4/svc4:p80)
//	│    -A KUBE-SVC-4SW47YFZTEDKD3PK ... --probability 0.5000000000 -j KUBE-SEP-...
//	│  ...
//	│  => DNAT to 10.180.0.4:80
//	└─ 1/2
//	   ...
//	result: DNAT to one of 2 endpoints
//	  1/2  DNAT to 10.180.0.4:80, not masqueraded
func WriteText(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	tw := &textWriter{w: bw}
	head := r.Packet.String()
	if s := r.Source.String(); s != "" {
		head += ", from " + s
	}
	if r.Packet.InIface != "" {
		head += ", in on " + r.Packet.InIface
	}
	if r.Mode != "" {
		head += " [" + r.Mode + "]"
	}
	tw.line("", head)
	tw.tree(buildTree(r), "", "")
	tw.summary(r)
	return bw.Flush()
}

// pathNode is one step of the merged paths of every outcome.
type pathNode struct {
	step Step
	kids []*pathNode
	// ends lists the outcomes whose path ends here.
	ends []*Outcome
	// p is the probability of every outcome below.
	p *big.Rat
}

func buildTree(r *Result) *pathNode {
	root := &pathNode{p: new(big.Rat)}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		n := root
		n.p.Add(n.p, o.Probability)
		for _, s := range o.Path {
			n = n.child(s)
			n.p.Add(n.p, o.Probability)
		}
		n.ends = append(n.ends, o)
	}
	return root
}

func (n *pathNode) child(s Step) *pathNode {
	for _, k := range n.kids {
		if k.step.Table == s.Table && k.step.Chain == s.Chain && k.step.Rule == s.Rule {
			return k
		}
	}
	k := &pathNode{step: s, p: new(big.Rat)}
	n.kids = append(n.kids, k)
	return k
}

type textWriter struct {
	w *bufio.Writer
}

func (t *textWriter) line(prefix, text string) {
	t.w.WriteString(strings.TrimRight(prefix+text, " "))
	t.w.WriteByte('\n')
}

// tree prints the steps below n. chain is the chain of the last printed step, so a
// chain header is printed only when the chain changes.
func (t *textWriter) tree(n *pathNode, prefix, chain string) {
	for len(n.kids) == 1 && len(n.ends) == 0 {
		n = n.kids[0]
		chain = t.step(n.step, prefix, chain)
	}
	for _, o := range n.ends {
		t.line(prefix, "=> "+outcomeText(o))
	}
	for i, k := range n.kids {
		branch, inner := "├─ ", "│  "
		if i == len(n.kids)-1 {
			branch, inner = "└─ ", "   "
		}
		t.line(prefix, branch+new(big.Rat).Quo(k.p, n.p).RatString())
		t.step(k.step, prefix+inner, "")
		t.tree(k, prefix+inner, k.step.Table+" "+k.step.Chain)
	}
}

// step prints a step, with its chain's header when the chain changed.
func (t *textWriter) step(s Step, prefix, chain string) string {
	c := s.Table + " " + s.Chain
	if c != chain {
		h := c
		if s.Service != "" {
			h += "  (" + s.Service + ")"
		}
		t.line(prefix, h)
	}
	t.line(prefix+"  ", s.Rule)
	return c
}

func (t *textWriter) summary(r *Result) {
	var eps []*Outcome
	for i := range r.Outcomes {
		if r.Outcomes[i].Verdict == DNAT {
			eps = append(eps, &r.Outcomes[i])
		}
	}
	switch {
	case len(r.Outcomes) == 0:
		t.line("", "result: nothing")
	case len(eps) == len(r.Outcomes):
		n := "the endpoint"
		if len(eps) > 1 {
			n = fmt.Sprintf("one of %d endpoints", len(eps))
		}
		t.line("", "result: DNAT to "+n)
	case len(r.Outcomes) == 1:
		t.line("", "result: "+outcomeText(&r.Outcomes[0]))
		return
	default:
		t.line("", fmt.Sprintf("result: %d outcomes", len(r.Outcomes)))
	}
	width := 0
	for i := range r.Outcomes {
		width = max(width, len(r.Outcomes[i].Probability.RatString()))
	}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		p := o.Probability.RatString()
		t.line("  ", p+strings.Repeat(" ", width-len(p)+2)+outcomeText(o))
	}
}

// outcomeText is "DNAT to 10.0.0.1:80", then masquerade and affinity.
func outcomeText(o *Outcome) string {
	var b strings.Builder
	switch o.Verdict {
	case DNAT:
		b.WriteString("DNAT to " + o.Endpoint)
	case None:
		b.WriteString("no rule decided: the packet goes on unchanged")
	case Accept:
		b.WriteString("ACCEPT, not translated")
	default:
		b.WriteString(string(o.Verdict))
		if o.Endpoint != "" {
			b.WriteString(" after DNAT to " + o.Endpoint)
		}
	}
	if o.Verdict == DNAT || o.Masquerade {
		if o.Masquerade {
			b.WriteString(", masqueraded")
		} else {
			b.WriteString(", not masqueraded")
		}
	}
	if o.Affinity {
		b.WriteString(", client affinity recorded")
	}
	return b.String()
}
