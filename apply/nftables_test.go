package apply

import (
	"bytes"
	"testing"

	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// nftTx writes operations as one transaction, with the commit mark when marked.
func nftTx(t *testing.T, marked bool, ops ...nftsyntax.Op) nftplan.Tx {
	t.Helper()
	var b bytes.Buffer
	w := nftsyntax.NewWriter(&b, knftables.IPv4Family)
	w.Ops(ops)
	if marked {
		w.CommitMark()
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return nftplan.Tx{Text: b.Bytes(), Counts: w.Counts()}
}

// The summary of an nftables plan counts in the noun's form that the number takes, and
// leaves out the commit mark that ends each transaction.
func TestNFTablesSummaryText(t *testing.T) {
	chain := func(name string) *knftables.Chain { return &knftables.Chain{Name: name} }
	elem := &knftables.Element{Map: "m", Key: []string{"1"}, Value: []string{"drop"}}
	for _, tc := range []struct {
		txs  []nftplan.Tx
		want string
	}{
		{[]nftplan.Tx{nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("a")}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: &knftables.Rule{Chain: "a", Rule: "accept"}}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: elem})},
			"1 chain, 1 rule, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
		{[]nftplan.Tx{nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("a")}, nftsyntax.Op{Verb: nftsyntax.Add, Obj: chain("b")}, nftsyntax.Op{Verb: nftsyntax.Flush, Obj: chain("a")}), nftTx(t, false, nftsyntax.Op{Verb: nftsyntax.Delete, Obj: chain("c")})},
			"2 chains, 0 rules, 0 elements added; 1 flushed; 1 deleted; in 2 transactions"},
		{[]nftplan.Tx{nftTx(t, true, nftsyntax.Op{Verb: nftsyntax.Add, Obj: elem})},
			"0 chains, 0 rules, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
	} {
		p := &nftPlan{txs: tc.txs}
		if got := p.Summary().Text; got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
		if c := p.Commits(); c.N != len(tc.txs) {
			t.Errorf("%q: %d commits, want %d", tc.want, c.N, len(tc.txs))
		}
	}
}
