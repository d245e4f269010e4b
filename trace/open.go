package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"

	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/model"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"sigs.k8s.io/knftables"
)

// Format is the kind of text a ruleset file holds.
type Format string

// Formats svcgen recognises.
const (
	// IPTablesText is iptables-restore input or iptables-save output (svcgen's
	// iptables mode writes it).
	IPTablesText Format = "iptables"
	// NFTText is `nft list ruleset` output or an `nft -f` script (svcgen's nftables mode).
	NFTText Format = "nftables"
	// IPVSAdmText is `ipvsadm -Sn` output (ipvsadm -R input).
	IPVSAdmText Format = "ipvsadm"
	// IPSetText is `ipset save` output (ipset restore input).
	IPSetText Format = "ipset"
	// ShellScript is a shell script, as svcgen's ipvs mode writes it.
	ShellScript Format = "shell script"
)

// DetectFormat tells the format of a ruleset from its first significant line.
func DetectFormat(data []byte) (Format, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if first && strings.HasPrefix(l, "#!") {
			if strings.Contains(l, "nft") {
				return NFTText, nil
			}
			return ShellScript, nil
		}
		first = false
		if l == "" || l[0] == '#' {
			continue
		}
		w := strings.Fields(l)
		switch {
		case l[0] == '*':
			return IPTablesText, nil
		case w[0] == "table" || w[0] == "flush" || w[0] == "delete" || (w[0] == "add" && len(w) > 1 && nftObjects[w[1]]):
			return NFTText, nil
		case w[0] == "-A" || w[0] == "-a" || w[0] == "ipvsadm":
			return IPVSAdmText, nil
		case w[0] == "create" || (w[0] == "add" && len(w) > 2):
			return IPSetText, nil
		case w[0] == "set" || w[0] == "sysctl" || w[0] == "ip" || w[0] == "ipset" || w[0] == "iptables-restore":
			return ShellScript, nil
		}
		return "", fmt.Errorf("cannot tell what kind of ruleset this is from %q (want iptables-save, nft list ruleset, ipvsadm -Sn or ipset save output)", l)
	}
	return "", errEmpty
}

var errEmpty = errors.New("the ruleset is empty")

var nftObjects = map[string]bool{"table": true, "chain": true, "rule": true, "set": true, "map": true, "element": true}

// File is one ruleset file; Name is used in errors.
type File struct {
	Name string
	Data []byte
}

// Open reads ruleset files into a tracer for a node with the given addresses. Each
// file's format is detected; together they must make up one mode's ruleset: an
// iptables ruleset (svcgen's output or iptables-save), an nftables one (svcgen's
// script or nft list ruleset), svcgen's ipvs script, or ipvsadm -Sn with ipset save and
// iptables-save (or svcgen's split ipvs files).
func Open(files []File, host Host) (Tracer, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("no ruleset given")
	}
	byFormat := map[Format][]File{}
	var empty []File // a node with no virtual servers saves an empty ipvsadm ruleset
	for _, f := range files {
		format, err := DetectFormat(f.Data)
		if errors.Is(err, errEmpty) {
			empty = append(empty, f)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		byFormat[format] = append(byFormat[format], f)
	}
	if len(empty) == 1 && len(byFormat[IPVSAdmText]) == 0 && len(byFormat[IPSetText]) > 0 {
		byFormat[IPVSAdmText] = empty
		empty = nil
	}
	if len(empty) > 0 {
		return nil, fmt.Errorf("%s: %w", empty[0].Name, errEmpty)
	}
	for format, fs := range byFormat {
		if len(fs) > 1 {
			return nil, fmt.Errorf("%s and %s: two %s rulesets; give one of each kind", fs[0].Name, fs[1].Name, format)
		}
	}
	one := func(f Format) (File, bool) {
		fs := byFormat[f]
		if len(fs) == 0 {
			return File{}, false
		}
		return fs[0], true
	}
	switch {
	case len(byFormat) == 1 && len(byFormat[NFTText]) == 1:
		f := byFormat[NFTText][0]
		rs, err := nftsyntax.ParseBytes(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		return NewNFTRuleset(rs, host)
	case len(byFormat[NFTText]) > 0:
		return nil, fmt.Errorf("%s: give an nftables ruleset alone", byFormat[NFTText][0].Name)
	case len(byFormat) == 1 && len(byFormat[ShellScript]) == 1:
		f := byFormat[ShellScript][0]
		n, err := ipvssyntax.ParseScript(f.Name, bytes.NewReader(f.Data))
		if err != nil {
			return nil, err
		}
		return NewIPVS(n, nil, host)
	case len(byFormat[ShellScript]) > 0:
		return nil, fmt.Errorf("%s: give svcgen's ipvs script alone", byFormat[ShellScript][0].Name)
	case len(byFormat[IPVSAdmText]) > 0 || len(byFormat[IPSetText]) > 0:
		return openIPVS(one, host)
	}
	f, _ := one(IPTablesText)
	rs, err := iptsyntax.ParseBytes(f.Name, f.Data)
	if err != nil {
		return nil, err
	}
	return NewIPTables(rs, host)
}

// openIPVS reads a node's ipvs state from its tools' output.
func openIPVS(one func(Format) (File, bool), host Host) (Tracer, error) {
	vf, okV := one(IPVSAdmText)
	sf, okS := one(IPSetText)
	tf, okT := one(IPTablesText)
	if !okV || !okS || !okT {
		return nil, fmt.Errorf("an ipvs node's state is three rulesets: ipvsadm -Sn, ipset save and iptables-save output (or svcgen compile -m ipvs --split's ipvsadm.rules, ipset.restore and iptables.rules); give all three")
	}
	n := &ipvssyntax.Node{Family: model.IPv4}
	var err error
	if n.Services, err = ipvssyntax.ParseRulesBytes(vf.Name, vf.Data); err != nil {
		return nil, err
	}
	if n.Sets, err = ipvssyntax.ParseSetsBytes(sf.Name, sf.Data); err != nil {
		return nil, err
	}
	for _, vs := range n.Services {
		if vs.Address.Addr().Is6() {
			n.Family = model.IPv6
		}
	}
	rs, err := iptsyntax.ParseBytes(tf.Name, tf.Data)
	if err != nil {
		return nil, err
	}
	return NewIPVS(n, rs, host)
}

// NewNFTRuleset traces every kube-proxy table of a ruleset, each packet through the
// table of its family.
func NewNFTRuleset(rs *nftsyntax.Ruleset, host Host) (Tracer, error) {
	ft := familyTracer{}
	for family, st := range rs.Tables {
		t, err := NewNFT(st, host)
		if err != nil {
			return nil, err
		}
		if family == knftables.IPv6Family {
			ft.v6 = t
		} else {
			ft.v4 = t
		}
	}
	return ft, nil
}

// familyTracer sends each packet to the tracer of its family.
type familyTracer struct{ v4, v6 Tracer }

func (f familyTracer) Trace(p Packet) (*Result, error) {
	t := f.v4
	if p.Dst.Is6() {
		t = f.v6
	}
	if t == nil {
		return nil, fmt.Errorf("the ruleset has no kube-proxy table for %s", p.Dst)
	}
	return t.Trace(p)
}
