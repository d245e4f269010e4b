package nft

import "testing"

// PortOf reads the service port back from every per-service name Build makes, the
// truncated ones of upstream's worked examples included, and from no other name.
func TestPortOf(t *testing.T) {
	ns, svc, port := "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx", "very-long-service-name-why-would-you-even-do-this-i-mean-really", "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	for name, want := range map[string]string{
		"service-ULMVA6XW-ns1/svc1/tcp/p80":                                                               "ns1/svc1:p80",
		"endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80":                                               "ns1/svc1:p80",
		"affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80":                                               "ns1/svc1:p80",
		"external-42NFTM6N-ns2/svc2/tcp/":                                                                 "ns2/svc2",
		prefixEndpoint + endpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:5678]:443"): ns + "/" + svc + ":" + port,
		"services":                          "",
		"service-ips":                       "",
		"service-nodeports":                 "",
		"mark-for-masquerade":               "",
		"service-ulmva6xw-ns1/svc1/tcp/p80": "", // not a hash
		"service-ULMVA6XW-ns1/svc1/p80":     "",
		"other-ULMVA6XW-ns1/svc1/tcp/p80":   "",
	} {
		if got := PortOf(name); got != want {
			t.Errorf("PortOf(%q) = %q, want %q", name, got, want)
		}
	}
	st := Build(compileFiles(t, "../../examples"))
	n := 0
	for name := range st.Chains {
		if IsServiceChain(name) {
			n++
			if PortOf(name) == "" {
				t.Errorf("PortOf(%q) is empty", name)
			}
		} else if p := PortOf(name); p != "" {
			t.Errorf("PortOf(%q) = %q for a fixed chain", name, p)
		}
	}
	if n == 0 {
		t.Error("the examples have no per-service chain")
	}
}
