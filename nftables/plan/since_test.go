package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/nftables/internal/nfttest"
	"github.com/svcgen/svcgen/nftables/rules"
	"github.com/svcgen/svcgen/release"
)

// TestSinceIsPartial walks random changes of Services in every release's layout
// (Services added, removed and replaced by another of the same name, endpoints moved
// or all gone, ports renumbered, source ranges set) and checks that Since plans, from
// the changed Services' parts, byte for byte the transactions Partial plans from the
// whole loaded table; that they leave the new map's table; and that the moved key
// counts are the new table's. A change Since declines is planned whole, as apply does.
func TestSinceIsPartial(t *testing.T) {
	since, steps := 0, 0
	for _, r := range release.All() {
		for seed := uint64(1); seed <= 12; seed++ {
			rnd := rand.New(rand.NewPCG(seed, uint64(r.Minor)))
			a := nfttest.CompileFor(t, r.String(), string(randcluster.Generate(seed, randcluster.Options{})))
			b := nfttest.CompileFor(t, r.String(), elsewhere(randcluster.Generate(seed+100, randcluster.Options{})))
			pool := versions(a, b)
			cur := a
			keys := NewKeys(rules.NewTable(cur))
			for step := range 8 {
				next, changed := walk(rnd, cur, pool)
				minimal := step%3 != 2
				what := fmt.Sprintf("v%s seed %d step %d (changed %v, minimal %v)", r, seed, step, changed, minimal)
				before := whole(t, cur)
				want := transactions(t, Partial(rules.NewTable(next), Options{Previous: parse(t, before), Minimal: minimal}))
				c, ok := Since(cur, keys, next, changed, minimal)
				steps++
				if ok {
					since++
					got := transactions(t, c)
					if !slices.Equal(got, want) {
						t.Errorf("%s: Since plans\n%s\nPartial plans\n%s", what, strings.Join(got, "---\n"), strings.Join(want, "---\n"))
					}
					if !c.MoveKeys(keys) {
						t.Fatalf("%s: a change of Since does not move keys", what)
					}
					if fresh := NewKeys(rules.NewTable(next)); !reflect.DeepEqual(keys, fresh) {
						t.Errorf("%s: the moved key counts are\n%v\nthe new table's\n%v", what, keys, fresh)
					}
				} else {
					keys = NewKeys(rules.NewTable(next))
				}
				if len(want) == 1 { // (a set's key two ports write is in the table once)
					if got, w := uniqueLines(dump(t, applyScript(t, before, []byte(want[0])))), uniqueLines(dump(t, rules.Build(next))); got != w {
						t.Errorf("%s: the change leaves\n%s\nwant\n%s", what, got, w)
					}
				}
				cur = next
			}
		}
	}
	t.Logf("Since planned %d of %d changes", since, steps)
	// Since declines only a change of the fixed part or a key two ports write: few.
	if since < steps*3/4 {
		t.Errorf("Since planned %d of %d changes; the test covers too little", since, steps)
	}
}

// TestSinceDeclines: a change of the settings, or of what is no Service's, or a key
// of a map that two Services write, is planned whole.
func TestSinceDeclines(t *testing.T) {
	sm := nfttest.CompileFor(t, "1.37", string(randcluster.Generate(3, randcluster.Options{})))
	keys := NewKeys(rules.NewTable(sm))
	key := sm.Services[0].Key()
	masq := *sm
	masq.MasqueradeAll = !sm.MasqueradeAll
	if _, ok := Since(sm, keys, &masq, []string{key}, true); ok {
		t.Errorf("Since planned a change of masqueradeAll from the changed Services only")
	}
	// A Service's port made another's (but for its name): the maps hold its keys twice.
	var p0, p1 *ir.Port
	for _, s := range sm.Services {
		for _, p := range s.Ports {
			if p.ClusterIP.IsValid() && p0 == nil {
				p0 = p
			} else if p.ClusterIP.IsValid() && p1 == nil && s.Key() != p0.Name.Namespace+"/"+p0.Name.Service {
				p1 = p
			}
		}
	}
	if p1 == nil {
		t.Fatal("the cluster has no two Services with cluster IPs")
	}
	twin := editPort(sm, p1, func(p *ir.Port) { name := p.Name; *p = *p0; p.Name = name })
	changed := []string{p1.Name.Namespace + "/" + p1.Name.Service}
	if _, ok := Since(sm, keys, twin, changed, true); ok {
		t.Errorf("Since planned a change that gives two Services one key of a map")
	}
	// Back from there: the table holds the key twice.
	if _, ok := Since(twin, NewKeys(rules.NewTable(twin)), sm, changed, true); ok {
		t.Errorf("Since planned a change from a table where two Services write one key of a map")
	}
}

