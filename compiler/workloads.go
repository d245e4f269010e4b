package compiler

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
)

// Workloads become Pods, as their controllers, the scheduler, node IPAM and the
// kubelet would make them, deterministically:
//
//   - how many: spec.replicas (1 when absent); a Job's parallelism capped by its
//     completions; a DaemonSet one per eligible Node; a CronJob none (its Pods run
//     only while a scheduled run lasts). A ReplicaSet whose controller is a
//     Deployment of the input is that Deployment's and makes no Pod of its own. A
//     workload with Pods in the input (its own by owner reference, or, without
//     one, matching its selector) makes none: the input's Pods are its Pods.
//   - names: a StatefulSet's Pods are <name>-<ordinal> (from spec.ordinals.start);
//     a Deployment's are <name>-<pod-template-hash>-<suffix>, the others'
//     <name>-<suffix>. The controllers take the suffix at random (five characters of
//     the API server's alphabet "bcdfghjklmnpqrstvwxz2456789"); svcgen takes the
//     same alphabet from a hash of the workload and the replica's index, so names
//     stay the same from run to run. The pod-template-hash is the Deployment
//     controller's encoding (SafeEncodeString of a decimal FNV-32a) of a hash of the
//     template as svcgen reads it (labels, ports, placement), not of the whole
//     template: it changes when what shapes the rules changes, not with an image.
//   - labels: the template's, with what the controllers add (pod-template-hash,
//     statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index,
//     batch.kubernetes.io/job-name); ports: the template's containers'; Running and
//     Ready once placed and addressed.
//   - placement: spec.nodeName; else the Nodes that are schedulable (not
//     spec.unschedulable, every NoSchedule and NoExecute taint tolerated; a
//     DaemonSet ignores unschedulable, as its controller's tolerations do) and match
//     nodeSelector and the required node affinity, in name order: replica k goes to
//     the (k mod n)-th. A Pod no Node fits is Pending, without an address.
//   - addresses: hostNetwork Pods take the Node's InternalIP; others one address per
//     family of the Node's spec.podCIDRs (a Node without them gets the next /24 (or
//     /64) of --pod-cidr, 10.244.0.0/16 by default, in name order, as
//     kube-controller-manager's node IPAM hands them out), from a hash of the Pod's
//     name probing forward, as ClusterIPs are, never the network, gateway (.1) or
//     broadcast address; --lock keeps them.

// DefaultPodCIDR is the cluster CIDR svcgen gives Nodes pod CIDRs from (kubeadm's and
// flannel's 10.244.0.0/16), a /24 (or an IPv6 /64) each.
var DefaultPodCIDR = netip.MustParsePrefix("10.244.0.0/16")

// Made Nodes (--nodes N): node-1 ... node-N, InternalIP 172.18.0.2 ... (kind's node
// network), and fc00:f853:ccd:e793::2 ... when a pod CIDR is IPv6; zones zone-a,
// zone-b, zone-c in turn.
var (
	madeNodeIPv4 = netip.MustParseAddr("172.18.0.1")
	madeNodeIPv6 = netip.MustParseAddr("fc00:f853:ccd:e793::1")
	madeZones    = []string{"zone-a", "zone-b", "zone-c"}
)

// MaxMadeNodes bounds --nodes.
const MaxMadeNodes = 5000

// podSuffixAlphabet is the API server's alphabet for generated names
// (k8s.io/apimachinery/pkg/util/rand): no vowels, no 0, 1, 3.
const podSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// placeNode is a Node as the workloads see it: where Pods go and the pool their
// addresses come from.
type placeNode struct {
	node  *model.Node
	cidrs []netip.Prefix
	pods  int // placed so far, for the error of a full pod CIDR
}

