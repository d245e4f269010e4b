package oracle

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
)

// The steps form of run: the proxier keeps running after its first full sync and is
// fed a sequence of changes, each followed by one sync, as a running kube-proxy is
// between two of its sync loop's runs. It is for measuring kube-proxy's partial syncs
// beside svcgen's (scripts/beside-kube-proxy.sh), so it prints, on stdout, when the
// node was first programmed and how long each sync took:
//
//	programmed 1764293600.123456789 first-sync full 0.512
//	step moved.yaml events 1 sync partial 0.031
//	step resync events 0 sync full 0.498
//
// How a step syncs. kube-proxy's handlers (OnServiceAdd, ...) only record the change
// and call Sync, which asks the sync loop's BoundedFrequencyRunner to run
// syncProxyRules; that runner's Loop is not started here (a request waits in its
// channel, unread), and the step calls OnEndpointSlicesSynced instead, which in the
// iptables and nftables proxiers of v1.34 to v1.37 calls syncProxyRules directly, in
// this goroutine. So each step is exactly one run of the function the loop would run,
// with every change of the step in it (the loop, started, might split a step's events
// over two runs a minSyncPeriod apart), and the step's time is that run's.
//
// Partial or full: syncProxyRules does a full sync when needFullSync is set (only
// before the first successful sync, after a failed one, and on OnTopologyChange or,
// iptables, when ipt.Monitor finds its canary chains gone), or when the last full sync
// is more than proxyutil.FullSyncPeriod (one hour) old; iptables skips the latter in
// large-cluster mode (more than 1,000 endpoints). So a step is partial; the proxier's
// own metrics (sync_full/partial_proxy_rules_duration_seconds) say which ran, and the
// line says it.
//
// "resync" is what v1.37's sync loop does when nothing changes: the runner has no
// periodic run at syncPeriod any more (syncPeriod is only its retry interval after a
// failed sync); it runs syncProxyRules when FullSyncPeriod (one hour) has passed since
// its last run. nftables then does a full sync (its last full sync is an hour old);
// iptables a full one too, except in large-cluster mode, where it is a partial sync
// with nothing to change. (iptables' ipt.Monitor also checks its canary chains every
// syncPeriod, three `iptables -L` calls, and forces a full sync only if they are
// gone.) The step reproduces that: for a full sync it calls OnTopologyChange with the
// node's topology labels as they are, the one handler that sets needFullSync and
// changes nothing else.
//
// The step's time is the wall time of that call; syncProxyRules's own measure
// (sync_proxy_rules_duration_seconds) is the same less the taking of the proxier's
// lock, which nothing else holds here.

// Resync is the step name of the sync loop's periodic run with nothing changed.
const Resync = "resync"

// largeClusterEndpoints is pkg/proxy/iptables' largeClusterEndpointsThreshold: with
// more endpoints than this (summed over service ports), the iptables proxier drops its
// comments and its hourly full syncs.
const largeClusterEndpoints = 1000

// RunSteps runs the first sync as Run does, then each step: a cluster file (the events
// that turn the cluster so far into it, then one sync) or Resync. It prints the
// lines described above on out. iptables and nftables only.
func RunSteps(ctx context.Context, r Release, in Input, steps []string, out io.Writer) error {
	s, err := start(ctx, r, in)
	if err != nil {
		return err
	}
	programmed := time.Now()
	mode := s.params.Config.Mode
	if mode != kubeproxyconfig.ProxyModeIPTables && mode != kubeproxyconfig.ProxyModeNFTables {
		return fmt.Errorf("steps: %s mode works on fakes; steps are for iptables and nftables", mode)
	}
	first, err := syncedSeconds(s.params.Family)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "programmed %d.%09d first-sync full %.6f\n", programmed.Unix(), programmed.Nanosecond(), first)
	for _, step := range steps {
		events, full := 0, false
		if step == Resync {
			full = mode == kubeproxyconfig.ProxyModeNFTables || endpointCount(s.cluster) <= largeClusterEndpoints
		} else {
			next, err := ReadCluster(step)
			if err != nil {
				return err
			}
			if events, err = s.changeTo(next); err != nil {
				return fmt.Errorf("step %s: %w", step, err)
			}
		}
		kind, took, err := s.sync(full)
		if err != nil {
			return fmt.Errorf("step %s: %w", step, err)
		}
		fmt.Fprintf(out, "step %s events %d sync %s %.6f\n", step, events, kind, took.Seconds())
	}
	return nil
}

