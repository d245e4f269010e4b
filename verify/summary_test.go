package verify

import (
	"math/big"
	"testing"

	"github.com/svcgen/svcgen/trace"
)

// Summary sums outcomes that end the same way (an endpoint reached by two paths) and
// sorts the rest by how they end, whatever order the tracer gave them in.
func TestSummaryMergesAndSorts(t *testing.T) {
	r := &trace.Result{Outcomes: []trace.Outcome{
		{Verdict: trace.DNAT, Endpoint: "10.0.0.2:80", Probability: big.NewRat(1, 4), Masquerade: true},
		{Verdict: trace.Drop, Probability: big.NewRat(1, 8)},
		{Verdict: trace.DNAT, Endpoint: "10.0.0.1:80", Probability: big.NewRat(1, 4), Affinity: true},
		{Verdict: trace.DNAT, Endpoint: "10.0.0.2:80", Probability: big.NewRat(1, 4), Masquerade: true},
		{Verdict: trace.None, Probability: big.NewRat(1, 8)},
	}}
	want := "DNAT 1/4 10.0.0.1:80 affinity; DNAT 1/2 10.0.0.2:80 masquerade; DROP 1/8; no-match 1/8"
	if got := Summary(r); got != want {
		t.Errorf("Summary:\n got %s\nwant %s", got, want)
	}
	if got := Summary(&trace.Result{}); got != "" {
		t.Errorf("Summary of no outcome: %q", got)
	}
}
