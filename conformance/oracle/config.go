package oracle

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/kubernetes/cmd/kube-proxy/app"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
)

// LoadConfig reads a KubeProxyConfiguration file exactly as kube-proxy does, by running
// kube-proxy's own command with --config FILE --write-config-to OUT: its strict and
// lenient decoding with kube-proxy's config scheme (and so its defaulting), the
// platform defaults of cmd/kube-proxy (mode iptables when unset; nftables with no
// nodePortAddresses gets ["primary"]; detectLocalMode ClusterCIDR), the feature
// gates of the configuration set on utilfeature.DefaultMutableFeatureGate over the
// release's defaults, and validation. The configuration it writes back is decoded into
// the internal type the proxiers take. Nothing of cmd/kube-proxy is copied: a change
// in any of these steps in a later release is picked up as it is.
//
// The feature gates stay set in this process, which is what the proxiers read.
func LoadConfig(path string) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	dir, err := os.MkdirTemp("", "oracle-config-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "config.yaml")
	cmd := app.NewProxyCommand()
	cmd.SetArgs([]string{"--config=" + path, "--write-config-to=" + out})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		return nil, fmt.Errorf("kube-proxy refuses the configuration %s: %w", path, err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy wrote no configuration: %w", err)
	}
	obj, _, err := proxyconfigscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the configuration kube-proxy wrote: %w", err)
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return nil, fmt.Errorf("kube-proxy wrote a %T, not a KubeProxyConfiguration", obj)
	}
	return cfg, nil
}
