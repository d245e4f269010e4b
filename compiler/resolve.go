// Package compiler is svcgen's control plane and compiler.
//
// Resolve does what the API server and the controllers would have done to the
// manifests: it validates them as a whole, gives Services their ClusterIPs and
// NodePorts (stable through a Lock), and builds EndpointSlices from Pods for Services
// that have none. Compile turns the resolved cluster into the service map of one node
// (package ir). Both are pure functions: no clock, files or environment.
package compiler

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/svcgen/svcgen/model"
)

// DefaultServiceCIDR is kube-apiserver's default --service-cluster-ip-range.
var DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// ResolveOptions are the control-plane settings of a run.
type ResolveOptions struct {
	// ServiceCIDRs to allocate from when the input has no ServiceCIDR objects.
	ServiceCIDRs  []netip.Prefix
	NodePortRange PortRange
	Lock          *Lock
	// NoAllocate leaves Services without a ClusterIP or NodePort as they are:
	// kube-proxy's own tests feed objects that never passed an API server.
	NoAllocate bool
	// MiniK8s relaxes checks the course projects' manifests fail (node ports outside
	// the range become warnings).
	MiniK8s bool
	// Nodes is how many Nodes to make when the input has none (--nodes); 0: none.
	Nodes int
	// PodCIDRs are the cluster CIDRs Nodes without spec.podCIDRs get theirs from
	// (--pod-cidr, one per family); empty: DefaultPodCIDR.
	PodCIDRs []netip.Prefix
	// Node is the node the rules are for, where the Pods of workloads go when the
	// input has no Node and Nodes is 0.
	Node string
}

// Resolved is a cluster as the API server and controllers would leave it.
type Resolved struct {
	Cluster  *model.Cluster
	Lock     *Lock
	Warnings []*model.Problem
	// Made counts the Pods made from workloads, by the workloads' kind ("Deployment");
	// a kind whose workloads made none is there with 0.
	Made map[string]int
}

// Resolve validates the cluster as a whole, allocates addresses and ports, and builds
// endpoints from Pods. The input is not modified. All problems are reported together.
func Resolve(in *model.Cluster, opts ResolveOptions) (*Resolved, error) {
	if opts.NodePortRange == (PortRange{}) {
		opts.NodePortRange = DefaultNodePortRange
	}
	r := &resolver{opts: opts, out: copyCluster(in), lock: &Lock{Services: map[string]LockedService{}}}
	if opts.Lock != nil && !opts.NoAllocate {
		if err := opts.Lock.check(r.serviceCIDRs()); err != nil {
			return nil, err
		}
	}
	r.checkUnique()
	r.checkServices()
	if !opts.NoAllocate {
		r.allocateClusterIPs()
		r.allocateNodePorts()
	}
	r.makeNodes()
	r.makePods()
	r.recordLock()
	r.buildEndpoints()
	r.errs.Sort()
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	r.warns.Sort()
	return &Resolved{Cluster: r.out, Lock: r.lock, Warnings: r.warns.List(), Made: r.made}, nil
}

type resolver struct {
	opts  ResolveOptions
	out   *model.Cluster
	owned []bool // which of out's Services are copies (see own)
	lock  *Lock
	// absent are the lock's entries of Services not in the input, kept (reserveAbsent);
	// absentPods those of Pods of workloads not in the input (reserveAbsentPods).
	absent     map[string]LockedService
	absentPods map[string]LockedPod
	made       map[string]int // Pods made, by workload kind
	// podLocks are the addresses of the Pods made, for the new lock.
	podLocks map[string]LockedPod
	errs     model.Problems
	warns    model.Problems
}

