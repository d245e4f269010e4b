package compiler

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
)

func itoa(i int) string { return strconv.Itoa(i) }

// serviceCIDRs are the ranges ClusterIPs come from: the ServiceCIDR objects of the
// input, else the --service-cidr option, else the API server's default.
func (r *resolver) serviceCIDRs() []netip.Prefix {
	var out []netip.Prefix
	for _, sc := range r.out.ServiceCIDRs {
		out = append(out, sc.CIDRs...)
	}
	if len(out) == 0 {
		out = r.opts.ServiceCIDRs
	}
	if len(out) == 0 {
		out = []netip.Prefix{DefaultServiceCIDR}
	}
	return out
}

// allocateClusterIPs gives each Service without a ClusterIP one address per family it
// asks for. Addresses written in the manifests are taken first, then addresses the lock
// remembers (unless another Service now claims them), then new ones.
func (r *resolver) allocateClusterIPs() {
	pools := map[model.IPFamily][]*ipPool{}
	used := map[netip.Addr]string{}
	cidrs := r.serviceCIDRs()
	for _, p := range cidrs {
		f := model.FamilyOf(p.Addr())
		pools[f] = append(pools[f], &ipPool{prefix: p, used: used})
	}
	for _, s := range r.out.Services {
		for i, ip := range s.ClusterIPs {
			if owner, taken := used[ip]; taken {
				r.errs.Add(s.Origin, "spec.clusterIPs["+itoa(i)+"]", "%s is already the ClusterIP of Service %s", ip, owner)
				continue
			}
			used[ip] = s.Key()
		}
	}
	r.reserveAbsent(func(key string, ls LockedService) bool {
		for _, a := range ls.ClusterIPs {
			if owner, taken := used[a]; taken {
				r.warns.Add(model.Origin{File: r.opts.Lock.Name}, fmt.Sprintf("services[%q]", key),
					"%s is now the ClusterIP of Service %s in the manifests; the entry of Service %s (not in the input) is dropped", a, owner, key)
				return false
			}
		}
		for _, a := range ls.ClusterIPs {
			used[a] = key
		}
		return true
	})
	var pending []int
	for i, s := range r.out.Services {
		if s.Type == model.TypeExternalName || s.Headless {
			continue
		}
		if s.IPFamilyPolicy == model.RequireDualStack && len(pools) < 2 {
			r.errs.Add(s.Origin, "spec.ipFamilyPolicy", "RequireDualStack, and the cluster has service CIDRs of %s only (%s); give the other family one (a ServiceCIDR, or --service-cidr)",
				model.FamilyOf(cidrs[0].Addr()), joinPrefixes(cidrs))
			continue
		}
		if r.reuseLockedIPs(i, used, pools) {
			pending = append(pending, i)
		}
	}
	defaultFamily := model.FamilyOf(cidrs[0].Addr())
	for _, i := range pending {
		for _, f := range wantedFamilies(r.out.Services[i], defaultFamily, pools) {
			if hasFamily(r.out.Services[i].ClusterIPs, f) {
				continue
			}
			r.allocateIn(i, f, pools[f], used)
		}
	}
}

func (r *resolver) allocateIn(i int, f model.IPFamily, pools []*ipPool, used map[netip.Addr]string) {
	s := r.out.Services[i]
	for _, p := range pools {
		if a, ok := p.allocate(s.Key()); ok {
			used[a] = s.Key()
			s = r.own(i)
			s.ClusterIPs = append(s.ClusterIPs, a)
			return
		}
	}
	if len(pools) == 0 {
		r.errs.Add(s.Origin, "spec.ipFamilies", "no %s service CIDR to allocate a ClusterIP from (see --service-cidr)", f)
		return
	}
	r.errs.Add(s.Origin, "spec.clusterIP", "no free %s address left in the service CIDRs", f)
}

// reuseLockedIPs gives a Service that has no ClusterIP of its own the lock's
// addresses, when nobody else holds them. The allocation after it adds a family the
// Service now wants and the lock lacks (a PreferDualStack Service in a cluster that
// gained a second family's ServiceCIDR). False: the lock's entry is wrong (reported).
func (r *resolver) reuseLockedIPs(i int, used map[netip.Addr]string, pools map[model.IPFamily][]*ipPool) bool {
	s := r.out.Services[i]
	if len(s.ClusterIPs) > 0 || r.opts.Lock == nil {
		return true
	}
	locked := r.opts.Lock.Services[s.Key()].ClusterIPs
	if len(locked) == 0 {
		return true
	}
	wanted := wantedFamilies(s, model.FamilyOf(locked[0]), pools)
	for i, a := range locked {
		if f := model.FamilyOf(a); !slices.Contains(wanted, f) {
			r.errs.Add(model.Origin{File: r.opts.Lock.Name}, fmt.Sprintf("services[%q].clusterIPs[%d]", s.Key(), i),
				"%s is an %s address, and Service %s asks for %s (edit or delete the entry)", a, f, s.Key(), joinFamilies(wanted))
			return false
		}
	}
	for _, a := range locked {
		if _, taken := used[a]; taken {
			return true
		}
	}
	for _, a := range locked {
		used[a] = s.Key()
	}
	s = r.own(i)
	s.ClusterIPs = append(s.ClusterIPs, locked...)
	return true
}