// makeNodes makes --nodes N Nodes when the input has none.
func (r *resolver) makeNodes() {
	if len(r.out.Nodes) > 0 || r.opts.Nodes == 0 {
		return
	}
	cidrs := r.podCIDRs()
	for i := range r.opts.Nodes {
		n := &model.Node{
			Origin: model.Origin{File: "--nodes", Kind: "Node"},
			Name:   "node-" + strconv.Itoa(i+1),
			Made:   true,
		}
		n.Origin.Name = n.Name
		n.Labels = map[string]string{
			model.LabelHostname: n.Name, model.LabelZone: madeZones[i%len(madeZones)], "kubernetes.io/os": "linux",
		}
		n.Addresses = []model.NodeAddress{{Type: "InternalIP", Address: addOffset(madeNodeIPv4, uint64(i+1))}}
		if slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
			n.Addresses = append(n.Addresses, model.NodeAddress{Type: "InternalIP", Address: addOffset(madeNodeIPv6, uint64(i+1))})
		}
		r.out.Nodes = append(r.out.Nodes, n)
	}
	// Their pod CIDRs, in name order (node-10 before node-2: as node IPAM would, in
	// the order of the list, which is the names').
	slices.SortStableFunc(r.out.Nodes, func(a, b *model.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, pn := range r.placeNodes() {
		pn.node.PodCIDRs = pn.cidrs
	}
}

// podCIDRs are the cluster CIDRs Nodes get pod CIDRs from: --pod-cidr, else the
// default.
func (r *resolver) podCIDRs() []netip.Prefix {
	if len(r.opts.PodCIDRs) > 0 {
		return r.opts.PodCIDRs
	}
	return []netip.Prefix{DefaultPodCIDR}
}

// placeNodes are the Nodes Pods go to, in name order, each with its pod CIDRs: its
// own, else the next free subnet of the cluster CIDRs. An input without Nodes has
// one, the node the rules are for (ResolveOptions.Node), not written to the output.
func (r *resolver) placeNodes() []*placeNode {
	nodes := r.out.Nodes
	if len(nodes) == 0 {
		nodes = []*model.Node{{Name: r.opts.Node}}
	}
	taken := map[netip.Prefix]bool{}
	for _, n := range nodes {
		for _, p := range n.PodCIDRs {
			taken[p] = true
		}
	}
	next := map[netip.Prefix]uint64{}
	var out []*placeNode
	for _, n := range nodes {
		pn := &placeNode{node: n, cidrs: n.PodCIDRs}
		if len(pn.cidrs) == 0 {
			for _, cluster := range r.podCIDRs() {
				if p, ok := nextSubnet(cluster, &next, taken); ok {
					pn.cidrs = append(pn.cidrs, p)
				}
			}
		}
		out = append(out, pn)
	}
	return out
}

// nextSubnet hands out the subnets of a cluster CIDR in order: /24 of IPv4, /64 of
// IPv6 (kube-controller-manager's --node-cidr-mask-size defaults), the whole CIDR
// when it is smaller; false when none is left.
func nextSubnet(cluster netip.Prefix, next *map[netip.Prefix]uint64, taken map[netip.Prefix]bool) (netip.Prefix, bool) {
	bits := 24
	if cluster.Addr().Is6() {
		bits = 64
	}
	bits = max(bits, cluster.Bits())
	count := uint64(1) << min(bits-cluster.Bits(), 32)
	for i := (*next)[cluster]; i < count; i++ {
		p := netip.PrefixFrom(subnetAt(cluster, bits, i), bits)
		if !taken[p] {
			(*next)[cluster] = i + 1
			taken[p] = true
			return p, true
		}
	}
	(*next)[cluster] = count
	return netip.Prefix{}, false
}

// subnetAt is the i-th subnet of size bits in cluster.
func subnetAt(cluster netip.Prefix, bits int, i uint64) netip.Addr {
	host := cluster.Addr().BitLen() - bits
	if cluster.Addr().Is6() && host >= 64 {
		b := cluster.Masked().Addr().As16()
		// host >= 64: the index lands in the upper half.
		hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
		hi += i << (host - 64)
		for k := range 8 {
			b[k] = byte(hi >> (56 - 8*k))
		}
		return netip.AddrFrom16(b)
	}
	return addOffset(cluster.Masked().Addr(), i<<host)
}

// makePods makes the Pods of every workload and gives them addresses.
func (r *resolver) makePods() {
	if len(r.out.Workloads) == 0 {
		return
	}
	nodes := r.placeNodes()
	byName := map[string]*placeNode{}
	for _, pn := range nodes {
		byName[pn.node.Name] = pn
	}
	deployments := map[string]bool{}
	for _, w := range r.out.Workloads {
		if w.Kind == model.KindDeployment {
			deployments[w.Namespace+"/"+w.Name] = true
		}
	}
	r.made = map[string]int{}
	var made []placedPod
	for _, w := range r.out.Workloads {
		r.checkServiceName(w)
		if w.Kind == model.KindReplicaSet && w.Owner.Kind == model.KindDeployment && deployments[w.Namespace+"/"+w.Owner.Name] {
			continue // the Deployment's, counted there
		}
		if w.Kind == model.KindCronJob || r.hasInputPods(w) {
			r.made[w.Kind] += 0
			continue
		}
		pods := r.podsOf(w, nodes, byName)
		made = append(made, pods...)
		r.made[w.Kind] += len(pods)
	}
	slices.SortStableFunc(made, func(a, b placedPod) int { return byKey(a.pod.Namespace, a.pod.Name, b.pod.Namespace, b.pod.Name) })
	r.addressPods(made)
	names := map[string]bool{}
	for _, p := range r.out.Pods {
		names[p.Namespace+"/"+p.Name] = true
	}
	for _, p := range made {
		if key := p.pod.Namespace + "/" + p.pod.Name; names[key] {
			r.errs.Add(p.w.Origin, "metadata.name", "the %s's Pod %s has the name of a Pod of the input; rename one", p.w.Kind, key)
		}
		r.out.Pods = append(r.out.Pods, p.pod)
	}
	slices.SortStableFunc(r.out.Pods, func(a, b *model.Pod) int { return byKey(a.Namespace, a.Name, b.Namespace, b.Name) })
}

// addressPods gives the Pods made addresses: a hostNetwork Pod its Node's, others
// what the lock remembers where it is still inside the Node's pod CIDR and free,
// else a new one of each pod CIDR, from a hash of the Pod's name. A Pod with an
// address is Running and Ready.
func (r *resolver) addressPods(made []placedPod) {
	used := map[netip.Addr]string{}
	for _, p := range r.out.Pods {
		for _, a := range p.PodIPs {
			used[a] = p.Namespace + "/" + p.Name
		}
	}
	r.reserveAbsentPods(made, used)
	var fresh []placedPod
	for _, p := range made {
		switch {
		case p.node == nil:
		case p.w.Template.HostNetwork:
			for _, f := range []model.IPFamily{model.IPv4, model.IPv6} {
				if a := nodeIP(p.node.node, f); a.IsValid() {
					p.pod.PodIPs = append(p.pod.PodIPs, a)
				}
			}
			if len(p.pod.PodIPs) == 0 {
				p.pod.Pending = "hostNetwork, and " + nodeLabel(p.node.node) + " has no InternalIP (give the input Nodes, or --nodes N)"
			}
		case !r.reuseLockedPod(p, used):
			fresh = append(fresh, p)
		}
	}
	for _, p := range fresh {
		key := p.pod.Namespace + "/" + p.pod.Name
		if len(p.node.cidrs) == 0 {
			r.errs.Add(p.w.Origin, replicasField(p.w), "%s has no pod CIDR for Pod %s: the cluster CIDR %s has no subnet left for it (see --pod-cidr)",
				nodeLabel(p.node.node), key, joinPrefixes(r.podCIDRs()))
			continue
		}
		for _, c := range p.node.cidrs {
			a, ok := (&ipPool{prefix: c, used: used}).allocate(key)
			if !ok {
				r.errs.Add(p.w.Origin, replicasField(p.w), "pod CIDR %s of %s has no free address left for Pod %s (%d Pods placed there; give it a larger pod CIDR, see --pod-cidr)",
					c, nodeLabel(p.node.node), key, p.node.pods)
				continue
			}
			used[a] = key
			p.pod.PodIPs = append(p.pod.PodIPs, a)
		}
	}
	r.podLocks = map[string]LockedPod{}
	for _, p := range made {
		if len(p.pod.PodIPs) == 0 {
			continue
		}
		p.pod.Phase, p.pod.Ready = "Running", true
		if !p.w.Template.HostNetwork {
			r.podLocks[p.pod.Namespace+"/"+p.pod.Name] = LockedPod{Owner: p.w.Key(), PodIPs: p.pod.PodIPs}
		}
	}
}

// replicasField is the field that says how many Pods a workload has.
func replicasField(w *model.Workload) string {
	switch w.Kind {
	case model.KindDaemonSet:
		return "spec.template.spec"
	case model.KindJob:
		return "spec.parallelism"
	}
	return "spec.replicas"
}

// nodeIP is a Node's first InternalIP of a family (what a hostNetwork Pod's podIPs
// are); invalid when it has none.
func nodeIP(n *model.Node, f model.IPFamily) netip.Addr {
	for _, a := range n.Addresses {
		if a.Type == "InternalIP" && model.FamilyOf(a.Address) == f {
			return a.Address
		}
	}
	return netip.Addr{}
}

// reserveAbsentPods keeps the lock's entries of Pods of workloads not in the input
// (a run over part of a cluster), their addresses reserved; entries of workloads in
// the input that no longer make the Pod are dropped.
func (r *resolver) reserveAbsentPods(made []placedPod, used map[netip.Addr]string) {
	if r.opts.Lock == nil {
		return
	}
	present := map[string]bool{}
	for _, w := range r.out.Workloads {
		present[w.Key()] = true
	}
	for _, p := range made {
		present["pod "+p.pod.Namespace+"/"+p.pod.Name] = true
	}
	r.absentPods = map[string]LockedPod{}
	for _, key := range slices.Sorted(maps.Keys(r.opts.Lock.Pods)) {
		lp := r.opts.Lock.Pods[key]
		if present[lp.Owner] || present["pod "+key] || slices.ContainsFunc(lp.PodIPs, func(a netip.Addr) bool { _, taken := used[a]; return taken }) {
			continue
		}
		for _, a := range lp.PodIPs {
			used[a] = key
		}
		r.absentPods[key] = lp
	}
}

// reuseLockedPod gives a Pod the addresses the lock remembers for it, when each is
// still inside one of its Node's pod CIDRs and free.
func (r *resolver) reuseLockedPod(p placedPod, used map[netip.Addr]string) bool {
	if r.opts.Lock == nil {
		return false
	}
	key := p.pod.Namespace + "/" + p.pod.Name
	locked := r.opts.Lock.Pods[key].PodIPs
	if len(locked) != len(p.node.cidrs) {
		return false
	}
	for _, a := range locked {
		_, taken := used[a]
		if taken || !slices.ContainsFunc(p.node.cidrs, func(c netip.Prefix) bool { return c.Contains(a) }) {
			return false
		}
	}
	for _, a := range locked {
		used[a] = key
	}
	p.pod.PodIPs = slices.Clone(locked)
	return true
}

// checkServiceName warns about a StatefulSet whose serviceName names no headless
// Service: its Pods get no DNS names.
func (r *resolver) checkServiceName(w *model.Workload) {
	if w.Kind != model.KindStatefulSet || w.ServiceName == "" {
		return
	}
	for _, s := range r.out.Services {
		if s.Namespace == w.Namespace && s.Name == w.ServiceName {
			if !s.Headless {
				r.warns.Add(w.Origin, "spec.serviceName", "Service %s/%s is not headless (clusterIP: None), so the Pods get no stable DNS names", s.Namespace, s.Name)
			}
			return
		}
	}
	r.warns.Add(w.Origin, "spec.serviceName", "no headless Service %s/%s in the input, so the Pods get no stable DNS names", w.Namespace, w.ServiceName)
}

// hasInputPods reports whether the input has Pods of the workload: Pods whose
// controller it is (for a Deployment, through a ReplicaSet named after it), or Pods
// without a controller that its selector matches (which it would adopt).
func (r *resolver) hasInputPods(w *model.Workload) bool {
	for _, p := range r.out.Pods {
		if p.Namespace != w.Namespace || p.MadeBy != "" {
			continue
		}
		switch o := p.Owner; {
		case o.Kind == w.Kind && o.Name == w.Name:
			return true
		case w.Kind == model.KindDeployment && o.Kind == model.KindReplicaSet:
			if hash, ok := strings.CutPrefix(o.Name, w.Name+"-"); ok && !strings.Contains(hash, "-") {
				return true
			}
		case o.IsZero() && w.Selector.Matches(p.Labels):
			return true
		}
	}
	return false
}

// placedPod is a Pod made from workload w, and its Node (nil: Pending).
type placedPod struct {
	pod  *model.Pod
	node *placeNode
	w    *model.Workload
}

// podsOf makes a workload's Pods and places them.
func (r *resolver) podsOf(w *model.Workload, nodes []*placeNode, byName map[string]*placeNode) []placedPod {
	eligible := r.eligible(w, nodes, byName)
	var out []placedPod
	newPod := func(name string, pn *placeNode, extra map[string]string) {
		p := &model.Pod{
			Origin: w.Origin, Namespace: w.Namespace, Name: name, Phase: "Pending",
			Labels: maps.Clone(w.Template.Labels), Ports: w.Template.Ports, Hostname: w.Template.Hostname,
			Owner: model.OwnerRef{Kind: w.Kind, Name: w.Name}, MadeBy: w.Key(),
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		maps.Copy(p.Labels, extra)
		switch {
		case pn != nil:
			p.NodeName = pn.node.Name
		case w.Template.NodeName != "":
			p.NodeName = w.Template.NodeName // bound to a Node that does not exist
			p.Pending = "Pending: spec.nodeName names no Node of the input"
		default:
			p.Pending = "Pending: no Node fits its placement (nodeSelector, node affinity, taints)"
		}
		if pn != nil {
			pn.pods++
		}
		out = append(out, placedPod{pod: p, node: pn, w: w})
	}
	at := func(k int) *placeNode {
		if len(eligible) == 0 {
			return nil
		}
		return eligible[k%len(eligible)]
	}
	switch w.Kind {
	case model.KindDaemonSet:
		for _, pn := range eligible {
			newPod(w.Name+"-"+suffix(w.Key()+"/"+pn.node.Name), pn, nil)
		}
	case model.KindStatefulSet:
		for k := range int(w.Replicas) {
			ordinal := strconv.Itoa(int(w.OrdinalsStart) + k)
			name := w.Name + "-" + ordinal
			newPod(name, at(k), map[string]string{model.LabelStatefulSetPodName: name, model.LabelPodIndex: ordinal})
			out[len(out)-1].pod.Hostname = name
		}
	case model.KindDeployment:
		hash := templateHash(w.Template)
		rs := w.Name + "-" + hash
		for k := range int(w.Replicas) {
			newPod(rs+"-"+suffix(w.Key()+"/"+hash+"/"+strconv.Itoa(k)), at(k), map[string]string{model.LabelPodTemplateHash: hash})
			out[len(out)-1].pod.Owner = model.OwnerRef{Kind: model.KindReplicaSet, Name: rs}
		}
	case model.KindJob:
		for k := range int(w.Replicas) {
			newPod(w.Name+"-"+suffix(w.Key()+"/"+strconv.Itoa(k)), at(k), map[string]string{model.LabelJobName: w.Name, "job-name": w.Name})
		}
	default: // ReplicaSet, ReplicationController
		for k := range int(w.Replicas) {
			newPod(w.Name+"-"+suffix(w.Key()+"/"+strconv.Itoa(k)), at(k), nil)
		}
	}
	if len(eligible) == 0 && len(out) > 0 || w.Kind == model.KindDaemonSet && len(eligible) == 0 {
		r.warns.Add(w.Origin, "spec.template.spec", "no Node fits the %s's Pods (nodeName, nodeSelector, node affinity, taints), so they stay Pending, without an address", w.Kind)
	}
	return out
}

// eligible are the Nodes a workload's Pods may go to, in name order.
func (r *resolver) eligible(w *model.Workload, nodes []*placeNode, byName map[string]*placeNode) []*placeNode {
	t := w.Template
	if t.NodeName != "" {
		if pn := byName[t.NodeName]; pn != nil {
			return []*placeNode{pn}
		}
		return nil
	}
	var out []*placeNode
	for _, pn := range nodes {
		n := pn.node
		if n.Unschedulable && w.Kind != model.KindDaemonSet {
			continue
		}
		if !tolerates(t.Tolerations, n.Taints) {
			continue
		}
		if !(model.LabelSelector{MatchLabels: t.NodeSelector}).Matches(n.Labels) {
			continue
		}
		if t.NodeAffinity != nil && !slices.ContainsFunc(t.NodeAffinity, func(term model.NodeSelectorTerm) bool { return term.Matches(n) }) {
			continue
		}
		out = append(out, pn)
	}
	return out
}

// tolerates reports whether tolerations tolerate every taint that keeps Pods off a
// Node (NoSchedule, NoExecute).
func tolerates(tolerations []model.Toleration, taints []model.Taint) bool {
	for _, taint := range taints {
		if taint.Effect != "NoSchedule" && taint.Effect != "NoExecute" {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(t model.Toleration) bool { return t.Tolerates(taint) }) {
			return false
		}
	}
	return true
}

// suffix is five characters of the API server's alphabet, from a hash of key.
func suffix(key string) string {
	h := hash64(key)
	b := make([]byte, 5)
	for i := range b {
		b[i] = podSuffixAlphabet[h%uint64(len(podSuffixAlphabet))]
		h /= uint64(len(podSuffixAlphabet))
	}
	return string(b)
}

// templateHash is a Deployment's pod-template-hash, encoded as the controller
// encodes it (rand.SafeEncodeString of the decimal FNV-32a), of the template as svcgen
// reads it; %v prints maps sorted, so the text is one for one template.
func templateHash(t model.PodTemplate) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%+v", t)
	dec := strconv.FormatUint(uint64(h.Sum32()), 10)
	b := make([]byte, len(dec))
	for i := range dec {
		b[i] = podSuffixAlphabet[int(dec[i])%len(podSuffixAlphabet)]
	}
	return string(b)
}

// nodeLabel names a Node in messages; the one node of an input without Nodes is
// "the node".
func nodeLabel(n *model.Node) string {
	if n.Name == "" {
		return "the node"
	}
	return "Node " + n.Name
}
