package syntax

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// What ipvsadm 1.31 printed in the qemu guest for services made by hand, mh's flag,
// IPv6 and SCTP among them: ParseRules must read it and WriteRules give it back.
const savedByIPVSAdm = `-A -t 10.20.30.41:80 -s rr
-a -t 10.20.30.41:80 -r 10.180.0.1:80 -m -w 1
-A -t 10.20.30.42:80 -s mh -p 10800 -b mh-port
-A -u [2020::1]:53 -s rr -p 60
-a -u [2020::1]:53 -r [1002:ab8::2:10]:53 -m -w 1
-A --sctp-service 10.20.30.43:80 -s wrr
-a --sctp-service 10.20.30.43:80 -r 10.180.0.2:8080 -m -w 0
`

func TestParseRulesRoundTrip(t *testing.T) {
	vss, err := ParseRulesBytes("saved", []byte(savedByIPVSAdm))
	if err != nil {
		t.Fatal(err)
	}
	if len(vss) != 4 {
		t.Fatalf("%d services, want 4", len(vss))
	}
	mh := vss[1]
	if mh.Scheduler != "mh" || mh.Flags != FlagPersistent|FlagSched2 || mh.Timeout != 10800 {
		t.Errorf("mh service read as %+v", mh)
	}
	var b bytes.Buffer
	if err := WriteRules(&b, vss); err != nil {
		t.Fatal(err)
	}
	// Sorted by protocol: TCP, UDP, SCTP.
	want := strings.Join([]string{
		"-A -t 10.20.30.41:80 -s rr", "-a -t 10.20.30.41:80 -r 10.180.0.1:80 -m -w 1",
		"-A -t 10.20.30.42:80 -s mh -p 10800 -b mh-port",
		"-A -u [2020::1]:53 -s rr -p 60", "-a -u [2020::1]:53 -r [1002:ab8::2:10]:53 -m -w 1",
		"-A --sctp-service 10.20.30.43:80 -s wrr", "-a --sctp-service 10.20.30.43:80 -r 10.180.0.2:8080 -m -w 0",
	}, "\n") + "\n"
	if b.String() != want {
		t.Errorf("written back:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"-a -t 1.2.3.4:80 -r 10.0.0.1:80 -m -w 1", "before its service"},
		{"-A -t 1.2.3.4:80 -s rr\n-A -t 1.2.3.4:80 -s rr", "added twice"},
		{"-A -t example.com:http -s rr", "numeric"},
		{"-A -f 7 -s rr", "only -t, -u and --sctp-service"},
		{"-A -t 1.2.3.4:80 -s rr --pe sip", "not read"},
		{"-A -t 1.2.3.4:80 -s sh -b mh-port", "not one of sh's"},
		{"-E -t 1.2.3.4:80 -s rr", "not a -A or -a line"},
	} {
		_, err := ParseRulesBytes("in", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.want)
		}
	}
}

// What ipset 7.17 saved in the guest: extra create options, a host net without /32.
const savedByIPSet = `create S1 hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xb3a2b697
add S1 1.2.3.4,tcp:80
create N hash:ip,port,net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x2214265a
add N 1.2.3.4,tcp:80,10.0.0.1
add N 1.2.3.4,tcp:80,10.0.0.0/8
create B bitmap:port range 0-65535
add B 3001
create L6 hash:ip,port family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0x6f232aee
add L6 2020:0::1,sctp:80
`

func TestParseSetsSave(t *testing.T) {
	sets, err := ParseSetsBytes("saved", []byte(savedByIPSet))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range sets {
		got[s.Name] = s.Type + " " + s.Family + " " + strings.Join(s.Entries, " ")
	}
	want := map[string]string{
		"S1": "hash:ip,port inet 1.2.3.4,tcp:80",
		"N":  "hash:ip,port,net inet 1.2.3.4,tcp:80,10.0.0.0/8 1.2.3.4,tcp:80,10.0.0.1/32",
		"B":  "bitmap:port  3001",
		"L6": "hash:ip,port inet6 2020::1,sctp:80",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("set %s: %q, want %q", k, got[k], v)
		}
	}
}

// WriteSets' swap sequence leaves exactly the written entries, whatever the set held.
func TestWriteSetsReplacesEntries(t *testing.T) {
	sets := []*Set{{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, Family: "inet", HashSize: 1024, MaxElem: 65536, Entries: []string{"10.0.0.1,tcp:80"}}}
	var b bytes.Buffer
	if err := WriteSets(&b, sets); err != nil {
		t.Fatal(err)
	}
	before := "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\nadd KUBE-CLUSTER-IP 10.9.9.9,udp:53\n"
	got, err := ParseSetsBytes("node then script", []byte(before+b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || strings.Join(got[0].Entries, " ") != "10.0.0.1,tcp:80" {
		t.Errorf("after the script the node holds %+v", got)
	}
	if _, err := ParseSetsBytes("bad", []byte("create X hash:ip family inet\nadd X 1.2.3.4,tcp:80\n")); err == nil {
		t.Error("an entry that does not fit hash:ip was read")
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"KUBE-SERVICES":              "KUBE-SERVICES",
		"kubernetes service portals": "'kubernetes service portals'",
		"it's":                       `'it'\''s'`,
		"$(reboot)":                  "'$(reboot)'",
		"":                           "''",
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	var b bytes.Buffer
	s := &sh{w: bufioWriter(&b)}
	s.comment("ns/svc:port\nrm -rf /")
	if s.err == nil {
		t.Error("a comment with a newline was written")
	}
	s = &sh{w: bufioWriter(&b)}
	s.heredoc("cat", "EOF", []byte("a\nEOF\nb\n"))
	if s.err == nil {
		t.Error("a here-document whose body ends it early was written")
	}
}

func TestEmbeddedProgramsQuoteFree(t *testing.T) {
	for name, src := range map[string]string{"reconcile.awk": reconcileAWK, "addresses.awk": addressesAWK} {
		if strings.Contains(awkProgram(src), "'") {
			t.Errorf("%s holds a single quote outside its comments: it cannot go into the script's single-quoted word", name)
		}
	}
}

func bufioWriter(b *bytes.Buffer) *bufio.Writer { return bufio.NewWriter(b) }

// A script line the parser cannot read is an error, not a zero.
func TestScriptLineErrors(t *testing.T) {
	for _, line := range []string{"ipvsadm --set 900 x 300", "ipvsadm --set 900 120", `} | awk -v family=4 -v exclude='10.0.0.0/33' "$svcgen_reconcile" | ipvsadm -R`} {
		if err := (&Node{}).scriptLine(line); err == nil {
			t.Errorf("%q was read", line)
		}
	}
	n := &Node{}
	if err := n.scriptLine("ipvsadm --set 900 120 300"); err != nil || n.Timeouts != (Timeouts{900, 120, 300}) {
		t.Errorf("timeouts %+v, %v", n.Timeouts, err)
	}
}
