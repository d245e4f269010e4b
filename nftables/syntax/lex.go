package syntax

import (
	"bytes"
	"slices"
	"strings"
)

// The words of a rule's text. Every reader of rule text goes through this lexer: the
// rule parser (ParseRule), the canonical form (Canonical), the respelling of nft's
// listing (respell) and the references a script's rules make (ruleRefs).

// lexer splits a rule into tokens: words, the delimiters "{", "}" and ",", and quoted
// strings (with their quotes). A token is a piece of the text: it allocates nothing.
type lexer struct {
	s string
	i int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// ends marks the bytes that end a word: spaces, delimiters, a quote.
var ends = [256]bool{' ': true, '\t': true, '{': true, '}': true, ',': true, '"': true}

// next returns the next token, "" at the end.
func (l *lexer) next() string {
	for l.i < len(l.s) && isSpace(l.s[l.i]) {
		l.i++
	}
	if l.i >= len(l.s) {
		return ""
	}
	start := l.i
	switch l.s[l.i] {
	case '{', '}', ',':
		l.i++
	case '"':
		for l.i++; l.i < len(l.s) && l.s[l.i] != '"'; l.i++ {
			if l.s[l.i] == '\\' {
				l.i++
			}
		}
		l.i = min(l.i+1, len(l.s))
	default:
		for l.i < len(l.s) && !ends[l.s[l.i]] {
			l.i++
		}
	}
	return l.s[start:l.i]
}

// tokens is every token of a rule.
func tokens(rule string) []string {
	out := make([]string, 0, 16)
	for l := (lexer{s: rule}); ; {
		t := l.next()
		if t == "" {
			return out
		}
		out = append(out, t)
	}
}

// unquote takes the quotes off a quoted token (nft quotes without escapes but for \"
// and \\), and leaves any other token as it is.
func unquoteToken(t string) string {
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return t
	}
	t = t[1 : len(t)-1]
	if strings.IndexByte(t, '\\') < 0 {
		return t
	}
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(t)
}

// RefKind is the kind of object a rule names.
type RefKind string

// Kinds of reference.
const (
	RefChain RefKind = "chain" // jump or goto, also in an anonymous vmap
	RefSet   RefKind = "set"   // "@name" in a lookup or an update: a set, or a map
	RefMap   RefKind = "map"   // "vmap @name", "map @name"
)

// ruleRefs calls f with each object a rule's text names, in order, from its words
// alone: it reads any rule, one the rule parser does not know too, as nf_tables
// checks any rule's references. ("@name" after "map" or "vmap" is a map; any other
// "@name" a set or a map; the word after "jump" or "goto" a chain.)
func ruleRefs(rule string, f func(kind RefKind, name string)) {
	if strings.IndexByte(rule, '@') < 0 && !strings.Contains(rule, "jump ") && !strings.Contains(rule, "goto ") {
		return // most rules name nothing: no need to lex them
	}
	prev := ""
	for l := (lexer{s: rule}); ; {
		t := l.next()
		switch {
		case t == "":
			return
		case len(t) > 1 && t[0] == '@':
			if prev == "map" || prev == "vmap" {
				f(RefMap, t[1:])
			} else {
				f(RefSet, t[1:])
			}
		case prev == "jump" || prev == "goto":
			f(RefChain, t)
		}
		prev = t
	}
}

// Canonical is a rule's text with what nft's listing may change about it undone: its
// words single spaced, an anonymous set's entries sorted and joined by ",", a set of
// addresses merged as the kernel merges an interval set (see mergeAddresses), and a
// one-entry anonymous set written without braces ("ip daddr { 10.0.0.0/8 }" lists as
// "ip daddr 10.0.0.0/8"). Two rules with the same canonical text do the same: it is
// the key diff and audit compare rules by, and what a sync compares when the text
// differs.
func Canonical(rule string) string {
	if !strings.ContainsAny(rule, "{},\"\t") && !strings.Contains(rule, "  ") {
		return strings.TrimSpace(rule)
	}
	var b strings.Builder
	toks := tokens(rule)
	for i := 0; i < len(toks); i++ {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if toks[i] != "{" {
			b.WriteString(toks[i])
			continue
		}
		entries, end := group(toks, i+1)
		if merged, ok := mergeAddresses(entries); ok {
			entries = merged
		}
		slices.Sort(entries)
		body := strings.Join(entries, ",")
		if len(entries) == 1 && !strings.Contains(body, " ") {
			b.WriteString(body)
		} else {
			b.WriteString("{ " + body + " }")
		}
		i = end
	}
	return b.String()
}

