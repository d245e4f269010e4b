package oracle

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/testutil"
	sysctl "k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// Input is one run: the cluster and configuration files, the node the rules are for
// (the configuration's hostnameOverride wins, as in kube-proxy, where the fallback is
// the host's name), the IP families the host supports (what platformCheckSupported
// finds: Family alone, or both with DualStack, and then the node's IPs decide the
// primary family), and for ipvs mode the folder its state goes to.
type Input struct {
	Cluster, Config string
	Node            string
	Family          v1.IPFamily
	DualStack       bool
	OutDir          string
}

// Run builds the release's proxier from the configuration as cmd/kube-proxy does,
// feeds it the cluster as its informers would, and returns once its first full sync
// has succeeded. iptables and nftables program the network namespace the process
// runs in; ipvs mode works on upstream's fakes and writes their state to in.OutDir.
func Run(ctx context.Context, r Release, in Input) error {
	_, err := start(ctx, r, in)
	return err
}

// running is a proxier after its first full sync, with what it was fed: what
// RunSteps feeds on from (steps.go).
type running struct {
	proxier proxy.Provider
	cluster *Cluster
	params  *Params
}

// start is Run, keeping the proxier.
func start(ctx context.Context, r Release, in Input) (*running, error) {
	cfg, err := LoadConfig(in.Config)
	if err != nil {
		return nil, err
	}
	if err := gatesSet(cfg); err != nil {
		return nil, err
	}
	cluster, err := ReadCluster(in.Cluster)
	if err != nil {
		return nil, err
	}
	metrics.RegisterMetrics(cfg.Mode)
	p, err := params(r, cfg, cluster, in)
	if err != nil {
		return nil, err
	}
	var fakes *ipvsFakes
	if cfg.Mode == kubeproxyconfig.ProxyModeIPVS {
		if fakes, err = newIPVSFakes(r, p); err != nil {
			return nil, err
		}
	}
	proxier, err := r.NewProxier(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s NewProxier: %w", cfg.Mode, err)
	}
	if fakes != nil {
		if err := fakes.inject(proxier); err != nil {
			return nil, err
		}
	}
	if err := feed(proxier, cluster, p); err != nil {
		return nil, err
	}
	if err := synced(ctx, p); err != nil {
		return nil, err
	}
	if fakes != nil {
		if err := fakes.write(in.OutDir); err != nil {
			return nil, err
		}
	}
	return &running{proxier: proxier, cluster: cluster, params: p}, nil
}

// synced checks that every family's proxier has done its sync and, in iptables
// mode, made its canary chains.
func synced(ctx context.Context, p *Params) error {
	for _, family := range p.Families() {
		if err := firstSyncDone(family); err != nil {
			return err
		}
		if p.Config.Mode == kubeproxyconfig.ProxyModeIPTables {
			if err := canariesMade(ctx, p.IPTables[family]); err != nil {
				return err
			}
		}
	}
	return nil
}

// gatesSet checks that the configuration's featureGates are what the proxiers will
// read: kube-proxy's Complete sets them on utilfeature.DefaultMutableFeatureGate
// (LoadConfig runs it); every gate not named keeps the release's default.
func gatesSet(cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	for name, want := range cfg.FeatureGates {
		if got := utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(name)); got != want {
			return fmt.Errorf("feature gate %s is %v, but the configuration says %v", name, got, want)
		}
	}
	return nil
}

// params gathers NewProxier's arguments as cmd/kube-proxy's newProxyServer and
// createProxier do.
func params(r Release, cfg *kubeproxyconfig.KubeProxyConfiguration, c *Cluster, in Input) (*Params, error) {
	name := cfg.HostnameOverride
	if name == "" {
		name = in.Node
	}
	nv, err := findNode(c, name, cfg)
	if err != nil {
		return nil, err
	}
	primary, ips := nodeIPs(nv.rawIPs, cfg.BindAddress)
	cfg.NodePortAddresses = r.NodePortAddresses(cfg.NodePortAddresses, ips)
	p := &Params{
		Config:         cfg,
		Family:         in.Family,
		DualStack:      in.DualStack,
		NodeName:       name,
		NodeIPs:        ips,
		LocalDetectors: localDetectors(cfg, nv.podCIDRs),
		Recorder:       &events.FakeRecorder{},
		topology:       nv.topology,
	}
	if in.DualStack {
		p.Family = primary
	}
	if cfg.Mode == kubeproxyconfig.ProxyModeIPTables {
		p.IPTables = map[v1.IPFamily]utiliptables.Interface{}
		for _, family := range p.Families() {
			p.IPTables[family] = utiliptables.New(protocolOf(family))
		}
		p.Sysctl = sysctl.New()
	}
	return p, nil
}

func protocolOf(family v1.IPFamily) utiliptables.Protocol {
	if family == v1.IPv6Protocol {
		return utiliptables.ProtocolIPv6
	}
	return utiliptables.ProtocolIPv4
}

// feed calls the proxier's handlers as kube-proxy's informers and config handlers
// call them at start: the node's topology labels (NodeTopologyConfig, only when
// they differ from none), every ServiceCIDR's CIDRs (ServiceCIDRConfig, when
// MultiCIDRServiceAllocator is on), each Service and EndpointSlice the informers'
// selectors let through, then "synced" for both. The last of those runs the first
// full sync in this goroutine (OnServiceSynced and OnEndpointSlicesSynced sync
// unconditionally), so the rules are in place when feed returns; the sync loop
// would only repeat it.
func feed(p proxy.Provider, c *Cluster, params *Params) error {
	filter, err := newProxyable()
	if err != nil {
		return err
	}
	if len(params.topology) > 0 {
		p.OnTopologyChange(params.topology)
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		cidrs := sets.New[string]()
		for _, sc := range c.ServiceCIDRs {
			cidrs.Insert(sc.Spec.CIDRs...)
		}
		p.OnServiceCIDRsChanged(cidrs.UnsortedList())
	}
	for _, s := range c.Services {
		if filter.service(s) {
			p.OnServiceAdd(s)
		}
	}
	for _, s := range c.Slices {
		if filter.slice(s) {
			p.OnEndpointSliceAdd(s)
		}
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	return nil
}

// firstSyncDone checks that the sync feed ran succeeded: every proxier sets
// sync_proxy_rules_last_timestamp_seconds for its family at the end of a
// successful sync, and only there.
func firstSyncDone(family v1.IPFamily) error {
	v, err := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesLastTimestamp.WithLabelValues(string(family)))
	if err != nil {
		return fmt.Errorf("reading the sync metric: %w", err)
	}
	if v <= 0 {
		return fmt.Errorf("the proxier's first full sync failed (its log above says why)")
	}
	return nil
}

// kubeProxyCanaryChain is the canary the iptables proxier's ipt.Monitor creates in
// mangle, nat and filter (kubeProxyCanaryChain in pkg/proxy/iptables).
const kubeProxyCanaryChain utiliptables.Chain = "KUBE-PROXY-CANARY"

// canariesMade waits for the goroutine NewProxier starts (ipt.Monitor) to have made
// its canary chains, which is part of what a running kube-proxy leaves.
func canariesMade(ctx context.Context, ipt utiliptables.Interface) error {
	tables := []utiliptables.Table{utiliptables.TableMangle, utiliptables.TableNAT, utiliptables.TableFilter}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, t := range tables {
			if ok, _ := ipt.ChainExists(t, kubeProxyCanaryChain); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ipt.Monitor's %s chains: %w", kubeProxyCanaryChain, err)
	}
	return nil
}
