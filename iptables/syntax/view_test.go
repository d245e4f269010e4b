package syntax

import (
	"testing"

	"github.com/svcgen/svcgen/ruleview"
)

// A node kube-proxy ran on has its empty canary chains in mangle, nat and filter
// (runner.Monitor); they are no rules, so what kube-proxy owns is the same with and
// without them, and audit of such a node finds no drift. A canary that holds a rule is
// not kube-proxy's empty canary and stays in view.
func TestViewLeavesOutCanary(t *testing.T) {
	rules := "*nat\n:KUBE-SERVICES - [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j KUBE-SERVICES\nCOMMIT\n"
	canaries := "*mangle\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n" +
		"*nat\n:KUBE-PROXY-CANARY - [0:0]\n:KUBE-SERVICES - [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j KUBE-SERVICES\nCOMMIT\n" +
		"*filter\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
	want := mustParse(t, rules).View(Owners{}, KubeProxyOnly)
	have := mustParse(t, canaries).View(Owners{}, KubeProxyOnly)
	if drift := ruleview.Audit(want, have); len(drift) != 0 {
		t.Errorf("the canary chains show as drift: %+v", drift)
	}
	if d := ruleview.Unified("want", want, "have", have); len(d) != 0 {
		t.Errorf("the canary chains show in a diff:\n%s", d)
	}
	all := mustParse(t, canaries).View(Owners{}, Everything)
	if len(all.Sections) <= len(have.Sections) {
		t.Errorf("a view of everything leaves out the canary chains")
	}
	used := mustParse(t, "*nat\n:KUBE-PROXY-CANARY - [0:0]\n-A KUBE-PROXY-CANARY -j ACCEPT\nCOMMIT\n").View(Owners{}, KubeProxyOnly)
	if len(used.Sections) != 1 {
		t.Errorf("a canary chain with a rule is left out of the view")
	}
}
