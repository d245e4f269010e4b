package golden

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/emit/iptables"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/trace"
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
	if err := iptables.Write(&b, res.Map, iptables.Options{Format: iptables.Complete}); err != nil {
		t.Fatal(err)
	}
	rs, err := iptables.ParseBytes("complete", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.NewIPTables(rs, hostOf(res))
	if err != nil {
		t.Fatal(err)
	}
	checkFlows(t, c, tr.Trace)
}

// checkFlows traces each flow of the case's flows.yaml and compares the endpoints (as
// a set, as upstream lists them in rule order) or verdict, and the masquerade
// decision.
func checkFlows(t *testing.T, c goldenCase, traceFn func(trace.Packet) (*trace.Result, error)) {
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
		got, want := splitSorted(r.Summary()), splitSorted(f.Output)
		// Upstream's tracers report masq when any path jumped to the masquerade mark.
		masq := false
		for _, o := range r.Outcomes {
			masq = masq || o.Masquerade || o.Marked
		}
		if got != want || masq != f.Masq {
			t.Errorf("flow %q (%s, %s): got %q masq=%v, want %q masq=%v", f.Name, ff.Upstream, p, r.Summary(), masq, f.Output, f.Masq)
		}
	}
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
