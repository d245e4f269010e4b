package syntax

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// knftablesText writes operations through knftables alone, as the reference text.
func knftablesText(t *testing.T, family knftables.Family, ops []Op) string {
	t.Helper()
	tx := knftables.NewFake(family, TableName).NewTransaction()
	for _, o := range ops {
		switch o.Verb {
		case Add:
			tx.Add(o.Obj)
		case Flush:
			tx.Flush(o.Obj)
		case Delete:
			tx.Delete(o.Obj)
		}
	}
	return tx.String()
}

// Objects that are not plain go through knftables, which writes them or refuses them
// with its own error; a plain object with a quoted comment is written as knftables
// quotes it.
func TestWriterAsKnftables(t *testing.T) {
	comment := "a \"quoted\" comment\\"
	ops := []Op{
		{Add, &knftables.Chain{Name: "services"}},
		{Add, &knftables.Chain{Name: "helper", Comment: &comment}},
		{Flush, &knftables.Chain{Name: "services"}},
		{Add, &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.1 drop", Comment: &comment}},
		{Add, &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.2 drop", Index: knftables.PtrTo(0)}},
		{Add, &knftables.Rule{Chain: "services", Rule: "ip daddr 198.18.0.3 drop", Comment: knftables.PtrTo("")}},
		{Add, &knftables.Element{Set: "cluster-ips", Key: []string{"198.18.0.1"}, Comment: &comment}},
		{Add, &knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1", "tcp", "80"}, Value: []string{"goto services"}}},
		{Delete, &knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1", "tcp", "80"}}},
		{Add, &knftables.Set{Name: "s", Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.DynamicFlag}}},
		DeleteTable(),
	}
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		var b bytes.Buffer
		if err := WriteOps(&b, family, ops); err != nil {
			t.Fatal(err)
		}
		if want := knftablesText(t, family, ops); b.String() != want {
			t.Errorf("%s: got\n%s\nwant\n%s", family, b.String(), want)
		}
	}
	for _, bad := range []knftables.Object{
		&knftables.Rule{Chain: "services"},
		&knftables.Element{Map: "service-ips", Key: []string{"198.18.0.1"}},
		&knftables.Chain{},
	} {
		var b bytes.Buffer
		w := NewWriter(&b, knftables.IPv4Family)
		w.Op(Add, &knftables.Chain{Name: "services"})
		w.Op(Add, bad)
		w.Op(Add, &knftables.Chain{Name: "after"})
		want := knftablesText(t, knftables.IPv4Family, []Op{{Add, bad}})
		if err := w.Flush(); err == nil || "# ERROR: "+err.Error() != "# ERROR: nftables: "+want[len("# ERROR: "):] {
			t.Errorf("%#v: error %v, want knftables' %q", bad, err, want)
		}
	}
}

// The writer counts what it writes by kind, the commit mark apart; what is sure to
// change the ruleset is what adds a rule, deletes something or carries the mark.
func TestWriterCounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		mark bool
		want Counts
		sure bool
	}{
		{"a rule", []Op{{Add, &knftables.Chain{Name: "a"}}, {Add, &knftables.Rule{Chain: "a", Rule: "accept"}}}, false, Counts{Chains: 1, Rules: 1}, true},
		{"a flush", []Op{{Flush, &knftables.Chain{Name: "a"}}}, false, Counts{Flushed: 1}, false},
		{"an element", []Op{{Add, &knftables.Element{Set: "s", Key: []string{"1"}}}}, false, Counts{Elements: 1}, false},
		{"an element, marked", []Op{{Add, &knftables.Element{Set: "s", Key: []string{"1"}}}}, true, Counts{Elements: 1, Marked: true}, true},
		{"a delete", []Op{{Delete, &knftables.Element{Set: "s", Key: []string{"1"}}}, DeleteTable()}, false, Counts{Deleted: 2}, true},
		{"base chain and set", []Op{{Add, &knftables.Chain{Name: "b", Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.OutputHook), Priority: knftables.PtrTo(knftables.DNATPriority)}}, {Add, &knftables.Set{Name: "s", Type: "ipv4_addr"}}}, false, Counts{Chains: 1}, false},
	} {
		var b bytes.Buffer
		w := NewWriter(&b, knftables.IPv4Family)
		w.Ops(tc.ops)
		if tc.mark {
			w.CommitMark()
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := w.Counts(); got != tc.want || got.Sure() != tc.sure {
			t.Errorf("%s: %+v (sure %v), want %+v (sure %v)", tc.name, got, got.Sure(), tc.want, tc.sure)
		}
		if marked := strings.HasSuffix(b.String(), "add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n"); marked != tc.mark {
			t.Errorf("%s: ends with the commit mark: %v\n%s", tc.name, marked, b.String())
		}
	}
}

