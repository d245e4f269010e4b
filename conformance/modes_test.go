package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcgen/svcgen/internal/netlab"
)

// modeRun is one case in one mode through one release.
type modeRun struct {
	h        *harness
	t        *testing.T
	rel      *release
	mode     string
	c        Case
	dir      string // input.yaml, case-config.yaml, oracle-config.yaml, resolved.yaml
	env      Env
	families []string // IPv4, IPv6, or both: see harness.families
	resolved []byte
	node     string
}

// side is one side's state in canonical text, part by part ("iptables",
// "nftables", "ipset"...), or the error that kept it from having one.
type side struct {
	parts map[string]string
	err   error
}

// mapOrdered are the iptables chains kube-proxy fills service by service in Go map
// order (syncProxyRules ranges over svcPortMap); everything else it writes in one
// order.
var mapOrdered = []string{
	"nat KUBE-SERVICES", "nat KUBE-NODEPORTS",
	"filter KUBE-SERVICES", "filter KUBE-EXTERNAL-SERVICES", "filter KUBE-NODEPORTS", "filter KUBE-PROXY-FIREWALL",
}

// ipvsMapOrdered: the ipvs proxier's per-Service iptables rules (one DROP per load
// balancer the node may not reach) in Go map order.
var ipvsMapOrdered = []string{"filter KUBE-IPVS-OUT-FILTER"}

// labMu serialises netlab.New: its check that namespaces can be made uses one
// probe namespace per process, which parallel subtests would make at once.
var labMu sync.Mutex

func newLab(t *testing.T) *netlab.Lab {
	labMu.Lock()
	defer labMu.Unlock()
	return netlab.New(t)
}

// nfacctCounters are the counters kube-proxy's iptables rules name when nfacct works:
// kube-proxy makes them in its namespace; svcgen's rules need them made.
var nfacctCounters = []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"}

// kubeProxy runs the release's oracle in a namespace of its own and reads back what
// it left.
func (m *modeRun) kubeProxy() side {
	l := newLab(m.t)
	ns := l.NS("kp")
	m.setupNode(l, ns)
	var extra []string
	out := filepath.Join(m.dir, "kube-proxy")
	if m.mode == "ipvs" {
		if err := os.Mkdir(out, 0o755); err != nil {
			m.t.Fatal(err)
		}
		extra = []string{"-out", out}
	}
	if err := m.runOracle(ns, extra...); err != nil {
		return side{err: err}
	}
	return m.read(l, ns, out)
}

// svcgenResult is svcgen's side of a case in a mode, loaded and read once for every
// release svcgen writes the same rules for (the header naming the release aside).
type svcgenResult struct {
	once sync.Once
	side side
}

func (h *harness) svcgenSide(m *modeRun) side {
	out := filepath.Join(m.dir, "svcgen")
	rules, sum, err := m.compile(out)
	if err != nil {
		return side{err: err}
	}
	key := fmt.Sprintf("%s %s %s %+v %x", m.c.Name, m.mode, m.families, m.rel.probe, sum)
	h.mu.Lock()
	r := h.svcgens[key]
	if r == nil {
		r = &svcgenResult{}
		h.svcgens[key] = r
	}
	h.mu.Unlock()
	r.once.Do(func() { r.side = m.load(rules, out) })
	return r.side
}

// releaseHeader is the line svcgen's iptables and nftables outputs start each
// family's rules with, which names the release: "# kube-proxy v1.37 iptables rules
// for node ...".
var releaseHeader = regexp.MustCompile(`(?m)^# kube-proxy v1\.\d+ [^\n]*\n`)

// compile runs svcgen compile for the case, mode, release and the run's families,
// and returns the rules of each family (nftables: one script for all, under the
// first family) and a hash of them without the headers that name the release.
// iptables with two families writes out.v4 and out.v6; ipvs mode writes the parts
// --split writes into out (out/v4 and out/v6 with two families).
func (m *modeRun) compile(out string) (rules map[string][]byte, sum [sha256.Size]byte, err error) {
	// No --ip-family: the run's families are svcgen's own choice for the input
	// (harness.families), which --ip-family dual would narrow to Nodes with an
	// address of each family, where a NodeEnvironment of DualStack need not.
	args := append([]string{"compile", "-m", m.mode, "--node", m.node, "--kube-proxy-version", m.rel.table.String()},
		m.h.inputArgs(m.c, m.dir)...)
	dual := len(m.families) > 1
	switch {
	case m.mode == "ipvs":
		args = append(args, "--split", "-o", out)
	case m.mode == "iptables" && dual:
		args = append(args, "-o", out)
	}
	stdout, err := m.h.run(args...)
	if err != nil {
		return nil, sum, err
	}
	rules = map[string][]byte{m.families[0]: stdout}
	if m.mode == "iptables" && dual {
		for _, f := range m.families {
			if rules[f], err = os.ReadFile(out + "." + suffix(f)); err != nil {
				return nil, sum, err
			}
		}
	}
	h := sha256.New()
	for _, f := range m.families {
		fmt.Fprintf(h, "%s %d\n", f, len(rules[f]))
		h.Write(releaseHeader.ReplaceAll(rules[f], nil))
		if m.mode != "ipvs" {
			continue
		}
		for _, name := range ipvsParts {
			data, err := os.ReadFile(filepath.Join(m.familyDir(out, f), name))
			if err != nil {
				return nil, sum, err
			}
			fmt.Fprintf(h, "%s %d\n", name, len(data))
			h.Write(data)
		}
	}
	copy(sum[:], h.Sum(nil))
	return rules, sum, nil
}