// wantedFamilies are the families a Service has ClusterIPs of, as the API server
// settles them (registry/core/service/storage initIPFamilyFields): spec.ipFamilies,
// then the families of spec.clusterIPs, else the cluster's default family (def: the
// first service CIDR's); a PreferDualStack or RequireDualStack Service of one family
// gets the other too when the cluster has a service CIDR of it.
func wantedFamilies(s *model.Service, def model.IPFamily, pools map[model.IPFamily][]*ipPool) []model.IPFamily {
	fs := slices.Clone(s.IPFamilies)
	for i, a := range s.ClusterIPs {
		if i >= len(fs) {
			fs = append(fs, model.FamilyOf(a))
		}
	}
	if len(fs) == 0 {
		fs = []model.IPFamily{def}
	}
	if len(fs) == 1 && (s.IPFamilyPolicy == model.PreferDualStack || s.IPFamilyPolicy == model.RequireDualStack) {
		other := model.IPv6
		if fs[0] == model.IPv6 {
			other = model.IPv4
		}
		if len(pools[other]) > 0 {
			fs = append(fs, other)
		}
	}
	return fs
}

func hasFamily(ips []netip.Addr, f model.IPFamily) bool {
	for _, a := range ips {
		if model.FamilyOf(a) == f {
			return true
		}
	}
	return false
}

// needsNodePort says whether the API server would allocate a node port for a port.
func needsNodePort(s *model.Service) bool {
	switch s.Type {
	case model.TypeNodePort:
		return true
	case model.TypeLoadBalancer:
		return s.AllocateLoadBalancerNodePorts == nil || *s.AllocateLoadBalancerNodePorts
	}
	return false
}

// allocateNodePorts gives node ports to NodePort and LoadBalancer ports without one,
// and a health-check node port to LoadBalancer Services with externalTrafficPolicy
// Local. One Service may use one node port for several protocols; two Services never
// share one.
func (r *resolver) allocateNodePorts() {
	pool := &portPool{r: r.opts.NodePortRange, used: map[int32]string{}}
	claim := func(s *model.Service, field string, port int32) {
		if owner, taken := pool.used[port]; taken && owner != s.Key() {
			r.errs.Add(s.Origin, field, "node port %d is already used by Service %s", port, owner)
			return
		}
		pool.used[port] = s.Key()
	}
	for _, s := range r.out.Services {
		if !proxiedForAllocation(s) {
			continue
		}
		for i, p := range s.Ports {
			if p.NodePort != 0 {
				claim(s, "spec.ports["+itoa(i)+"].nodePort", p.NodePort)
			}
		}
		if s.HealthCheckNodePort != 0 {
			claim(s, "spec.healthCheckNodePort", s.HealthCheckNodePort)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(r.absent)) {
		ls := r.absent[key]
		ports := slices.Sorted(maps.Values(ls.NodePorts))
		if ls.HealthCheckNodePort != 0 {
			ports = append(ports, ls.HealthCheckNodePort)
		}
		if i := slices.IndexFunc(ports, func(p int32) bool { _, taken := pool.used[p]; return taken }); i >= 0 {
			r.warns.Add(model.Origin{File: r.opts.Lock.Name}, fmt.Sprintf("services[%q]", key),
				"node port %d is now used by Service %s in the manifests; the entry of Service %s (not in the input) is dropped", ports[i], pool.used[ports[i]], key)
			delete(r.absent, key)
			continue
		}
		for _, p := range ports {
			pool.used[p] = key
		}
	}
	for i, s := range r.out.Services {
		if proxiedForAllocation(s) {
			r.lockedOrNewNodePorts(i, pool)
		}
	}
}

// reserveAbsent keeps the lock's entries of Services that are not in the input: runs
// over parts of one cluster with one lock (or two runs at once) keep each other's
// allocations, and their addresses are not handed to another Service. keep decides
// for each entry (in key order) whether it stays reserved.
func (r *resolver) reserveAbsent(keep func(key string, ls LockedService) bool) {
	if r.opts.Lock == nil {
		return
	}
	present := map[string]bool{}
	for _, s := range r.out.Services {
		present[s.Key()] = true
	}
	r.absent = map[string]LockedService{}
	for _, key := range slices.Sorted(maps.Keys(r.opts.Lock.Services)) {
		if ls := r.opts.Lock.Services[key]; !present[key] && keep(key, ls) {
			r.absent[key] = ls
		}
	}
}

func proxiedForAllocation(s *model.Service) bool {
	return s.Type != model.TypeExternalName && !s.Headless
}

func (r *resolver) lockedOrNewNodePorts(index int, pool *portPool) {
	s := r.out.Services[index]
	var locked LockedService
	if r.opts.Lock != nil {
		locked = r.opts.Lock.Services[s.Key()]
	}
	take := func(lockedPort int32, key string) int32 {
		if lockedPort != 0 && pool.r.contains(lockedPort) {
			if _, taken := pool.used[lockedPort]; !taken {
				pool.used[lockedPort] = s.Key()
				return lockedPort
			}
		}
		port, ok := pool.allocate(key)
		if !ok {
			r.errs.Add(s.Origin, "spec.ports", "no free node port left in %s", pool.r)
			return 0
		}
		pool.used[port] = s.Key()
		return port
	}
	if needsNodePort(s) {
		for i := range s.Ports {
			if s.Ports[i].NodePort == 0 {
				s = r.own(index)
				p := &s.Ports[i]
				p.NodePort = take(locked.NodePorts[nodePortKey(*p)], s.Key()+":"+nodePortKey(*p))
			}
		}
	}
	if s.Type == model.TypeLoadBalancer && s.ExternalTrafficPolicy == model.PolicyLocal && s.HealthCheckNodePort == 0 {
		port := take(locked.HealthCheckNodePort, s.Key()+":healthcheck")
		s = r.own(index)
		s.HealthCheckNodePort = port
	}
}

func joinFamilies(fs []model.IPFamily) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, " and ")
}