// A staged script is a shell script whose nft input Parse reads, passing over its
// shell lines.
func TestStagedScript(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, knftables.IPv4Family)
	w.Staged([]func(*Writer){
		func(w *Writer) { w.Op(Add, &knftables.Table{}); w.Chain("a") },
		func(w *Writer) { w.Rule("a", []byte("accept"), "") },
	})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.HasPrefix(text, "#!/bin/sh\n") || strings.Count(text, "nft -f - <<'SVCGEN_STAGE_") != 2 || !strings.HasSuffix(text, "\nSVCGEN_STAGE_2\n") {
		t.Fatalf("staged script:\n%s", text)
	}
	rs, err := ParseBytes("staged", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r := rs.Tables[knftables.IPv4Family].Chains["a"].Rules; len(r) != 1 || r[0].Rule != "accept" {
		t.Errorf("read back as %v", r)
	}
}

// The chain and rule lines the parser reads itself come out as knftables' parser
// reads them; the others are left to knftables.
func TestPlainAddAsKnftables(t *testing.T) {
	const head = "add table ip kube-proxy\nadd chain ip kube-proxy services\nadd chain ip kube-proxy reject-chain\n"
	for _, tc := range []struct {
		line  string
		plain bool
	}{
		{`add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80`, true},
		{`add chain ip kube-proxy x { comment "c" ; }`, false},
		{`add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.1 reject comment "Reject traffic to invalid ports"`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.2 drop comment "a \"quoted\" word"`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.3 drop comment ""`, true},
		{`add rule ip kube-proxy services ip daddr 198.18.0.4 goto reject-chain`, true},
		{`add rule ip kube-proxy services index 0 ip daddr 198.18.0.5 drop`, false},
		{`add rule ip kube-proxy services handle 3 ip daddr 198.18.0.6 drop`, false},
		{`add chain ip kube-proxy add`, true},
		{`add rule ip kube-proxy add ip daddr 198.18.0.7 drop`, true},
	} {
		var via bool
		script := head + tc.line + "\n"
		ref := knftables.NewFake(knftables.IPv4Family, TableName)
		refErr := ref.ParseDump(script)
		f := strings.Fields(tc.line)
		obj := plainAdd(f[1], strings.TrimPrefix(tc.line, strings.Join(f[:4], " ")+" "))
		if via = obj != nil; via != tc.plain {
			t.Errorf("%s: read here %v, want %v", tc.line, via, tc.plain)
		}
		rs, err := ParseBytes("script", []byte(script))
		if (err != nil) != (refErr != nil) {
			t.Errorf("%s: error %v, knftables' %v", tc.line, err, refErr)
			continue
		}
		if err != nil {
			continue
		}
		var got bytes.Buffer
		if err := WriteState(&got, rs.Tables[knftables.IPv4Family]); err != nil {
			t.Fatal(err)
		}
		if want := ref.Dump(); got.String() != want {
			t.Errorf("%s: read as\n%s\nknftables reads\n%s", tc.line, got.String(), want)
		}
	}
}