// suffix is svcgen's (and the oracle's) name of a family's outputs: v4 or v6.
func suffix(family string) string {
	if family == "IPv6" {
		return "v6"
	}
	return "v4"
}

// familyDir is the folder of a family's ipvs state in dir: dir itself for one
// family, dir/v4 and dir/v6 for two (svcgen's --split, the oracle's -out).
func (m *modeRun) familyDir(dir, family string) string {
	if len(m.families) == 1 {
		return dir
	}
	return filepath.Join(dir, suffix(family))
}

// part names one family's part of a side: the name alone for one family, else
// with the family ("IPv6 iptables").
func (m *modeRun) part(family, name string) string {
	if len(m.families) == 1 {
		return name
	}
	return family + " " + name
}

// ipvsParts are the files svcgen compile -m ipvs --split writes.
var ipvsParts = []string{"sysctl.conf", "addresses", "ipset.restore", "ipvsadm.rules", "iptables.rules"}

// load loads svcgen's rules into a namespace of its own with the real tools and
// reads them back (ipvs mode: the parts in out, the sets loaded with ipset restore).
func (m *modeRun) load(rules map[string][]byte, out string) side {
	l := newLab(m.t)
	ns := l.NS("sg")
	m.setupNode(l, ns)
	if m.mode == "iptables" && m.rel.probe.NFAcct {
		for _, c := range nfacctCounters {
			l.In(ns, "nfacct", "add", c)
		}
	}
	var err error
	for _, f := range m.families {
		switch m.mode {
		case "nftables":
			if r, ok := rules[f]; ok {
				err = l.Feed(ns, r, "nft", "-f", "-")
			}
		case "ipvs":
			var sets []byte
			if sets, err = os.ReadFile(filepath.Join(m.familyDir(out, f), "ipset.restore")); err == nil {
				err = l.Feed(ns, sets, "ipset", "restore", "-exist")
			}
		case "iptables":
			err = l.Feed(ns, rules[f], iptablesTool(f)+"-restore")
		}
		if err != nil {
			return side{err: fmt.Errorf("loading svcgen's rules: %w", err)}
		}
	}
	return m.read(l, ns, out)
}

// read reads one side back in canonical text: iptables-save (ip6tables-save) of
// every table; nft's tables and the kube-proxy table of each family; for ipvs, the
// files in dir (the oracle's fakes, or svcgen's split output) and the sets in ns.
func (m *modeRun) read(l *netlab.Lab, ns, dir string) side {
	parts := map[string]string{}
	switch m.mode {
	case "nftables":
		parts["nft tables"] = CanonicalLines(l.In(ns, "nft", "list", "tables"))
	case "ipvs":
		parts["ipset"] = CanonicalLines(l.In(ns, "ipset", "save"))
	}
	for _, f := range m.families {
		switch m.mode {
		case "iptables":
			rs := Ruleset{}
			if err := rs.ParseRestore(l.In(ns, iptablesTool(f)+"-save")); err != nil {
				m.t.Fatalf("reading %s-save: %v", iptablesTool(f), err)
			}
			parts[m.part(f, "iptables")] = rs.Canonical(mapOrdered)
		case "nftables":
			family := "ip"
			if f == "IPv6" {
				family = "ip6"
			}
			name := m.part(f, "nftables")
			listing, err := l.Try("ip", "netns", "exec", ns, "nft", "list", "table", family, "kube-proxy")
			if err != nil {
				parts[name] = "no table " + family + " kube-proxy\n"
				continue
			}
			if parts[name], err = CanonicalNFT(listing); err != nil {
				m.t.Fatalf("reading nft list table: %v\n%s", err, listing)
			}
		case "ipvs":
			m.readIPVS(m.familyDir(dir, f), f, parts)
		}
	}
	return side{parts: parts}
}