// transactions are the texts of a change's transactions as apply loads them.
func transactions(t *testing.T, c *Change) []string {
	t.Helper()
	txs, err := c.Transactions(Load{MarkCommits: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tx := range txs {
		out = append(out, string(tx.Text))
	}
	return out
}

// elsewhere moves a random cluster's cluster IPs, external and load-balancer IPs and
// node ports out of the way of another's of randcluster (its pods stay: Services of
// both select the same endpoints, and share hairpin elements).
func elsewhere(manifests []byte) string {
	return strings.NewReplacer("172.30.0.0/16", "172.30.0.0/16", "172.30.0.", "172.30.1.", "198.51.100.", "198.51.101.", "5.6.7.", "5.6.8.", "nodePort: 30", "nodePort: 31").Replace(string(manifests))
}

// versions are the versions of each Service a walk picks from: a's, b's (another
// Service of the same name), and a's edited.
func versions(a, b *ir.ServiceMap) map[string][]*ir.Service {
	pool := map[string][]*ir.Service{}
	for _, sm := range []*ir.ServiceMap{a, b} {
		for _, s := range sm.Services {
			pool[s.Key()] = append(pool[s.Key()], s)
		}
	}
	for _, s := range a.Services {
		for _, edit := range edits {
			pool[s.Key()] = append(pool[s.Key()], editService(s, edit))
		}
	}
	return pool
}

// edits change one Service's ports.
var edits = []func(p *ir.Port){
	func(p *ir.Port) { // an endpoint moved
		if len(p.Reachable) > 0 {
			p.Endpoints[p.Reachable[0]].Port += 1000 // (a Service's endpoints differ)
		}
	},
	func(p *ir.Port) { // every endpoint gone
		p.Endpoints, p.Cluster, p.Local, p.Reachable, p.HasEndpoints = nil, nil, nil, nil, false
	},
	func(p *ir.Port) { p.Port++ },
	func(p *ir.Port) { // source ranges
		if len(p.LoadBalancerIPs) > 0 {
			p.SourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/26")}
		}
	},
}

func editService(s *ir.Service, edit func(*ir.Port)) *ir.Service {
	c := *s
	c.Ports = nil
	for _, p := range s.Ports {
		pc := *p
		pc.Endpoints = slices.Clone(p.Endpoints)
		edit(&pc)
		c.Ports = append(c.Ports, &pc)
	}
	return &c
}

// editPort is sm with one port edited.
func editPort(sm *ir.ServiceMap, port *ir.Port, edit func(*ir.Port)) *ir.ServiceMap {
	out := *sm
	out.Services = slices.Clone(sm.Services)
	for i, s := range out.Services {
		if slices.Contains(s.Ports, port) {
			c := *s
			c.Ports = slices.Clone(s.Ports)
			pc := *port
			edit(&pc)
			c.Ports[slices.Index(s.Ports, port)] = &pc
			out.Services[i] = &c
		}
	}
	return &out
}

// walk changes one to three Services of sm at random: each takes another version
// from the pool, or goes (or comes back), as compiler.Session would change them;
// changed names them.
func walk(rnd *rand.Rand, sm *ir.ServiceMap, pool map[string][]*ir.Service) (*ir.ServiceMap, []string) {
	names := slices.Sorted(maps.Keys(pool))
	out := *sm
	out.Services = slices.Clone(sm.Services)
	var changed []string
	for range 1 + rnd.IntN(3) {
		key := names[rnd.IntN(len(names))]
		out.Services = slices.DeleteFunc(out.Services, func(s *ir.Service) bool { return s.Key() == key })
		if v := pool[key]; rnd.IntN(5) > 0 {
			out.Services = append(out.Services, v[rnd.IntN(len(v))])
		}
		changed = append(changed, key)
	}
	slices.SortFunc(out.Services, func(x, y *ir.Service) int {
		return strings.Compare(x.Namespace+"\x00"+x.Name, y.Namespace+"\x00"+y.Name)
	})
	slices.Sort(changed)
	return &out, slices.Compact(changed)
}