// group reads the entries of "{ a , b c }" from toks[start] (after the brace), each
// entry's tokens joined by spaces, and returns them with the index of the closing
// brace (len(toks) when it is missing). Nested braces stay inside their entry.
func group(toks []string, start int) (entries []string, end int) {
	var cur []string
	depth := 0
	for end = start; end < len(toks); end++ {
		switch t := toks[end]; {
		case t == "}" && depth == 0:
			if len(cur) > 0 {
				entries = append(entries, strings.Join(cur, " "))
			}
			return entries, end
		case t == "," && depth == 0:
			entries = append(entries, strings.Join(cur, " "))
			cur = cur[:0]
		default:
			depth += strings.Count(t, "{") - strings.Count(t, "}")
			cur = append(cur, t)
		}
	}
	if len(cur) > 0 {
		entries = append(entries, strings.Join(cur, " "))
	}
	return entries, end
}

// respellings are what nft's listing writes for what kube-proxy (knftables) writes,
// token by token: the mark expressions, and v1.36's DNAT through a numgen map, whose
// "addr . port" nft leaves out.
var respellings = []struct{ listed, written []string }{
	{[]string{"dnat", "ip", "to", "numgen"}, []string{"dnat", "ip", "addr", ".", "port", "to", "numgen"}},
	{[]string{"dnat", "ip6", "to", "numgen"}, []string{"dnat", "ip6", "addr", ".", "port", "to", "numgen"}},
	{[]string{"meta", "mark", "set", "meta", "mark", "|"}, []string{"mark", "set", "mark", "or"}},
	{[]string{"meta", "mark", "set", "meta", "mark", "^"}, []string{"mark", "set", "mark", "xor"}},
	{[]string{"meta", "mark", "set", "meta", "mark", "&"}, []string{"mark", "set", "mark", "and"}},
	{[]string{"meta", "mark", "&"}, []string{"mark", "and"}},
}

// respell turns a rule as nft lists it back into the text knftables writes, where the
// listing only respells it: mark expressions ("meta mark set meta mark | 0x4000" is
// "mark set mark or 0x4000", "meta mark & 0x4000 == 0x00000000" is "mark and 0x4000
// == 0"), quoted interface names, and ", " between the entries of an anonymous set
// or map (knftables writes " , ").
func respell(listed string) string {
	toks := tokens(listed)
	out := make([]string, 0, len(toks))
	for i := 0; i < len(toks); i++ {
		if r := respelling(toks[i:]); r >= 0 {
			out = append(out, respellings[r].written...)
			i += len(respellings[r].listed) - 1
			continue
		}
		t := toks[i]
		switch prev := at(out, len(out)-1); {
		case prev == "iifname" || prev == "oifname" || prev == "!=" && (at(out, len(out)-2) == "iifname" || at(out, len(out)-2) == "oifname"):
			t = unquoteToken(t)
		case (prev == "==" || prev == "!=") && at(out, len(out)-3) == "and" && isZeroHex(t):
			t = "0" // the value of a mark test: "0x00000000"
		}
		out = append(out, t)
	}
	return strings.Join(out, " ")
}

// respelling is the index of the respelling toks start with, -1 for none.
func respelling(toks []string) int {
	for i, r := range respellings {
		if len(toks) >= len(r.listed) && slices.Equal(toks[:len(r.listed)], r.listed) {
			return i
		}
	}
	return -1
}

// at is toks[i], "" when out of range.
func at(toks []string, i int) string {
	if i < 0 || i >= len(toks) {
		return ""
	}
	return toks[i]
}

func isZeroHex(t string) bool {
	rest, ok := strings.CutPrefix(t, "0x")
	return ok && rest != "" && strings.Trim(rest, "0") == ""
}

// HasAnonymousSet reports a rule with an anonymous set or map ("vmap { 0 : goto ... }",
// "ip saddr != { ... }"); "update @set { ip saddr }" names a set and makes none. (It
// reads svcgen's own spelling, for speed: the staged script's split.)
func HasAnonymousSet(rule []byte) bool {
	return bytes.Contains(rule, []byte("{ ")) && !bytes.HasPrefix(rule, []byte("update "))
}
