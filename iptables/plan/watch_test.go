package plan

import (
	"bytes"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/iptables/syntax"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

var sessionOpts = compiler.Options{Mode: compiler.IPTables}

func generated(t testing.TB, services int) *model.Cluster {
	t.Helper()
	return testkit.Load(t, "gen.yaml", testkit.GenYAML(t, gen.Options{Services: services, Endpoints: 4, Seed: 3}))
}

// fullCompile is what a fresh run gives for the same inputs (sessionOpts are the
// pipeline's options for iptables mode).
func fullCompile(t *testing.T, c *model.Cluster) *ir.ServiceMap {
	t.Helper()
	return testkit.CompileCluster(t, c, pipeline.Settings{Mode: compiler.IPTables}).Map
}

func sliceOf(c *model.Cluster, service string) *model.EndpointSlice {
	for _, es := range c.Slices {
		if es.Namespace+"/"+es.ServiceName == service {
			return es
		}
	}
	return nil
}

// editSlice copies a slice and changes the copy's endpoints.
func editSlice(es *model.EndpointSlice, edit func([]model.Endpoint)) *model.EndpointSlice {
	c := *es
	c.Endpoints = append([]model.Endpoint(nil), es.Endpoints...)
	edit(c.Endpoints)
	return &c
}

func replace[T any](old, new *T) compiler.Change {
	var removed, added model.Cluster
	put := func(c *model.Cluster, x *T) {
		switch v := any(x).(type) {
		case *model.EndpointSlice:
			c.Slices = append(c.Slices, v)
		case *model.Pod:
			c.Pods = append(c.Pods, v)
		case *model.Service:
			c.Services = append(c.Services, v)
		}
	}
	if old != nil {
		put(&removed, old)
	}
	if new != nil {
		put(&added, new)
	}
	return compiler.Change{Removed: &removed, Added: &added}
}

type step struct {
	name    string
	change  func(c *model.Cluster) compiler.Change
	all     bool     // a full compile is expected
	changed []string // else the Services reported
}

func steps() []step {
	no := false
	return []step{
		{name: "one endpoint moves", changed: []string{"ns-0/svc-0"}, change: func(c *model.Cluster) compiler.Change {
			old := sliceOf(c, "ns-0/svc-0")
			return replace(old, editSlice(old, func(eps []model.Endpoint) { eps[0].Addresses = []netip.Addr{netip.MustParseAddr("10.99.0.1")} }))
		}},
		{name: "an endpoint stops being ready", changed: []string{"ns-0/svc-1"}, change: func(c *model.Cluster) compiler.Change {
			old := sliceOf(c, "ns-0/svc-1")
			return replace(old, editSlice(old, func(eps []model.Endpoint) { eps[1].Ready = &no }))
		}},
		{name: "a slice goes away", changed: []string{"ns-0/svc-4"}, change: func(c *model.Cluster) compiler.Change {
			return replace(sliceOf(c, "ns-0/svc-4"), nil)
		}},
		{name: "a pod stops being ready", changed: []string{"ns-0/svc-16"}, change: func(c *model.Cluster) compiler.Change {
			for _, old := range c.Pods {
				if old.Name == "svc-16-0" {
					p := *old
					p.Ready = !p.Ready
					return replace(old, &p)
				}
			}
			panic("no pod svc-16-0")
		}},
		{name: "nothing really changed", changed: []string{"ns-0/svc-2"}, change: func(c *model.Cluster) compiler.Change {
			old := sliceOf(c, "ns-0/svc-2")
			same := *old
			return replace(old, &same)
		}},
		{name: "a Service changes", all: true, change: func(c *model.Cluster) compiler.Change {
			for _, old := range c.Services {
				if old.Key() == "ns-0/svc-3" {
					s := *old
					s.ExternalIPs = []netip.Addr{netip.MustParseAddr("198.18.99.1")}
					return replace(old, &s)
				}
			}
			panic("no Service ns-3/svc-3")
		}},
	}
}

// TestSessionAndChanges walks a cluster through changes: after each, the Session's
// map equals a full compile of the same inputs, it names the Services it recompiled,
// and the partial restore against the previous rules and map (apply --watch's), with
// the Session's list of changed Services, without it, and as a full sync, leaves
// exactly the full rules.
func TestSessionAndChanges(t *testing.T) {
	c := generated(t, 60)
	sess, up, err := compiler.NewSession(c, compiler.ResolveOptions{}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !up.All {
		t.Error("the first compile is not a full one")
	}
	cur := *c
	for _, s := range steps() {
		prev := sess.Maps()[0]
		ch := s.change(&cur)
		up, err := sess.Apply(ch)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		cur = withChange(cur, ch)
		if want := fullCompile(t, &cur); !reflect.DeepEqual(up.Maps[0], want) {
			t.Errorf("%s: the session's map differs from a full compile", s.name)
		}
		if up.All != s.all || !s.all && !reflect.DeepEqual(up.Changed, s.changed) {
			t.Errorf("%s: update says all=%v changed=%v, want all=%v changed=%v", s.name, up.All, up.Changed, s.all, s.changed)
		}
		for _, variant := range []string{"hint", "compare", "full sync"} {
			opts := Options{Previous: payload(t, prev), PreviousMap: prev, Minimal: true}
			switch variant {
			case "hint":
				opts.Changed = up.Changed
			case "full sync":
				opts.FullSync, opts.Minimal = true, false
			}
			delta := write(t, up.Maps[0], opts)
			switch {
			case variant == "full sync":
			case s.name == "one endpoint moves":
				if len(delta) > 5000 || bytes.Contains(delta, []byte("KUBE-SERVICES")) {
					t.Errorf("%s (%s): %d bytes; want at most 5000, and KUBE-SERVICES left alone:\n%s", s.name, variant, len(delta), delta)
				}
			case s.name == "nothing really changed":
				if len(delta) != 0 {
					t.Errorf("%s (%s): wrote\n%s", s.name, variant, delta)
				}
			}
			state := restoreOver(t, payload(t, prev), delta)
			if got, want := dumpRules(state), dumpRules(payload(t, up.Maps[0])); got != want {
				t.Errorf("%s (%s): previous rules + changes differ from the full rules:\n%s", s.name, variant, diffLines(got, want))
			}
		}
	}
}

// withChange applies a change to a plain cluster, as a caller keeps its inputs.
func withChange(c model.Cluster, ch compiler.Change) model.Cluster {
	c.Slices = append(dropAll(c.Slices, ch.Removed.Slices), ch.Added.Slices...)
	c.Pods = append(dropAll(c.Pods, ch.Removed.Pods), ch.Added.Pods...)
	c.Services = append(dropAll(c.Services, ch.Removed.Services), ch.Added.Services...)
	return c
}

func dropAll[T comparable](list, gone []T) []T {
	var keep []T
	for _, x := range list {
		found := false
		for _, g := range gone {
			found = found || g == x
		}
		if !found {
			keep = append(keep, x)
		}
	}
	return keep
}

func payload(t *testing.T, sm *ir.ServiceMap) *syntax.Ruleset {
	t.Helper()
	var b bytes.Buffer
	if err := rules.Write(&b, sm, rules.Options{Format: rules.NoFlush}); err != nil {
		t.Fatal(err)
	}
	rs, err := syntax.ParseBytes("payload", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// restoreOver does what `iptables-restore --noflush` does with text on a node holding
// state: a chain line creates or flushes the chain, -A appends, -X deletes a chain,
// which must be empty and unreferenced.
func restoreOver(t *testing.T, state *syntax.Ruleset, text []byte) *syntax.Ruleset {
	t.Helper()
	delta, err := syntax.ParseBytes("changes", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, dt := range delta.Tables {
		st := state.Table(dt.Name)
		for _, c := range dt.Chains {
			if !c.Declared {
				t.Errorf("the changes append to chain %s without declaring it", c.Name)
			}
		}
		for _, name := range dt.Deleted {
			if st.Chain(name) == nil {
				t.Errorf("-X %s: no such chain", name)
			}
		}
	}
	if err := state.Restore("changes", bytes.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	for _, dt := range delta.Tables {
		for _, c := range state.Table(dt.Name).Chains {
			for _, r := range c.Rules {
				for _, name := range dt.Deleted {
					if strings.Contains(" "+strings.Join(r.Args, " ")+" ", " "+name+" ") {
						t.Errorf("-X %s: still referenced by %s", name, r.Text())
					}
				}
			}
		}
	}
	return state
}

func dumpRules(rs *syntax.Ruleset) string {
	var lines []string
	for _, tb := range rs.Tables {
		for _, c := range tb.Chains {
			lines = append(lines, tb.Name+" :"+c.Name)
			for i, r := range c.Rules {
				lines = append(lines, fmt.Sprintf("%s %s %05d %s", tb.Name, c.Name, i, strings.Join(r.Args, " ")))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func diffLines(got, want string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	var out []string
	for l := range g {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	for l := range w {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], "...")
	}
	return strings.Join(out, "\n")
}
