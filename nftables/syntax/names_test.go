package syntax

import "testing"

// The worked examples of the spec (upstream's Test_servicePortChainNameBase and the
// names in its expected dumps).
func TestHashAndTruncate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ns1/svc1/tcp/p80", "ULMVA6XW-ns1/svc1/tcp/p80"},
		{"ns1/svc1/tcp/p80__10.180.0.1/80", "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{"ns2/svc2/tcp/p80", "42NFTM6N-ns2/svc2/tcp/p80"},
		{"ns5/svc5/tcp/p80__10.180.0.3/80", "GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
		{"ns2/svc2/tcp/p8080", "MHHHYRWA-ns2/svc2/tcp/p8080"},
		{"testing/service/tcp/http", "P4ZYZVCF-testing/service/tcp/http"},
		{"testing/service/tcp/https", "LZBRENCP-testing/service/tcp/https"},
	} {
		if got := hashAndTruncate(tc.in); got != tc.want {
			t.Errorf("hashAndTruncate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// upstream's Test_servicePortChainNameBase and Test_servicePortEndpointChainNameBase.
	ns, svc, port := "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx", "very-long-service-name-why-would-you-even-do-this-i-mean-really", "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	long := ns + "/" + svc + "/sctp/" + port
	for _, tc := range []struct{ got, want string }{
		{PortBase(ns, svc, "sctp", port), "KR6NACJP-" + long},
		{EndpointBase("testing", "service", "tcp", "http", "10.180.0.1:80"), "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"},
		{EndpointBase("testing", "service", "tcp", "http", "10.180.0.2:80"), "5S6H3H22-testing/service/tcp/http__10.180.0.2/80"},
		{EndpointBase("testing", "service", "tcp", "http", "[fd80:abcd:12::a1b2:c3d4:e5f6:9999]:80"), "U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80"},
		{EndpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abc:1234]:443"), "5YS7AFEA-" + long + "__1234.5678.9abc.def0..abc.1234/443"},
		{EndpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:5678]:443"), "CI6C53Q3-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
		{EndpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:8765]:443"), "2FLXFK6X-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// PortOf reads the service port back from every per-service name, the truncated ones
// of upstream's worked examples included, and from no other name.
func TestPortOf(t *testing.T) {
	ns, svc, port := "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx", "very-long-service-name-why-would-you-even-do-this-i-mean-really", "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	for name, want := range map[string]string{
		"service-ULMVA6XW-ns1/svc1/tcp/p80":                                                               "ns1/svc1:p80",
		"endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80":                                               "ns1/svc1:p80",
		"affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80":                                               "ns1/svc1:p80",
		"external-42NFTM6N-ns2/svc2/tcp/":                                                                 "ns2/svc2",
		PrefixEndpoint + EndpointBase(ns, svc, "sctp", port, "[1234:5678:9abc:def0::abcd:1234:5678]:443"): ns + "/" + svc + ":" + port,
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
	if got := OwnerOf("endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"); got != "ns1/svc1" {
		t.Errorf("OwnerOf = %q, want ns1/svc1", got)
	}
	for line, want := range map[string]string{
		"add element ip kube-proxy service-ips { 10.0.0.1 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }": "ns1/svc1:p80",
		`add element ip kube-proxy no-endpoint-services { 10.0.0.1 . tcp . 80 comment "ns1/svc1:p80" : drop }`:   "",
		"add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips":                   "",
	} {
		if got := LinePort(line); got != want {
			t.Errorf("LinePort(%q) = %q, want %q", line, got, want)
		}
	}
}
