package golden

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
	"go.yaml.in/yaml/v3"
)

// flowFile is flows.yaml: upstream's packetFlowTest entries.
type flowFile struct {
	Upstream string `yaml:"upstream"`
	Flows    []struct {
		Name     string `yaml:"name"`
		SourceIP string `yaml:"sourceIP"`
		DestIP   string `yaml:"destIP"`
		DestPort uint16 `yaml:"destPort"`
		Protocol string `yaml:"protocol"`
		Output   string `yaml:"output"`
		Masq     bool   `yaml:"masq"`
	} `yaml:"flows"`
}

// runFlows traces each flow through the complete iptables ruleset of the case.
func runFlows(t *testing.T, c goldenCase, res *pipeline.Result) {
	var b bytes.Buffer
	if err := iptrules.Write(&b, res.Map, iptrules.Options{Format: iptrules.Complete}); err != nil {
		t.Fatal(err)
	}
	rs, err := iptsyntax.ParseBytes("complete", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.NewIPTables(rs, hostOf(res))
	if err != nil {
		t.Fatal(err)
	}
	checkFlows(t, c, compiler.IPTables, res, tr.Trace)
}

// checkFlows traces each flow of the case's flows.yaml and compares the endpoints (as
// a set, as upstream lists them in rule order) or verdict, and the masquerade
// decision. The service map's own answer for the flow in that mode (verify.ExpectMode,
// which reads no rules) must give upstream's result too, and the same outcomes as the
// trace down to each endpoint's probability, masquerade and affinity: upstream's flows
// are the conformance test of verify's truth as much as of the rules.
func checkFlows(t *testing.T, c goldenCase, mode compiler.Mode, res *pipeline.Result, traceFn func(trace.Packet) (*trace.Result, error)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dir, "flows.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ff flowFile
	if err := yaml.Unmarshal(data, &ff); err != nil {
		t.Fatalf("flows.yaml: %v", err)
	}
	for _, f := range ff.Flows {
		proto := strings.ToLower(f.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		p := trace.Packet{Src: netip.MustParseAddr(f.SourceIP), Dst: netip.MustParseAddr(f.DestIP), DPort: f.DestPort, Proto: proto}
		r, err := traceFn(p)
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		if got, masq := upstreamForm(r); got != splitSorted(f.Output) || masq != f.Masq {
			t.Errorf("flow %q (%s, %s): got %q masq=%v, want %q masq=%v", f.Name, ff.Upstream, p, r.Summary(), masq, f.Output, f.Masq)
		}
		sm, _ := verify.ExpectMode(mode, res.Map, hostOf(res), p)
		if got, masq := upstreamForm(sm); got != splitSorted(f.Output) || masq != f.Masq {
			t.Errorf("flow %q (%s, %s): the service map says %q masq=%v, upstream %q masq=%v", f.Name, ff.Upstream, p, sm.Summary(), masq, f.Output, f.Masq)
		}
		if a, b := verify.Summary(r), verify.Summary(sm); a != b {
			t.Errorf("flow %q (%s, %s): the rules give\n\t%s\nthe service map says\n\t%s", f.Name, ff.Upstream, p, a, b)
		}
	}
}

// upstreamForm is a result as upstream's flow tests state it: the endpoints (sorted) or
// the verdict, and masq when any path was marked for masquerade (upstream's tracer
// reports a jump to KUBE-MARK-MASQ on any path).
func upstreamForm(r *trace.Result) (string, bool) {
	masq := false
	for _, o := range r.Outcomes {
		masq = masq || o.Masquerade || o.Marked
	}
	return splitSorted(r.Summary()), masq
}

func splitSorted(s string) string {
	parts := strings.Split(s, ", ")
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// hostOf lists the node's local addresses: every interface address of the
// NodeEnvironment (both families), else the Node's addresses.
func hostOf(res *pipeline.Result) trace.Host {
	var h trace.Host
	for _, e := range res.Cluster.Environments {
		for _, itf := range e.Interfaces {
			for _, p := range itf.Addresses {
				h.Local = append(h.Local, p.Addr())
			}
		}
	}
	if len(h.Local) == 0 {
		for _, a := range res.Map.Node.Addresses {
			h.Local = append(h.Local, a.Addr())
		}
	}
	return h
}
