package compiler

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
)

// Session keeps one node's compiled state between changes to its inputs, for
// `svcgen apply --watch`: when only EndpointSlices, Endpoints or Pods change, it
// recompiles just the Services they belong to (a few milliseconds on a
// 10,000-Service cluster); any other change (a Service, Node, ServiceCIDR,
// configuration or NodeEnvironment) resolves and compiles everything again. Either
// way the new service map equals what Resolve and Compile give for the whole
// cluster; the tests hold it to that.
//
// A Session is not safe for concurrent use. Service maps it returned stay valid and
// unchanged: an update builds a new map that shares the unchanged Services.
type Session struct {
	ropts ResolveOptions
	opts  Options

	in       model.Cluster // the inputs as loaded
	resolved *Resolved
	fams     []*familyState // one per family of the run, in CompileAll's order

	// Indexes into in, kept up to date by endpoint-only updates.
	services  map[string]*model.Service         // resolved Services by key
	slices    map[string][]*model.EndpointSlice // loaded slices by "namespace/service"
	endpoints map[string]*model.Endpoints       // by "namespace/name"
	pods      map[string][]*model.Pod           // by namespace, sorted by name
	objects   map[string]bool                   // "Kind namespace/name" of slices, Endpoints, Pods
	nodes     map[string]*model.Node
}

// familyState is one family's service map and its endpoint counts.
type familyState struct {
	sm     *ir.ServiceMap
	counts map[string]int // endpoints per Service, for large-cluster mode
	total  int
}

// Update is the outcome of one change.
type Update struct {
	// Maps are the service maps of the run's families, as CompileAll returns them.
	Maps []*ir.ServiceMap
	// Changed lists the Services ("namespace/name") whose rules may differ from the
	// previous maps', sorted; every other Service is the same *ir.Service as before.
	// Nil when All is set.
	Changed []string
	// All: everything was compiled again; any rule may differ.
	All bool
	// Warnings of the control plane; only a full compile reports them.
	Warnings []*model.Problem
}

// Change says what happened to the inputs: Removed holds objects as they were
// (pointers the Session was given before, for example every object of a file that
// changed), Added the objects that take their place. An object removed and added
// again unchanged costs nothing.
type Change struct {
	Removed, Added *model.Cluster
}

// NewSession resolves and compiles the cluster, as Resolve and Compile do.
func NewSession(c *model.Cluster, ropts ResolveOptions, opts Options) (*Session, *Update, error) {
	s := &Session{ropts: ropts, opts: opts}
	s.in.Append(c)
	up, err := s.full()
	if err != nil {
		return nil, nil, err
	}
	return s, up, nil
}

// Maps are the current service maps, one per family of the run.
func (s *Session) Maps() []*ir.ServiceMap {
	out := make([]*ir.ServiceMap, len(s.fams))
	for i, f := range s.fams {
		out[i] = f.sm
	}
	return out
}

// Resolved is the cluster as last resolved in full (its Lock included).
func (s *Session) Resolved() *Resolved { return s.resolved }

// Apply applies a change and recompiles what it touches. On an error (the changed
// inputs are wrong) the Session keeps its previous state.
func (s *Session) Apply(ch Change) (*Update, error) {
	removed, added := orEmpty(ch.Removed), orEmpty(ch.Added)
	prevIn := s.in
	s.in = removeObjects(s.in, removed)
	s.in.Append(added)
	if !sameObjects(removed, added) || s.duplicates(removed, added) || s.podsOfWorkloads(removed, added) {
		up, err := s.full()
		if err != nil {
			s.in = prevIn
		}
		return up, err
	}
	return s.endpointsOnly(removed, added), nil
}

func orEmpty(c *model.Cluster) *model.Cluster {
	if c == nil {
		return &model.Cluster{}
	}
	return c
}

// full resolves and compiles everything and rebuilds the indexes.
func (s *Session) full() (*Update, error) {
	res, err := Resolve(&s.in, s.ropts)
	if err != nil {
		return nil, err
	}
	maps, err := CompileAll(res.Cluster, s.opts)
	if err != nil {
		return nil, err
	}
	if s.fams != nil && ir.FamilyNames(maps) != ir.FamilyNames(s.Maps()) {
		// kube-proxy picks its proxiers once, at start; so does a Session (apply
		// --watch opened its kernel backends per family).
		return nil, fmt.Errorf("the inputs now give IP families %s, and this run started with %s: restart it (or pin the families with --ip-family)", ir.FamilyNames(maps), ir.FamilyNames(s.Maps()))
	}
	s.resolved, s.fams = res, make([]*familyState, len(maps))
	for i, sm := range maps {
		s.fams[i] = &familyState{sm: sm}
	}
	s.index()
	return &Update{Maps: maps, All: true, Warnings: res.Warnings}, nil
}

