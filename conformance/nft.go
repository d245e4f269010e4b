package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// CanonicalNFT puts "nft list table" output in one order, one statement a line,
// each line naming the object it belongs to so that a line of a diff says where it
// is: "table ip kube-proxy", then the table's own statements ("table: comment ..."),
// then its chains, sets, maps and other objects sorted by name, each as its header
// line ("chain services") followed by its statements ("chain services: ip daddr
// ..."), a set's or map's elements one a line, sorted ("set cluster-ips: element
// 172.30.0.41"). kube-proxy adds objects and elements in Go map order and nft lists
// them in the order the kernel keeps; rules inside a chain keep their order.
// Counter values are zeroed.
func CanonicalNFT(listing string) (string, error) {
	lines := strings.Split(counters.ReplaceAllString(listing, "packets 0 bytes 0"), "\n")
	var out []string
	var blocks [][]string
	var block []string
	depth := 0
	for n := 0; n < len(lines); n++ {
		line := strings.TrimSpace(lines[n])
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "elements = {") && len(block) > 0 {
			elems, next, err := joinElements(lines, n)
			if err != nil {
				return "", err
			}
			n = next
			for _, e := range elems {
				block = append(block, block[0]+": element "+e)
			}
			continue
		}
		d := braceDelta(line)
		switch {
		case depth == 0 && d > 0:
			out = append(out, strings.TrimSpace(strings.TrimSuffix(line, "{")))
		case depth == 1 && d > 0:
			block = []string{strings.TrimSpace(strings.TrimSuffix(line, "{"))}
		case depth == 2 && d < 0:
			blocks = append(blocks, block)
			block = nil
		case depth == 1 && d == 0:
			out = append(out, "table: "+line)
		case depth >= 2 && len(block) > 0:
			block = append(block, block[0]+": "+line)
		case d == 0:
			return "", fmt.Errorf("line %d: %q outside a table", n+1, line)
		}
		depth += d
		if depth < 0 {
			return "", fmt.Errorf("line %d: unbalanced braces", n+1)
		}
	}
	if depth != 0 {
		return "", fmt.Errorf("unbalanced braces at the end of the listing")
	}
	slices.SortFunc(blocks, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	for _, b := range blocks {
		out = append(out, b...)
	}
	return strings.Join(out, "\n") + "\n", nil
}

var counters = regexp.MustCompile(`packets \d+ bytes \d+`)

// joinElements reads an "elements = { ... }" that may span lines from lines[n], and
// returns its elements, sorted, with the index of its last line.
func joinElements(lines []string, n int) ([]string, int, error) {
	var text strings.Builder
	start := n
	for ; n < len(lines); n++ {
		text.WriteString(strings.TrimSpace(lines[n]) + " ")
		if braceDelta(text.String()) == 0 {
			break
		}
	}
	if n == len(lines) {
		return nil, 0, fmt.Errorf("line %d: elements without their closing brace", start+1)
	}
	body := strings.TrimSpace(text.String())
	body = strings.TrimSuffix(strings.TrimPrefix(body, "elements = {"), "}")
	elems := splitTopLevel(body)
	slices.Sort(elems)
	return elems, n, nil
}

// braceDelta counts { minus } outside double quotes.
func braceDelta(s string) int {
	d, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case '{':
			if !quoted {
				d++
			}
		case '}':
			if !quoted {
				d--
			}
		}
	}
	return d
}

// splitTopLevel splits at commas outside quotes and braces, trimming each part.
func splitTopLevel(s string) []string {
	var parts []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case '{':
			if !quoted {
				depth++
			}
		case '}':
			if !quoted {
				depth--
			}
		case ',':
			if !quoted && depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		parts = append(parts, last)
	}
	return parts
}

// CanonicalLines is text with comments and blank lines dropped and the rest sorted:
// for outputs whose order means nothing (ipvsadm -Sn, ipset save, addresses,
// sysctls). ipset's random per-set initval is dropped.
func CanonicalLines(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(initval.ReplaceAllString(line, ""))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return strings.Join(out, "\n") + "\n"
}

var initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)