// copyCluster copies the object lists, sorted by key so that every later pass walks
// them in one order. The objects are the input's: the resolver copies a Service
// before it changes one (see own), and most clusters (as the API server stores
// them) need no change at all.
func copyCluster(in *model.Cluster) *model.Cluster {
	out := *in
	out.Services = slices.Clone(in.Services)
	slices.SortStableFunc(out.Services, func(a, b *model.Service) int { return byKey(a.Namespace, a.Name, b.Namespace, b.Name) })
	out.Slices = slices.Clone(in.Slices)
	slices.SortStableFunc(out.Slices, func(a, b *model.EndpointSlice) int { return byKey(a.Namespace, a.Name, b.Namespace, b.Name) })
	out.Pods = slices.Clone(in.Pods)
	slices.SortStableFunc(out.Pods, func(a, b *model.Pod) int { return byKey(a.Namespace, a.Name, b.Namespace, b.Name) })
	out.Nodes = slices.Clone(in.Nodes)
	slices.SortStableFunc(out.Nodes, func(a, b *model.Node) int { return strings.Compare(a.Name, b.Name) })
	out.Workloads = slices.Clone(in.Workloads)
	slices.SortStableFunc(out.Workloads, func(a, b *model.Workload) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return byKey(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	out.ServiceCIDRs = slices.Clone(in.ServiceCIDRs)
	slices.SortStableFunc(out.ServiceCIDRs, func(a, b *model.ServiceCIDR) int { return strings.Compare(a.Name, b.Name) })
	return &out
}

// own returns Service i of the output for changing: the first time, a copy of the
// input's (its lists too), which takes its place, so that Resolve never changes its
// input.
func (r *resolver) own(i int) *model.Service {
	if r.owned == nil {
		r.owned = make([]bool, len(r.out.Services))
	}
	s := r.out.Services[i]
	if r.owned[i] {
		return s
	}
	c := *s
	c.ClusterIPs = slices.Clone(s.ClusterIPs)
	c.Ports = slices.Clone(s.Ports)
	r.out.Services[i], r.owned[i] = &c, true
	return &c
}

// byKey orders objects by "namespace/name" (namespaces hold no "/", so comparing the
// parts in turn is the same order).
func byKey(ns1, name1, ns2, name2 string) int {
	if c := strings.Compare(ns1, ns2); c != 0 {
		return c
	}
	return strings.Compare(name1, name2)
}

// objectID names an object of a kind, for finding two of one name.
type objectID struct{ kind, namespace, name string }

// checkUnique reports two objects of one kind with one name. The lists copyCluster
// sorted (stably) hold such twins side by side, the first loaded first; the others
// are found through a map.
func (r *resolver) checkUnique() {
	c := r.out
	twice := func(o, first model.Origin, ns, name string) {
		key := name
		if ns != "" {
			key = ns + "/" + name
		}
		r.errs.Add(o, "metadata.name", "%s %s is defined twice (first in %s)", o.Kind, key, first)
	}
	sorted := func(n int, object func(i int) (o model.Origin, ns, name string)) {
		var first model.Origin
		var firstNS, firstName string
		for i := range n {
			o, ns, name := object(i)
			if i > 0 && ns == firstNS && name == firstName {
				twice(o, first, ns, name)
				continue
			}
			first, firstNS, firstName = o, ns, name
		}
	}
	sorted(len(c.Services), func(i int) (model.Origin, string, string) {
		s := c.Services[i]
		return s.Origin, s.Namespace, s.Name
	})
	sorted(len(c.Slices), func(i int) (model.Origin, string, string) {
		s := c.Slices[i]
		return s.Origin, s.Namespace, s.Name
	})
	sorted(len(c.Pods), func(i int) (model.Origin, string, string) {
		p := c.Pods[i]
		return p.Origin, p.Namespace, p.Name
	})
	sorted(len(c.Nodes), func(i int) (model.Origin, string, string) { return c.Nodes[i].Origin, "", c.Nodes[i].Name })
	sorted(len(c.ServiceCIDRs), func(i int) (model.Origin, string, string) {
		return c.ServiceCIDRs[i].Origin, "", c.ServiceCIDRs[i].Name
	})
	seen := map[objectID]model.Origin{}
	check := func(o model.Origin, ns, name string) {
		k := objectID{o.Kind, ns, name}
		if first, dup := seen[k]; dup {
			twice(o, first, ns, name)
			return
		}
		seen[k] = o
	}
	for _, e := range c.Endpoints {
		check(e.Origin, e.Namespace, e.Name)
	}
	for _, e := range c.Environments {
		check(e.Origin, "", e.Node)
	}
	for _, w := range c.Workloads {
		check(w.Origin, w.Namespace, w.Name)
	}
	if len(c.Configs) > 1 {
		r.errs.Add(c.Configs[1].Origin, "", "a second KubeProxyConfiguration (the first is in %s); give one", c.Configs[0].Origin)
	}
}

// checkServices validates what only makes sense per Service: unique port names and
// port/protocol pairs, node ports inside the range.
func (r *resolver) checkServices() {
	for _, s := range r.out.Services {
		if s.Type == model.TypeExternalName || s.Headless {
			continue
		}
		if len(s.Ports) == 0 {
			r.errs.Add(s.Origin, "spec.ports", "missing: a Service needs at least one port")
		}
		for i, p := range s.Ports {
			field := "spec.ports[" + itoa(i) + "]"
			// The last earlier port of the same name, and of the same port and protocol.
			sameName, samePair := -1, -1
			for j, q := range s.Ports[:i] {
				if q.Name == p.Name {
					sameName = j
				}
				if q.Port == p.Port && q.Protocol == p.Protocol {
					samePair = j
				}
			}
			if j := sameName; j >= 0 {
				if p.Name == "" {
					r.errs.Add(s.Origin, field+".name", "missing: every port needs a name when a Service has more than one (spec.ports[%d] is unnamed too)", j)
				} else {
					r.errs.Add(s.Origin, field+".name", "%q is also the name of spec.ports[%d]", p.Name, j)
				}
			}
			if j := samePair; j >= 0 {
				r.errs.Add(s.Origin, field, "port %s is also spec.ports[%d]", itoa(int(p.Port))+"/"+string(p.Protocol), j)
			}
			if p.NodePort != 0 && !r.opts.NodePortRange.contains(p.NodePort) {
				r.outOfRange(s, field+".nodePort", p.NodePort)
			}
		}
		if s.HealthCheckNodePort != 0 && !r.opts.NodePortRange.contains(s.HealthCheckNodePort) {
			r.outOfRange(s, "spec.healthCheckNodePort", s.HealthCheckNodePort)
		}
	}
}

func (r *resolver) outOfRange(s *model.Service, field string, port int32) {
	if r.opts.NoAllocate {
		return // upstream tests use ports such as 3001
	}
	if r.opts.MiniK8s {
		r.warns.Add(s.Origin, field, "%d is outside the node port range %s", port, r.opts.NodePortRange)
		return
	}
	r.errs.Add(s.Origin, field, "%d is outside the node port range %s (see --node-port-range)", port, r.opts.NodePortRange)
}

// proxied reports whether kube-proxy programs the Service at all.
func proxied(s *model.Service) bool {
	return s.Type != model.TypeExternalName && !s.Headless && s.Labels[model.LabelServiceProxyName] == ""
}

// recordLock writes every Service's addresses and ports into the new lock, beside the
// entries kept for Services not in the input.
func (r *resolver) recordLock() {
	maps.Copy(r.lock.Services, r.absent)
	r.lock.Pods = maps.Clone(r.absentPods)
	if r.lock.Pods == nil {
		r.lock.Pods = map[string]LockedPod{}
	}
	maps.Copy(r.lock.Pods, r.podLocks)
	for _, s := range r.out.Services {
		if s.Type == model.TypeExternalName || s.Headless {
			continue
		}
		ls := LockedService{ClusterIPs: s.ClusterIPs, HealthCheckNodePort: s.HealthCheckNodePort}
		for _, p := range s.Ports {
			if p.NodePort != 0 {
				if ls.NodePorts == nil {
					ls.NodePorts = map[string]int32{}
				}
				ls.NodePorts[nodePortKey(p)] = p.NodePort
			}
		}
		r.lock.Services[s.Key()] = ls
	}
}
