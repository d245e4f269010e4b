package compiler_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

func node(name, kubelet string) string {
	return `apiVersion: v1
kind: Node
metadata: {name: ` + name + `}
status:
  addresses: [{type: InternalIP, address: 192.168.0.2}]
  nodeInfo: {kubeletVersion: "` + kubelet + `"}`
}

func compileFor(t *testing.T, c *model.Cluster, opts compiler.Options) (*ir.ServiceMap, error) {
	t.Helper()
	res, err := compiler.Resolve(c, compiler.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return compiler.Compile(res.Cluster, opts)
}

func mustRelease(t *testing.T, v string) release.Release {
	t.Helper()
	r, err := release.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The release: the flag, else the Nodes' kubelets when they agree, else the newest.
func TestTargetRelease(t *testing.T) {
	one := svc("a", "  ports: [{port: 80}]")
	for _, tc := range []struct {
		name  string
		docs  []string
		flag  string
		want  string
		error string
	}{
		{"no Nodes", []string{one}, "", "1.37", ""},
		{"Nodes agree", []string{one, node("n1", "v1.35.4"), node("n2", "v1.35.1-eks-5e0fdde")}, "", "1.35", ""},
		{"a Node without a version", []string{one, node("n1", "v1.36.3"), node("n2", "")}, "", "1.36", ""},
		{"the flag wins", []string{one, node("n1", "v1.35.4")}, "1.34", "1.34", ""},
		{"Nodes disagree", []string{one, node("n1", "v1.35.4"), node("n2", "v1.36.3")}, "", "",
			"the Nodes run kubelets of different releases: 1.35 (n1); 1.36 (n2); say which kube-proxy the rules are for with --kube-proxy-version"},
		{"an unsupported kubelet", []string{one, node("n1", "v1.30.2")}, "", "",
			`(Node n1): status.nodeInfo.kubeletVersion: kube-proxy "v1.30.2" is not a supported release (want 1.34, 1.35, 1.36 or 1.37); give --kube-proxy-version`},
	} {
		opts := compiler.Options{Node: "n1"}
		if tc.flag != "" {
			opts.Release = mustRelease(t, tc.flag)
		}
		sm, err := compileFor(t, cluster(t, tc.docs...), opts)
		switch {
		case tc.error != "":
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.error)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case sm.Target.Release.String() != tc.want:
			t.Errorf("%s: release %s, want %s", tc.name, sm.Target.Release, tc.want)
		}
	}
}

const kpc = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// Gates: the configuration's are checked against the release at their field; the
// command line's over them are a *GateError (a usage error).
func TestTargetGates(t *testing.T) {
	one := svc("a", "  externalIPs: [203.0.113.9]\n  ports: [{port: 80}]")
	sm, err := compileFor(t, cluster(t, one, kpc+"featureGates: {AllowServiceExternalIPs: false}"), compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := sm.Services[0].Ports[0]; len(p.ExternalIPs) != 0 || sm.Target.Gates[release.GateAllowServiceExternalIPs] {
		t.Errorf("AllowServiceExternalIPs=false: external IPs %v", p.ExternalIPs)
	}
	// The command line turns it back on.
	sm, err = compileFor(t, cluster(t, one, kpc+"featureGates: {AllowServiceExternalIPs: false}"), compiler.Options{Gates: map[string]bool{release.GateAllowServiceExternalIPs: true}})
	if err != nil || len(sm.Services[0].Ports[0].ExternalIPs) != 1 {
		t.Errorf("--feature-gates over the configuration: %v", err)
	}
	// The gate does not exist in v1.35: kube-proxy 1.35 programs external IPs.
	_, err = compileFor(t, cluster(t, one, kpc+"featureGates: {AllowServiceExternalIPs: false}"), compiler.Options{Release: mustRelease(t, "1.35")})
	if err == nil || !strings.Contains(err.Error(), `in.yaml: document 2 (KubeProxyConfiguration): featureGates: kube-proxy 1.35 has no feature gate "AllowServiceExternalIPs"`) {
		t.Errorf("a gate v1.35 lacks, in the configuration: %v", err)
	}
	var gateErr *compiler.GateError
	_, err = compileFor(t, cluster(t, one), compiler.Options{Release: mustRelease(t, "1.35"), Gates: map[string]bool{"NoSuchGate": true}})
	if !errors.As(err, &gateErr) {
		t.Errorf("an unknown gate on the command line: %v (%T), want a *GateError", err, err)
	}
}

// Two endpoints with one address and port: before v1.36 the one on this node wins,
// from v1.36 the one not terminating.
func TestDuplicateEndpointsByRelease(t *testing.T) {
	docs := []string{
		node("n1", ""),
		svc("a", "  clusterIP: 10.96.0.10\n  ports: [{port: 80}]"),
		slice("a-1", "a", "[{addresses: [10.1.0.5], nodeName: n1, conditions: {ready: false, serving: true, terminating: true}}]"),
		slice("a-2", "a", "[{addresses: [10.1.0.5], nodeName: n2, conditions: {ready: true}}]"),
	}
	for v, wantLocal := range map[string]bool{"1.35": true, "1.37": false} {
		sm, err := compileFor(t, cluster(t, docs...), compiler.Options{Node: "n1", Release: mustRelease(t, v)})
		if err != nil {
			t.Fatal(err)
		}
		eps := sm.Services[0].Ports[0].Endpoints
		if len(eps) != 1 || eps[0].Local != wantLocal || eps[0].Terminating != wantLocal {
			t.Errorf("%s: endpoints %+v; want the one on this node: %v", v, eps, wantLocal)
		}
	}
}

func slice(name, svc, endpoints string) string {
	return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ` + name + `, namespace: ns, labels: {kubernetes.io/service-name: ` + svc + `}}
addressType: IPv4
ports: [{port: 80, protocol: TCP}]
endpoints: ` + endpoints
}

// nodePortAddresses: the keywords per release, and nftables mode's default "primary".
func TestNodePortAddressesByRelease(t *testing.T) {
	nodeIP := netip.MustParseAddr("192.168.0.2")
	for _, tc := range []struct {
		release, mode, npa string
		all                bool
		addrs              []netip.Addr
		error              string
	}{
		{"1.37", "iptables", "", true, nil, ""},
		{"1.37", "nftables", "", false, []netip.Addr{nodeIP}, ""},
		{"1.35", "nftables", "", false, []netip.Addr{nodeIP}, ""},
		{"1.37", "nftables", "[all]", true, nil, ""},
		{"1.37", "iptables", "[primary, 10.9.0.0/16]", false, []netip.Addr{nodeIP}, ""},
		{"1.37", "iptables", "[localhost]", false, nil, ""},
		{"1.36", "iptables", "[primary, 10.9.0.0/16]", false, nil, `nodePortAddresses: "primary" cannot be combined with CIDRs before kube-proxy 1.37 (the rules are for 1.36)`},
		{"1.36", "iptables", "[localhost]", false, nil, `nodePortAddresses: the keywords "localhost" and "all" need kube-proxy 1.37 or later`},
	} {
		cfg := kpc + "hostnameOverride: n1\n"
		if tc.npa != "" {
			cfg += "nodePortAddresses: " + tc.npa + "\n"
		}
		sm, err := compileFor(t, cluster(t, node("n1", ""), svc("a", "  ports: [{port: 80}]"), cfg),
			compiler.Options{Mode: compiler.Mode(tc.mode), Release: mustRelease(t, tc.release)})
		name := tc.release + " " + tc.mode + " " + tc.npa
		switch {
		case tc.error != "":
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("%s: error %v, want %q", name, err, tc.error)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case sm.NodePorts.MatchAll != tc.all || !slicesEqual(sm.NodePorts.Addresses, tc.addrs):
			t.Errorf("%s: %+v, want all=%v %v", name, sm.NodePorts, tc.all, tc.addrs)
		}
	}
}

func slicesEqual(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// v1.37 masquerades with --random-fully without asking the node.
func TestRandomFullyByRelease(t *testing.T) {
	env := "apiVersion: svcgen/v1alpha1\nkind: NodeEnvironment\nmetadata: {name: n1}\niptables: {randomFully: false}"
	for v, want := range map[string]bool{"1.36": false, "1.37": true} {
		sm, err := compileFor(t, cluster(t, node("n1", ""), env, svc("a", "  ports: [{port: 80}]")), compiler.Options{Node: "n1", Release: mustRelease(t, v)})
		if err != nil {
			t.Fatal(err)
		}
		if sm.Host.RandomFully != want {
			t.Errorf("%s: random-fully %v, want %v", v, sm.Host.RandomFully, want)
		}
	}
}
