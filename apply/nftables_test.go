package apply

import "testing"

// The summary of an nftables plan counts in the noun's form that the number takes, and
// leaves out the commit mark that ends each transaction.
func TestNFTablesSummaryText(t *testing.T) {
	for _, tc := range []struct {
		txs  []string
		want string
	}{
		{[]string{"add chain ip kube-proxy a\nadd rule ip kube-proxy a accept\nadd element ip kube-proxy m { 1 }\n"},
			"1 chain, 1 rule, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
		{[]string{"add chain ip kube-proxy a\nadd chain ip kube-proxy b\nflush chain ip kube-proxy a\n", "delete chain ip kube-proxy c\n"},
			"2 chains, 0 rules, 0 elements added; 1 flushed; 1 deleted; in 2 transactions"},
		{[]string{"add element ip kube-proxy m { 1 }\nadd chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n"},
			"0 chains, 0 rules, 1 element added; 0 flushed; 0 deleted; in 1 transaction"},
	} {
		p := &nftPlan{}
		for _, tx := range tc.txs {
			p.txs = append(p.txs, []byte(tx))
		}
		if got := p.Summary().Text; got != tc.want {
			t.Errorf("%q: %q, want %q", tc.txs, got, tc.want)
		}
	}
}
