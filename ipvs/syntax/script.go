package syntax

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/model"
)

//go:embed reconcile.awk
var reconcileAWK string

//go:embed addresses.awk
var addressesAWK string

// Heredoc tags of the script's data parts, which ParseScript looks for.
const (
	tagAddresses = "SVCGEN_ADDRESSES"
	tagIPSet     = "SVCGEN_IPSET"
	tagIPVS      = "SVCGEN_IPVS"
	tagIPTables  = "SVCGEN_IPTABLES"
)

// sh is the one writer of shell text: it quotes words, writes comments and here-
// documents, and refuses text that could break out of them. Errors are sticky.
type sh struct {
	w   *bufio.Writer
	err error
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:,=+@%-]+$`)

// quote is a word as the shell must see it: as is when it holds no special
// character, else in single quotes.
func quote(word string) string {
	if plainWord.MatchString(word) {
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
}

func (s *sh) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// raw writes fixed shell text of this package.
func (s *sh) raw(lines ...string) {
	for _, l := range lines {
		s.w.WriteString(l + "\n")
	}
}

// comment writes "# text" lines; text from manifests only ever reaches the script here.
func (s *sh) comment(text string) {
	if strings.ContainsAny(text, "\n\r") {
		s.fail(fmt.Errorf("comment %q: a newline cannot go into a script comment", text))
		return
	}
	s.w.WriteString(strings.TrimRight("# "+text, " ") + "\n")
}

// cmd writes one command, its words quoted.
func (s *sh) cmd(words ...string) { s.w.WriteString(quoteAll(words) + "\n") }

// orElse writes "first >/dev/null 2>&1 || second": run second when first fails.
func (s *sh) orElse(first, second []string) {
	s.w.WriteString(quoteAll(first) + " >/dev/null 2>&1 || " + quoteAll(second) + "\n")
}

func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = quote(w)
	}
	return strings.Join(q, " ")
}

// heredoc writes "prefix <<'TAG'", the body, and TAG: the shell expands nothing in
// it, and a body line equal to TAG (which would end it early) is refused.
func (s *sh) heredoc(prefix, tag string, body []byte) {
	if hasLine(body, tag) {
		s.fail(fmt.Errorf("here-document %s: the body has a line %q", tag, tag))
		return
	}
	s.w.WriteString(prefix + " <<'" + tag + "'\n")
	s.w.Write(body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		s.w.WriteString("\n")
	}
	s.w.WriteString(tag + "\n")
}

// hasLine reports whether text has a line equal to line, without splitting it.
func hasLine(text []byte, line string) bool {
	for len(text) > 0 {
		i := bytes.Index(text, []byte(line))
		if i < 0 {
			return false
		}
		end := i + len(line)
		if (i == 0 || text[i-1] == '\n') && (end == len(text) || text[end] == '\n') {
			return true
		}
		text = text[i+1:]
	}
	return false
}

// parts renders the data parts once, for the script and for --split alike.
type parts struct {
	addresses, ipset, ipvs, iptables []byte
}

func render(n *Node) (*parts, error) {
	var addresses, ipset, ipvs, ipt bytes.Buffer
	// Room for what the parts will hold, so that the buffers do not grow by copying
	// (estimates by line; they only need to be near).
	entries, reals := 0, 0
	for _, set := range n.Sets {
		entries += len(set.Entries)
	}
	for _, vs := range n.Services {
		reals += len(vs.Reals)
	}
	addresses.Grow(len(n.Addresses) * 20)
	ipset.Grow(entries*48 + 4096)
	ipvs.Grow((len(n.Services)+reals)*56 + 4096)
	ipt.Grow((len(n.NAT.Rules)+len(n.Filter.Rules))*120 + 4096)
	for _, a := range n.Addresses {
		addresses.WriteString(a.String() + "\n")
	}
	if err := WriteSets(&ipset, n.Sets); err != nil {
		return nil, err
	}
	if err := WriteRules(&ipvs, n.Services); err != nil {
		return nil, err
	}
	if err := WritePayload(&ipt, n); err != nil {
		return nil, err
	}
	return &parts{addresses: addresses.Bytes(), ipset: ipset.Bytes(), ipvs: ipvs.Bytes(), iptables: ipt.Bytes()}, nil
}

// WritePayload writes the companion chains as kube-proxy's restore payload, for
// "iptables-restore --noflush" (ip6tables-restore for IPv6).
func WritePayload(w io.Writer, n *Node) error {
	rw := iptsyntax.NewRestoreWriter(w)
	for _, t := range []Table{n.NAT, n.Filter} {
		rw.Table(t.Name)
		for _, c := range t.Chains {
			rw.Chain(c)
		}
		for _, r := range t.Rules {
			rw.Rule(r.Chain, r.Args...)
		}
		rw.Commit()
	}
	return rw.Close()
}

// tools are the commands of the family.
func tools(f model.IPFamily) (ipt, restore, ipFlag, familyNum string) {
	if f == model.IPv6 {
		return "ip6tables", "ip6tables-restore", "-6", "6"
	}
	return "iptables", "iptables-restore", "-4", "4"
}

// Header says what the script is for; it goes at the top of the script.
type Header struct {
	Node string
	// Title is the script's first comment, what it is for (ir.ServiceMap.Header:
	// "kube-proxy v1.37 ipvs rules for node node1 (IPv4), written by svcgen"); ""
	// says the node and family only.
	Title string
}

// WriteScript writes the POSIX shell script that sets the node up as kube-proxy's
// ipvs proxier would, and can be run again: every step converges (see doc.go).
func WriteScript(w io.Writer, n *Node, h Header) error {
	p, err := render(n)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	s := &sh{w: bw}
	ipt, restore, ipFlag, fam := tools(n.Family)
	s.raw("#!/bin/sh")
	title := h.Title
	if title == "" {
		title = fmt.Sprintf("kube-proxy's ipvs mode for node %s (%s), written by svcgen", orNone(h.Node), n.Family)
	}
	s.comment(title + ".")
	s.comment("Run it as root. Running it again changes only what differs from this state.")
	s.raw("set -eu", "")
	s.serviceComments(n)

	s.comment("Kernel settings (kube-proxy's NewProxier).")
	for _, c := range n.Sysctls {
		s.cmd("sysctl", "-q", "-w", c.Name+"="+c.Value)
	}
	s.comment("conn_reuse_mode=0 only on kernels 4.1 to 5.8 (kubernetes #93297); kube-proxy reads the running kernel too.")
	s.raw(`case "$(uname -r)" in 4.[1-9]*|5.[0-8].*) sysctl -q -w net.ipv4.vs.conn_reuse_mode=0 ;; esac`, "")

	s.comment("The dummy interface: every virtual address as a host address, nothing else.")
	s.orElse([]string{"ip", "link", "show", DummyInterface}, []string{"ip", "link", "add", DummyInterface, "type", "dummy"})
	s.raw("{")
	s.heredoc("cat", tagAddresses, p.addresses)
	s.raw("echo %%", "ip -o "+ipFlag+" addr show dev "+DummyInterface)
	s.raw("} | awk '"+AddressesProgram()+"' | ip -batch -", "")

	s.comment("The sets, each refilled in one swap.")
	s.raw("ipset destroy " + TempSet + " 2>/dev/null || :")
	s.heredoc("ipset restore -exist", tagIPSet, p.ipset)
	s.raw("")

	s.comment("Virtual servers and real servers: only the differences go to ipvsadm -R.")
	if t := n.Timeouts; t != (Timeouts{}) {
		s.cmd("ipvsadm", "--set", strconv.Itoa(t.TCP), strconv.Itoa(t.TCPFin), strconv.Itoa(t.UDP))
	}
	var ex []string
	for _, c := range n.ExcludeCIDRs {
		ex = append(ex, c.String())
	}
	s.raw("svcgen_reconcile='" + ReconcileProgram() + "'")
	s.raw("{")
	s.heredoc("cat", tagIPVS, p.ipvs)
	s.raw("echo %%", "ipvsadm -Sn", "echo %%", "ipvsadm -Ln")
	s.raw("} | awk -v family="+fam+" -v exclude="+quote(strings.Join(ex, " "))+` "$svcgen_reconcile" | ipvsadm -R`, "")

	s.comment("The companion chains (kube-proxy's restore payload), then its jumps from the built-in chains.")
	s.heredoc(restore+" -w --noflush", tagIPTables, p.iptables)
	for _, j := range Jumps {
		check := append([]string{ipt, "-w", "-t", j.Table, "-C", j.From}, j.Args()...)
		insert := append([]string{ipt, "-w", "-t", j.Table, "-I", j.From, "1"}, j.Args()...)
		s.orElse(check, insert)
	}
	if s.err != nil {
		return s.err
	}
	return bw.Flush()
}

// serviceComments lists each virtual server with the service ports it is for.
func (s *sh) serviceComments(n *Node) {
	if len(n.Services) == 0 {
		return
	}
	s.comment("Virtual servers:")
	for _, vs := range n.Services {
		s.comment("  " + string(vs.Protocol) + " " + vs.Address.String() + "  " + strings.Join(vs.For, ", "))
	}
	s.raw("")
}

func orNone(s string) string {
	if s == "" {
		return "(unnamed)"
	}
	return s
}

// ReconcileProgram is the awk program the script runs to reconcile IPVS, as it
// stands in the script. Its input is three parts split by a line "%%": the wanted
// "ipvsadm -Sn" lines, the node's "ipvsadm -Sn", the node's "ipvsadm -Ln"; its
// variables family (4 or 6) and exclude (CIDRs, space-separated); it prints the
// "ipvsadm -R" commands. ipvs/plan's shared cases hold it to the Go planner.
func ReconcileProgram() string { return awkProgram(reconcileAWK) }

// AddressesProgram is the awk program the script runs to bind kube-ipvs0's addresses:
// the wanted prefixes, "%%", then "ip -o addr show dev kube-ipvs0"; it prints "ip
// -batch" commands.
func AddressesProgram() string { return awkProgram(addressesAWK) }

// awkProgram is an embedded awk program without its comment lines, for a single-
// quoted shell word (the package's tests check it holds no single quote).
func awkProgram(src string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(src), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// SplitFiles are the names --split writes, each one part of the script.
var SplitFiles = []string{"sysctl.conf", "addresses", "ipset.restore", "ipvsadm.rules", "iptables.rules"}

// WriteSplit writes the parts as separate files through create, for tools that want
// them apart: sysctl.conf (for sysctl -p), addresses (for kube-ipvs0, one prefix a
// line), ipset.restore (for ipset restore -exist), ipvsadm.rules (for ipvsadm -R on a
// node without these services; ipvsadm -Sn prints the same), iptables.rules (for
// iptables-restore --noflush, with the jumps kube-proxy ensures in comments).
func WriteSplit(n *Node, create func(name string, write func(io.Writer) error) error) error {
	p, err := render(n)
	if err != nil {
		return err
	}
	ipt, _, _, _ := tools(n.Family)
	files := map[string]func(io.Writer) error{
		"sysctl.conf": func(w io.Writer) error {
			var b strings.Builder
			for _, c := range n.Sysctls {
				b.WriteString(c.Name + " = " + c.Value + "\n")
			}
			b.WriteString("# net.ipv4.vs.conn_reuse_mode = 0 only on kernels 4.1 to 5.8 (kubernetes #93297)\n")
			_, err := io.WriteString(w, b.String())
			return err
		},
		"addresses":     writeBytes(p.addresses),
		"ipset.restore": writeBytes(p.ipset),
		"ipvsadm.rules": writeBytes(p.ipvs),
		"iptables.rules": func(w io.Writer) error {
			var b strings.Builder
			b.WriteString("# For " + ipt + "-restore --noflush. kube-proxy also ensures these rules (check with -C, else insert with -I CHAIN 1):\n")
			for _, j := range Jumps {
				b.WriteString("#   " + ipt + " -t " + j.Table + " -I " + j.From + " 1 -m comment --comment " + quote(j.Comment) + " -j " + j.To + "\n")
			}
			if _, err := io.WriteString(w, b.String()); err != nil {
				return err
			}
			_, err := w.Write(p.iptables)
			return err
		},
	}
	for _, name := range SplitFiles {
		if err := create(name, files[name]); err != nil {
			return err
		}
	}
	return nil
}

func writeBytes(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// ParseScript reads a script WriteScript wrote back into the state it sets up:
// sysctls, addresses, sets, virtual servers and the companion chains. (The services'
// For notes are comments and do not come back.)
func ParseScript(name string, r io.Reader) (*Node, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	docs, err := heredocs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n := &Node{Family: model.IPv4}
	if bytes.Contains(data, []byte("\nip6tables-restore ")) {
		n.Family = model.IPv6
	}
	for _, line := range strings.Split(string(data), "\n") {
		if err := n.scriptLine(line); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, l := range strings.Fields(string(docs[tagAddresses])) {
		p, err := netip.ParsePrefix(l)
		if err != nil {
			return nil, fmt.Errorf("%s: address %q: %w", name, l, err)
		}
		n.Addresses = append(n.Addresses, p)
	}
	if n.Sets, err = ParseSetsBytes(name+" (ipset part)", docs[tagIPSet]); err != nil {
		return nil, err
	}
	if n.Services, err = ParseRulesBytes(name+" (ipvsadm part)", docs[tagIPVS]); err != nil {
		return nil, err
	}
	if n.NAT, n.Filter, err = ParsePayload(name+" (iptables part)", docs[tagIPTables]); err != nil {
		return nil, err
	}
	return n, nil
}

// scriptLine reads what a line of the script outside its data parts says of the
// state: a sysctl, the IPVS timeouts, the excluded CIDRs.
func (n *Node) scriptLine(line string) error {
	if rest, ok := strings.CutPrefix(line, "sysctl -q -w "); ok {
		k, v, _ := strings.Cut(rest, "=")
		n.Sysctls = append(n.Sysctls, Sysctl{k, v})
	}
	if rest, ok := strings.CutPrefix(line, "ipvsadm --set "); ok {
		var t [3]int
		f := strings.Fields(rest)
		for i := range t {
			var err error
			if len(f) != len(t) {
				err = errors.New("not three values")
			} else {
				t[i], err = strconv.Atoi(f[i])
			}
			if err != nil {
				return fmt.Errorf("ipvsadm --set %s: want three timeouts in seconds", rest)
			}
		}
		n.Timeouts = Timeouts{TCP: t[0], TCPFin: t[1], UDP: t[2]}
	}
	if _, rest, ok := strings.Cut(line, " -v exclude="); ok {
		ex, _, _ := strings.Cut(rest, " \"$svcgen_reconcile\"")
		for _, c := range strings.Fields(strings.Trim(ex, "'")) {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return fmt.Errorf("exclude CIDR %q: %w", c, err)
			}
			n.ExcludeCIDRs = append(n.ExcludeCIDRs, p)
		}
	}
	return nil
}

// heredocs returns the bodies of the script's here-documents by tag.
func heredocs(data []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	lines := strings.SplitAfter(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		_, tag, ok := strings.Cut(strings.TrimSpace(lines[i]), "<<'")
		if !ok {
			continue
		}
		tag = strings.TrimSuffix(tag, "'")
		var body strings.Builder
		for i++; i < len(lines) && strings.TrimRight(lines[i], "\n") != tag; i++ {
			body.WriteString(lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("here-document %s has no end", tag)
		}
		out[tag] = []byte(body.String())
	}
	for _, tag := range []string{tagAddresses, tagIPSet, tagIPVS, tagIPTables} {
		if _, ok := out[tag]; !ok {
			return nil, errors.New("not an svcgen ipvs script: no " + tag + " part")
		}
	}
	return out, nil
}

// ParsePayload reads a restore payload back into ordered tables (the order is
// recovered from line numbers, since iptsyntax.Parse groups rules by chain).
func ParsePayload(name string, data []byte) (nat, filter Table, err error) {
	rs, err := iptsyntax.ParseBytes(name, data)
	if err != nil {
		return nat, filter, err
	}
	conv := func(t *iptsyntax.Table) Table {
		out := Table{Name: t.Name}
		type lineRule struct {
			line int
			r    Rule
		}
		var all []lineRule
		for _, c := range t.Chains {
			if c.Declared {
				out.Chains = append(out.Chains, c.Name)
			}
			for _, r := range c.Rules {
				all = append(all, lineRule{r.Line, Rule{Chain: r.Chain, Args: r.Args}})
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].line < all[j].line })
		for _, lr := range all {
			out.Rules = append(out.Rules, lr.r)
		}
		return out
	}
	if t := rs.Table("nat"); t != nil {
		nat = conv(t)
	}
	if t := rs.Table("filter"); t != nil {
		filter = conv(t)
	}
	return nat, filter, nil
}