// readIPVS reads one family's ipvs state as written to dir: IPVS services,
// kube-ipvs0's addresses and the sysctls as sorted lines; iptables as a Ruleset,
// with the jumps svcgen's payload lists as ensured: this kernel has no xt_ipvs,
// which kube-proxy's rules may use, so neither side's iptables can be loaded. (The
// sets are the namespace's, read once for every family.)
func (m *modeRun) readIPVS(dir, family string, parts map[string]string) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			m.t.Fatal(err)
		}
		return string(data)
	}
	for _, name := range []string{"ipvsadm.rules", "addresses", "sysctl.conf"} {
		parts[m.part(family, name)] = CanonicalLines(read(name))
	}
	rs := Ruleset{}
	payload := read("iptables.rules")
	if err := rs.ParseRestore(payload); err != nil {
		m.t.Fatalf("%s/iptables.rules: %v", dir, err)
	}
	for _, cmd := range jumpCommands(payload) {
		if err := rs.Ensure(cmd); err != nil {
			m.t.Fatalf("%s/iptables.rules: %v", dir, err)
		}
	}
	parts[m.part(family, "iptables")] = rs.Canonical(ipvsMapOrdered)
}

// jumpCommands are the rules svcgen's ipvs iptables.rules says kube-proxy ensures
// outside the restore: its comment lines "#   iptables -t nat -I OUTPUT 1 ...".
func jumpCommands(payload string) []string {
	var out []string
	for _, line := range strings.Split(payload, "\n") {
		rest, ok := strings.CutPrefix(line, "#")
		rest = strings.TrimSpace(rest)
		if ok && (strings.HasPrefix(rest, "iptables ") || strings.HasPrefix(rest, "ip6tables ")) {
			out = append(out, rest)
		}
	}
	return out
}

// iptablesTool is "iptables" or "ip6tables" for a family.
func iptablesTool(family string) string {
	if family == "IPv6" {
		return "ip6tables"
	}
	return "iptables"
}

// setupNode gives a namespace the node's addresses, as the NodeEnvironment lists
// them (on veth links made inside the namespace: this kernel has no dummy links),
// else the Node's addresses on eth0; and the conntrack setting kube-proxy reads.
func (m *modeRun) setupNode(l *netlab.Lab, ns string) {
	itfs := m.env.Interfaces
	if itfs == nil {
		nodes, _ := ResolvedNodes(m.resolved)
		for _, n := range nodes {
			if n.Name != m.node {
				continue
			}
			itf := Interface{Name: "eth0"}
			for _, a := range n.Addresses {
				itf.Addresses = append(itf.Addresses, netipPrefixHost(a))
			}
			itfs = append(itfs, itf)
		}
	}
	for i, itf := range itfs {
		if itf.Name != "lo" {
			peer := fmt.Sprintf("vp%d", i)
			l.In(ns, "ip", "link", "add", itf.Name, "type", "veth", "peer", "name", peer)
			l.In(ns, "ip", "link", "set", peer, "up")
			l.In(ns, "ip", "link", "set", itf.Name, "up")
		}
		for _, p := range itf.Addresses {
			if itf.Name == "lo" && (p.String() == "127.0.0.1/8" || p.String() == "::1/128") {
				continue
			}
			args := []string{"ip", "addr", "add", p.String(), "dev", itf.Name}
			if p.Addr().Is6() {
				args = append(args, "nodad")
			}
			l.In(ns, args...)
		}
	}
	if m.env.TCPBeLiberal {
		l.In(ns, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_be_liberal=1")
	}
}

// oracleFamily is the oracle's -family: the one family, or DualStack.
func (m *modeRun) oracleFamily() string {
	if len(m.families) > 1 {
		return "DualStack"
	}
	return m.families[0]
}

// runOracle runs the release's oracle in ns; its error carries the end of its log.
func (m *modeRun) runOracle(ns string, extra ...string) error {
	// Generous: a small case takes seconds, but a CI run beside other work has seen
	// a proxier's first sync pass two minutes on two busy cores.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"netns", "exec", ns, m.rel.bin, "run",
		"-cluster", filepath.Join(m.dir, "resolved.yaml"),
		"-config", filepath.Join(m.dir, "oracle-config.yaml"),
		"-node", m.node, "-family", m.oracleFamily()}, extra...)
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kube-proxy %s: %v: %s", m.rel.name, err, lastLines(log.String(), 5))
	}
	return nil
}
