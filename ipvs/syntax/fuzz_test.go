package syntax_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ipvs/rules"
	"github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/load"
)

// FuzzScript feeds arbitrary manifests through load, resolve, compile and the ipvs
// script: never a panic, the same bytes twice, a script that reads back as the state
// it was written from, and no byte in it that could leave a comment or a quoted word.
func FuzzScript(f *testing.F) {
	seeds, err := filepath.Glob("../../golden/*/input.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := buildBytes(data)
		if !ok {
			return
		}
		var a, b bytes.Buffer
		if err := syntax.WriteScript(&a, n, syntax.Header{}); err != nil {
			return // refused text is fine; a panic or a bad script is not
		}
		if err := syntax.WriteScript(&b, n, syntax.Header{}); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("the same state gave two scripts")
		}
		for _, c := range a.String() {
			if c != '\n' && c != '\t' && (c < 0x20 || c == 0x7f) {
				t.Fatalf("control character %q in the script", c)
			}
		}
		back, err := syntax.ParseScript("fuzz", bytes.NewReader(a.Bytes()))
		if err != nil {
			t.Fatalf("the script does not read back: %v", err)
		}
		for _, vs := range n.Services {
			vs.For = nil
		}
		if !reflect.DeepEqual(back, n) {
			t.Fatalf("the script reads back as another state")
		}
		if strings.Count(a.String(), "<<'") != 4 {
			t.Fatal("the script does not have its four here-documents")
		}
	})
}

func buildBytes(data []byte) (*syntax.Node, bool) {
	l := &load.Loader{}
	l.Bytes("fuzz.yaml", data)
	if l.Err() != nil {
		return nil, false
	}
	r, err := compiler.Resolve(&l.Cluster, compiler.ResolveOptions{})
	if err != nil {
		return nil, false
	}
	sm, err := compiler.Compile(r.Cluster, compiler.Options{Mode: compiler.IPVS})
	if err != nil {
		return nil, false
	}
	return rules.Build(sm), true
}

// The ipvs section of the configuration reaches the script: timeouts for ipvsadm
// --set, strictARP's sysctls, mh's mh-port flag, excludeCIDRs for the reconcile.
func TestConfigurationInScript(t *testing.T) {
	n, ok := buildBytes([]byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
ipvs: {scheduler: mh, strictARP: true, tcpTimeout: 900s, tcpFinTimeout: 2m, udpTimeout: 300s, excludeCIDRs: [198.51.100.0/24, "2001:db8::/32"]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}
`))
	if !ok {
		t.Fatal("the input did not compile")
	}
	var b bytes.Buffer
	if err := syntax.WriteScript(&b, n, syntax.Header{Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nipvsadm --set 900 120 300\n",
		"\nsysctl -q -w net.ipv4.conf.all.arp_ignore=1\n",
		"\nsysctl -q -w net.ipv4.conf.all.arp_announce=2\n",
		"\n-A -t 10.96.0.10:80 -s mh -b mh-port\n",
		" -v exclude=198.51.100.0/24 ",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the script lacks %q", strings.TrimSpace(want))
		}
	}
	back, err := syntax.ParseScript("script", &b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Timeouts != (syntax.Timeouts{900, 120, 300}) || len(back.Sysctls) != 6 || len(back.ExcludeCIDRs) != 1 {
		t.Errorf("read back: timeouts %+v, %d sysctls, exclude %v", back.Timeouts, len(back.Sysctls), back.ExcludeCIDRs)
	}
}
