package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/svcgen/svcgen/emit/iptables"
	"github.com/svcgen/svcgen/ir"
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
	return "", fmt.Errorf("the ruleset is empty")
}

var nftObjects = map[string]bool{"table": true, "chain": true, "rule": true, "set": true, "map": true, "element": true}

// File is one ruleset file; Name is used in errors.
type File struct {
	Name string
	Data []byte
}

// Open reads ruleset files into a tracer for a node with the given addresses. Each
// file's format is detected; together they must make up one mode's ruleset.
func Open(files []File, host Host) (Tracer, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("no ruleset given")
	}
	byFormat := map[Format][]File{}
	for _, f := range files {
		format, err := DetectFormat(f.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		byFormat[format] = append(byFormat[format], f)
	}
	switch {
	case len(byFormat) == 1 && len(byFormat[IPTablesText]) == 1:
		f := byFormat[IPTablesText][0]
		rs, err := iptables.ParseBytes(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		return NewIPTables(rs, host)
	case len(byFormat[IPTablesText]) > 1:
		return nil, fmt.Errorf("%s and %s: two iptables rulesets; give one (iptables-save prints every table)", byFormat[IPTablesText][0].Name, byFormat[IPTablesText][1].Name)
	}
	for _, f := range files {
		format, _ := DetectFormat(f.Data)
		if format != IPTablesText {
			return nil, fmt.Errorf("%s: %s rulesets cannot be traced by this version of svcgen (iptables can)", f.Name, format)
		}
	}
	return nil, fmt.Errorf("no ruleset given")
}

// ForMap writes a compiled service map in a mode's syntax, reads the text back as a
// node would hold it, and returns a tracer over it: what svcgen traces when it is given
// manifests instead of rules.
func ForMap(mode string, sm *ir.ServiceMap, host Host) (Tracer, error) {
	switch mode {
	case "iptables":
		var b bytes.Buffer
		if err := iptables.Write(&b, sm, iptables.Options{Format: iptables.Complete}); err != nil {
			return nil, fmt.Errorf("writing iptables rules: %w", err)
		}
		rs, err := iptables.ParseBytes("iptables rules", b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("reading back iptables rules: %w", err)
		}
		return NewIPTables(rs, host)
	}
	return nil, fmt.Errorf("mode %s: svcgen cannot trace it in this version (it traces %s)", mode, strings.Join(MapModes, ", "))
}

// MapModes are the modes ForMap traces.
var MapModes = []string{"iptables"}