func (s *Session) index() {
	s.services = map[string]*model.Service{}
	for _, svc := range s.resolved.Cluster.Services {
		s.services[svc.Key()] = svc
	}
	s.slices, s.endpoints, s.pods, s.objects = map[string][]*model.EndpointSlice{}, map[string]*model.Endpoints{}, map[string][]*model.Pod{}, map[string]bool{}
	for _, es := range s.in.Slices {
		s.addSlice(es)
	}
	for _, e := range s.in.Endpoints {
		s.endpoints[e.Namespace+"/"+e.Name] = e
		s.objects[objectKey(e.Origin, e.Namespace, e.Name)] = true
	}
	for _, p := range s.in.Pods {
		s.objects[objectKey(p.Origin, p.Namespace, p.Name)] = true
	}
	// The resolved Pods: the input's and those made from workloads.
	for _, p := range s.resolved.Cluster.Pods {
		s.pods[p.Namespace] = append(s.pods[p.Namespace], p)
	}
	for _, list := range s.pods {
		sortPods(list)
	}
	s.nodes = nodesByName(s.in.Nodes)
	for _, f := range s.fams {
		f.counts, f.total = map[string]int{}, 0
		for _, svc := range f.sm.Services {
			n := endpointCount(svc)
			f.counts[svc.Key()] = n
			f.total += n
		}
	}
}

func (s *Session) addSlice(es *model.EndpointSlice) {
	k := es.Namespace + "/" + es.ServiceName
	s.slices[k] = append(s.slices[k], es)
	s.objects[objectKey(es.Origin, es.Namespace, es.Name)] = true
}

func objectKey(o model.Origin, ns, name string) string { return o.Kind + " " + ns + "/" + name }

func sortPods(list []*model.Pod) {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
}

func endpointCount(svc *ir.Service) int {
	n := 0
	for _, p := range svc.Ports {
		n += len(p.Endpoints)
	}
	return n
}

// endpointsOnly recompiles the Services whose slices, Endpoints or Pods changed.
func (s *Session) endpointsOnly(removed, added *model.Cluster) *Update {
	touched := map[string]bool{}
	for _, c := range []*model.Cluster{removed, added} {
		for _, es := range c.Slices {
			touched[es.Namespace+"/"+es.ServiceName] = true
		}
		for _, e := range c.Endpoints {
			touched[e.Namespace+"/"+e.Name] = true
		}
		for _, p := range c.Pods {
			for _, svc := range s.resolved.Cluster.Services {
				if svc.Namespace == p.Namespace && len(svc.Selector) > 0 && selects(svc.Selector, p.Labels) {
					touched[svc.Key()] = true
				}
			}
		}
	}
	s.reindex(removed, added)
	var changed []string
	for key := range touched {
		if s.services[key] != nil { // else endpoints of a Service that does not exist
			changed = append(changed, key)
		}
	}
	sort.Strings(changed)
	up := &Update{Changed: changed}
	for _, f := range s.fams {
		sm := *f.sm
		sm.Services = slices.Clone(f.sm.Services)
		for _, key := range changed {
			s.recompile(f, &sm, s.services[key])
		}
		sm.LargeCluster = f.total > ir.LargeClusterThreshold
		if sm.LargeCluster != f.sm.LargeCluster {
			up.All, up.Changed = true, nil
		}
		f.sm = &sm
		up.Maps = append(up.Maps, &sm)
	}
	return up
}

// reindex takes the removed objects out of the indexes and puts the added ones in.
func (s *Session) reindex(removed, added *model.Cluster) {
	for _, es := range removed.Slices {
		k := es.Namespace + "/" + es.ServiceName
		s.slices[k] = slices.DeleteFunc(slices.Clone(s.slices[k]), func(x *model.EndpointSlice) bool { return x == es })
		delete(s.objects, objectKey(es.Origin, es.Namespace, es.Name))
	}
	for _, e := range removed.Endpoints {
		delete(s.endpoints, e.Namespace+"/"+e.Name)
		delete(s.objects, objectKey(e.Origin, e.Namespace, e.Name))
	}
	for _, p := range removed.Pods {
		s.pods[p.Namespace] = slices.DeleteFunc(slices.Clone(s.pods[p.Namespace]), func(x *model.Pod) bool { return x == p })
		delete(s.objects, objectKey(p.Origin, p.Namespace, p.Name))
	}
	for _, es := range added.Slices {
		s.addSlice(es)
	}
	for _, e := range added.Endpoints {
		s.endpoints[e.Namespace+"/"+e.Name] = e
		s.objects[objectKey(e.Origin, e.Namespace, e.Name)] = true
	}
	for _, p := range added.Pods {
		s.pods[p.Namespace] = append(s.pods[p.Namespace], p)
		sortPods(s.pods[p.Namespace])
		s.objects[objectKey(p.Origin, p.Namespace, p.Name)] = true
	}
}

