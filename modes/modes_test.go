package modes_test

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
)

const cluster = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {clusterIP: 10.96.0.10, type: NodePort, ports: [{name: http, port: 80, nodePort: 30080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.1.0.5]}, {addresses: [10.1.0.6]}]
`

// Every mode of the registry writes the map's rules, reads what it wrote back through
// its apply backend's parser as the rules of the same map, and traces a packet to the
// cluster IP to an endpoint; a change against its own output writes nothing that
// matters (partial modes), and the registry is the one list the commands see.
func TestEveryMode(t *testing.T) {
	var names []string
	for _, m := range modes.All() {
		names = append(names, m.Name)
		sm := testkit.Compile(t, "c.yaml", cluster, pipeline.Settings{Mode: compiler.Mode(m.Name)}).Map
		var out bytes.Buffer
		if err := m.Write(&out, sm, modes.Options{}); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		b := m.Backend(model.IPv4, 0)
		got, err := b.Parse(m.Name, out.Bytes())
		if err != nil {
			t.Fatalf("%s: reading back: %v", m.Name, err)
		}
		if plan, err := b.Plan(sm, got, apply.PlanOptions{}); err != nil || !plan.Empty() {
			t.Errorf("%s: its own output is not the map's rules: %v %v", m.Name, err, plan)
		}
		tr, err := m.Tracer(sm, verify.HostOf(sm))
		if err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		res, err := tr.Trace(trace.Packet{Src: netip.MustParseAddr("10.2.0.1"), Dst: netip.MustParseAddr("10.96.0.10"), DPort: 80, Proto: "tcp"})
		if err != nil || strings.Join(res.Endpoints(), " ") != "10.1.0.5:8080 10.1.0.6:8080" {
			t.Errorf("%s: a packet to the cluster IP reaches %v (%v)", m.Name, res.Endpoints(), err)
		}
	}
	if got := strings.Join(names, " "); got != "iptables ipvs nftables" {
		t.Errorf("modes %s", got)
	}
	if _, err := modes.Lookup("userspace"); err == nil || err.Error() != `unknown mode "userspace" (want iptables, ipvs or nftables)` {
		t.Errorf("Lookup(userspace): %v", err)
	}
}

// Each mode refuses the options it does not take, with a usage error naming the modes
// that take it.
func TestOptions(t *testing.T) {
	prev := &modes.Input{Name: "prev", R: strings.NewReader("")}
	for _, tc := range []struct {
		mode  string
		o     modes.Options
		split bool
		want  string
	}{
		{"nftables", modes.Options{NoFlush: true}, false, "--noflush is for iptables mode (-m); the nftables script owns its table"},
		{"iptables", modes.Options{Stages: true}, false, "--stages is for nftables mode (-m)"},
		{"ipvs", modes.Options{Previous: prev}, false, "--previous is for iptables or nftables mode (-m)"},
		{"iptables", modes.Options{}, true, "--split is for ipvs mode (-m)"},
		{"iptables", modes.Options{Minimal: true}, false, "--minimal needs --previous"},
		{"nftables", modes.Options{Stages: true, Previous: prev}, false, "--stages writes the whole table"},
		{"ipvs", modes.Options{}, true, ""},
		{"nftables", modes.Options{Previous: prev, Minimal: true}, false, ""},
	} {
		m, err := modes.Lookup(tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		err = m.Check(tc.o, tc.split)
		var oe *modes.OptionError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %+v: %v", tc.mode, tc.o, err)
		case tc.want != "" && (!errors.As(err, &oe) || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s %+v: %v, want %q", tc.mode, tc.o, err, tc.want)
		}
	}
	// A previous ruleset that does not parse is the input's fault.
	m, _ := modes.Lookup("iptables")
	sm := testkit.Compile(t, "c.yaml", cluster, pipeline.Settings{}).Map
	err := m.Write(io.Discard, sm, modes.Options{Previous: &modes.Input{Name: "prev", R: strings.NewReader("-A X\n")}})
	if !errors.Is(err, pipeline.ErrInput) {
		t.Errorf("a broken previous ruleset: %v", err)
	}
}
