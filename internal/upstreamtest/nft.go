package upstreamtest

import (
	"sort"
	"strings"
)

// nftObjectOrder ranks object types as kube-proxy's nftables tests do (higher first).
var nftObjectOrder = map[string]int{"table": 10, "chain": 9, "rule": 8, "set": 7, "map": 6, "element": 5}

// SortNFTablesTransaction normalises nft text as kube-proxy's nftables tests do before
// comparing (sortNFTablesTransaction in pkg/proxy/nftables/helpers_test.go): blank and
// "#" lines dropped; lines stable-sorted by object type (table, chain, rule, set, map,
// element), then by object name (the fifth word), then by the whole line, except that
// the rules of one chain keep their order. Lines are kept as written.
func SortNFTablesTransaction(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && l[0] != '#' {
			lines = append(lines, l)
		}
	}
	sort.SliceStable(lines, func(i, j int) bool {
		wi, wj := strings.Split(lines[i], " "), strings.Split(lines[j], " ")
		if len(wi) < 5 || len(wj) < 5 {
			return false
		}
		if wi[1] != wj[1] {
			return nftObjectOrder[wi[1]] > nftObjectOrder[wj[1]]
		}
		if wi[4] != wj[4] {
			return wi[4] < wj[4]
		}
		if wi[1] == "rule" {
			return false
		}
		return lines[i] < lines[j]
	})
	return strings.Join(lines, "\n")
}