// recompile builds one Service again, as Resolve's endpoint step and Compile would,
// and puts it into sm in place of the old one.
func (s *Session) recompile(f *familyState, sm *ir.ServiceMap, svc *model.Service) {
	key := svc.Key()
	list := slices.Clone(s.slices[key])
	sort.SliceStable(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	if len(list) == 0 {
		r := &resolver{opts: s.ropts, out: &model.Cluster{Pods: s.pods[svc.Namespace]}}
		list = r.generatedSlices(svc, s.endpoints[key], s.nodes)
	}
	scratch := &ir.ServiceMap{Family: sm.Family, Target: sm.Target, Node: sm.Node}
	b := &builder{sm: scratch, slices: slicesByService(list, sm.Family)}
	b.service(svc)
	sortServices(scratch.Services)
	var fresh *ir.Service
	if len(scratch.Services) == 1 {
		fresh = scratch.Services[0]
	}
	i, found := sort.Find(len(sm.Services), func(i int) int { return compareService(svc, sm.Services[i]) })
	switch {
	case found && fresh != nil:
		sm.Services[i] = fresh
	case found:
		sm.Services = slices.Delete(sm.Services, i, i+1)
	case fresh != nil:
		sm.Services = slices.Insert(sm.Services, i, fresh)
	}
	f.total -= f.counts[key]
	f.counts[key] = 0
	if fresh != nil {
		f.counts[key] = endpointCount(fresh)
		f.total += f.counts[key]
	}
}

// compareService orders a Service against the map's, as sortServices does.
func compareService(a *model.Service, b *ir.Service) int {
	switch {
	case a.Namespace < b.Namespace:
		return -1
	case a.Namespace > b.Namespace:
		return 1
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// duplicates reports an added slice, Endpoints or Pod whose name another object of
// its kind holds: the full path reports the error.
func (s *Session) duplicates(removed, added *model.Cluster) bool {
	gone := map[string]bool{}
	for _, es := range removed.Slices {
		gone[objectKey(es.Origin, es.Namespace, es.Name)] = true
	}
	for _, e := range removed.Endpoints {
		gone[objectKey(e.Origin, e.Namespace, e.Name)] = true
	}
	for _, p := range removed.Pods {
		gone[objectKey(p.Origin, p.Namespace, p.Name)] = true
	}
	seen := map[string]bool{}
	check := func(k string) bool {
		dup := seen[k] || s.objects[k] && !gone[k]
		seen[k] = true
		return dup
	}
	for _, es := range added.Slices {
		if check(objectKey(es.Origin, es.Namespace, es.Name)) {
			return true
		}
	}
	for _, e := range added.Endpoints {
		if check(objectKey(e.Origin, e.Namespace, e.Name)) {
			return true
		}
	}
	for _, p := range added.Pods {
		if check(objectKey(p.Origin, p.Namespace, p.Name)) {
			return true
		}
	}
	return false
}

// podsOfWorkloads reports a change of Pods in a cluster with workloads: which Pods
// the workloads make, and their addresses, depend on the input's Pods, so the full
// path makes them again.
func (s *Session) podsOfWorkloads(removed, added *model.Cluster) bool {
	return len(s.in.Workloads) > 0 && len(removed.Pods)+len(added.Pods) > 0
}

// sameObjects reports whether removed and added hold the same Services, Nodes,
// ServiceCIDRs, configurations and NodeEnvironments (where they came from aside):
// then only endpoints changed.
func sameObjects(removed, added *model.Cluster) bool {
	return sameList(removed.Services, added.Services) && sameList(removed.Nodes, added.Nodes) &&
		sameList(removed.ServiceCIDRs, added.ServiceCIDRs) && sameList(removed.Configs, added.Configs) &&
		sameList(removed.Environments, added.Environments) && sameList(removed.Workloads, added.Workloads)
}

// sameList compares two lists of objects in order, ignoring each one's Origin (its
// first field), so that a document moving inside a file is no change.
func sameList[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := *a[i], *b[i]
		reflect.ValueOf(&x).Elem().Field(0).SetZero()
		reflect.ValueOf(&y).Elem().Field(0).SetZero()
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// removeObjects returns c without the objects of removed (compared by pointer), in
// new slices: c's are left as they are.
func removeObjects(c model.Cluster, removed *model.Cluster) model.Cluster {
	c.Services = without(c.Services, removed.Services)
	c.Slices = without(c.Slices, removed.Slices)
	c.Endpoints = without(c.Endpoints, removed.Endpoints)
	c.Pods = without(c.Pods, removed.Pods)
	c.Nodes = without(c.Nodes, removed.Nodes)
	c.ServiceCIDRs = without(c.ServiceCIDRs, removed.ServiceCIDRs)
	c.Configs = without(c.Configs, removed.Configs)
	c.Environments = without(c.Environments, removed.Environments)
	c.Workloads = without(c.Workloads, removed.Workloads)
	return c
}

func without[T comparable](list, drop []T) []T {
	out := make([]T, 0, len(list))
	if len(drop) == 0 {
		return append(out, list...)
	}
	gone := make(map[T]bool, len(drop))
	for _, x := range drop {
		gone[x] = true
	}
	for _, x := range list {
		if !gone[x] {
			out = append(out, x)
		}
	}
	return out
}