// sync runs syncProxyRules once (see above) and says whether it was full or partial.
func (s *running) sync(forceFull bool) (kind string, took time.Duration, err error) {
	fam := string(s.params.Family)
	fullBefore, err := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(fam))
	if err != nil {
		return "", 0, err
	}
	partialBefore, err := testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(fam))
	if err != nil {
		return "", 0, err
	}
	before, err := lastSuccess(s.params.Family)
	if err != nil {
		return "", 0, err
	}
	began := time.Now()
	if forceFull {
		s.proxier.OnTopologyChange(s.params.topology)
	}
	s.proxier.OnEndpointSlicesSynced()
	took = time.Since(began)
	fullAfter, _ := testutil.GetHistogramMetricCount(metrics.SyncFullProxyRulesLatency.WithLabelValues(fam))
	partialAfter, _ := testutil.GetHistogramMetricCount(metrics.SyncPartialProxyRulesLatency.WithLabelValues(fam))
	if after, _ := lastSuccess(s.params.Family); after == before {
		return "", 0, fmt.Errorf("the proxier's sync failed (its log above says why)")
	}
	switch {
	case fullAfter == fullBefore+1 && partialAfter == partialBefore:
		return "full", took, nil
	case partialAfter == partialBefore+1 && fullAfter == fullBefore:
		return "partial", took, nil
	}
	return "", 0, fmt.Errorf("expected one sync, the proxier's metrics count %d full and %d partial",
		fullAfter-fullBefore, partialAfter-partialBefore)
}

// lastSuccess is sync_proxy_rules_last_timestamp_seconds, which every proxier sets at
// the end of a successful sync, and only there.
func lastSuccess(family v1.IPFamily) (float64, error) {
	return testutil.GetGaugeMetricValue(metrics.SyncProxyRulesLastTimestamp.WithLabelValues(string(family)))
}

// syncedSeconds is the time the first sync took by the proxier's own measure.
func syncedSeconds(family v1.IPFamily) (float64, error) {
	return testutil.GetHistogramMetricValue(metrics.SyncProxyRulesLatency.WithLabelValues(string(family)))
}

// changeTo feeds the proxier the informer events that turn s.cluster into next (in
// the order of next, then deletions in the order of the old cluster) and makes next
// the cluster. Objects the informers' selectors do not let through are not there for
// the proxier: one that starts or stops passing them comes as an add or a delete, as
// a filtered informer delivers it. Nodes and ServiceCIDRs must stay as they are.
func (s *running) changeTo(next *Cluster) (int, error) {
	if !equality.Semantic.DeepEqual(s.cluster.Nodes, next.Nodes) ||
		!equality.Semantic.DeepEqual(s.cluster.ServiceCIDRs, next.ServiceCIDRs) {
		return 0, fmt.Errorf("the Nodes or ServiceCIDRs changed: steps change Services and EndpointSlices only")
	}
	filter, err := newProxyable()
	if err != nil {
		return 0, err
	}
	p := s.proxier
	events := diffObjects(s.cluster.Services, next.Services, filter.service, p.OnServiceAdd, p.OnServiceUpdate, p.OnServiceDelete)
	events += diffObjects(s.cluster.Slices, next.Slices, filter.slice, p.OnEndpointSliceAdd, p.OnEndpointSliceUpdate, p.OnEndpointSliceDelete)
	s.cluster = next
	return events, nil
}

// object is what diffObjects needs of a Service or an EndpointSlice.
type object interface {
	*v1.Service | *discovery.EndpointSlice
	GetNamespace() string
	GetName() string
}

// diffObjects calls add, update and delete for what differs between old and next
// (by namespace and name, among the objects pass lets through) and counts the calls.
func diffObjects[T object](old, next []T, pass func(T) bool, add func(T), update func(T, T), del func(T)) int {
	key := func(o T) string { return o.GetNamespace() + "/" + o.GetName() }
	was := map[string]T{}
	for _, o := range old {
		if pass(o) {
			was[key(o)] = o
		}
	}
	events := 0
	seen := map[string]bool{}
	for _, o := range next {
		if !pass(o) {
			continue
		}
		k := key(o)
		seen[k] = true
		prev, ok := was[k]
		switch {
		case !ok:
			add(o)
		case !equality.Semantic.DeepEqual(prev, o):
			update(prev, o)
		default:
			continue
		}
		events++
	}
	for _, o := range old {
		if k := key(o); pass(o) && !seen[k] {
			del(o)
			events++
		}
	}
	return events
}

// endpointCount approximates the iptables proxier's count for large-cluster mode (the
// endpoints of each service port, summed): each proxyable slice's endpoints times its
// ports.
func endpointCount(c *Cluster) int {
	filter, err := newProxyable()
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range c.Slices {
		if filter.slice(s) {
			n += len(s.Endpoints) * max(1, len(s.Ports))
		}
	}
	return n
}
