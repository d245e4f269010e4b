// Package fastyaml is the loader's fast YAML reader; its one call is Read.
//
// It reads the YAML that manifests are written in nearly always: block mappings and
// sequences indented with spaces (kubectl's "key:\n- item" included), flow
// collections over one or more lines (so JSON too, though the loader reads a JSON
// file with jsontext first), plain, single- and double-quoted scalars on one line,
// literal block scalars (kubectl's last-applied-configuration), comments and "---"
// between documents. It is several times faster than yaml.v3, and allocates little:
// collections take their children's memory from a slab that the caller lets it reuse
// from one document to the next (tree.Builder).
//
// It is not a second YAML implementation: on anything else (anchors, aliases, tags,
// folded or multi-line scalars, complex keys, tabs, CR line ends, directives, "...",
// YAML escapes beyond JSON's, odd indentation, syntax errors) it gives up, and the
// input is read again by yaml.v3, which also words the syntax errors. On what it
// accepts it must build the tree yaml.v3 builds, with the same document numbers: the
// tests compare the two readers on every manifest in the repository, on generated
// clusters, and under fuzzing.
//
// The loader reaches yaml.v3 without it when SVCGEN_YAML=reference (see load.Reader).
package fastyaml

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svcgen/svcgen/load/internal/tree"
)

// Read calls doc with each document of src and its number (counted as yaml.v3
// counts them). It returns false, possibly after some calls, when src is outside the
// subset; the caller then discards what doc did and reads src with yaml.v3.
//
// With item set, the items of a top-level "items" list (a kind: List, as kubectl
// prints one) go to item one by one as they are read, and the list node is left
// empty with Streamed set: a large List is never held whole.
//
// With slab set, the memory of a document's tree (and of each streamed item) is
// taken from *slab, used again for the next one and left there for the next call, so
// doc and item must not keep any node (see tree.Builder.Reuse).
func Read(src string, doc func(doc int, n *tree.Node), item func(doc, i int, n *tree.Node), slab *[]tree.Node) (ok bool) {
	if !plainText(src) {
		return false
	}
	r := &fastReader{src: src}
	r.Item = item
	r.Reuse(slab)
	defer r.Release(slab)
	defer tree.Recover(&ok)
	for n := 1; ; n++ {
		r.StartDocument(n)
		d, more := r.document()
		if !more {
			return true
		}
		doc(n, &d)
		r.EndDocument()
	}
}

// plainText reports whether src holds only characters both readers treat alike: no
// control characters but tab and LF (CR ends lines too, even inside comments), valid
// UTF-8 without the characters YAML 1.1 counts as line breaks (NEL, U+2028, U+2029),
// the byte-order mark or non-characters.
func plainText(src string) bool {
	for i := 0; i < len(src); {
		// Eight printable ASCII characters at a time: most of any manifest.
		if i+8 <= len(src) && printable8(src[i:i+8]) {
			i += 8
			continue
		}
		c := src[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError || r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff ||
			(r >= 0xd800 && r <= 0xdfff) || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

// printable8 reports whether eight bytes are all printable ASCII (0x20 to 0x7e): none
// below 0x20 (b-0x20 borrows into the high bit), none at 0x7f or above (b+1, or b
// itself, has the high bit). A borrow or carry from one byte into the next comes only
// from a byte that fails already.
func printable8(s string) bool {
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	return ((w-0x2020202020202020)|(w+0x0101010101010101)|w)&0x8080808080808080 == 0
}

// spaces counts the spaces at s[p:], eight at a time while it can (indentation is
// most of kubectl's JSON).
func spaces(s string, p int) int {
	i := p
	for i+8 <= len(s) && s[i:i+8] == "        " {
		i += 8
	}
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i - p
}

// fastReader reads one input; the tree.Builder builds what it reads.
type fastReader struct {
	tree.Builder
	src string
	// pos is the start of the line being read (block context).
	pos int
}

func giveUp() { tree.GiveUp() }

// document reads the next document: false at the end of the input.
func (r *fastReader) document() (tree.Node, bool) {
	r.skipBlank()
	explicit := false
	if r.marker() {
		explicit = true
		r.pos = r.endLine(r.pos + 3)
		r.skipBlank()
	}
	if r.pos >= len(r.src) || r.marker() {
		// An empty document counts when "---" opened it.
		return tree.NullNode, explicit
	}
	n := r.block(-1, false)
	r.skipBlank()
	if r.pos < len(r.src) && !r.marker() {
		giveUp()
	}
	return n, true
}

// marker reports a "---" line at r.pos; "..." and directives give up.
func (r *fastReader) marker() bool {
	s := r.src[r.pos:]
	if len(s) == 0 {
		return false
	}
	if s[0] == '%' || strings.HasPrefix(s, "...") {
		giveUp()
	}
	return strings.HasPrefix(s, "---") && (len(s) == 3 || s[3] == ' ' || s[3] == '\n')
}

// skipBlank moves r.pos over empty lines and lines holding only a comment.
func (r *fastReader) skipBlank() {
	for r.pos < len(r.src) {
		p := r.pos
		for p < len(r.src) && r.src[p] == ' ' {
			p++
		}
		if p == len(r.src) {
			r.pos = p
			return
		}
		switch r.src[p] {
		case '\n':
			r.pos = p + 1
		case '#':
			r.pos = r.nextLine(p)
		case '\t', '\r':
			giveUp()
		default:
			return
		}
	}
}

// nextLine is the start of the line after the one holding p.
func (r *fastReader) nextLine(p int) int {
	if i := strings.IndexByte(r.src[p:], '\n'); i >= 0 {
		return p + i + 1
	}
	return len(r.src)
}

// endLine checks that only spaces and a comment follow p on its line and returns the
// start of the next line.
func (r *fastReader) endLine(p int) int {
	start := p
	for p < len(r.src) && r.src[p] == ' ' {
		p++
	}
	switch {
	case p == len(r.src):
		return p
	case r.src[p] == '\n':
		return p + 1
	case r.src[p] == '#' && (p > start || p > 0 && r.src[p-1] == ' '):
		return r.nextLine(p)
	}
	giveUp()
	return 0
}

// indent counts the spaces that start the line at r.pos.
func (r *fastReader) indent() int { return spaces(r.src, r.pos) }

// seqEntry reports a block sequence entry ("-" then a space or the line end) at p.
func (r *fastReader) seqEntry(p int) bool {
	return r.src[p] == '-' && (p+1 == len(r.src) || r.src[p+1] == ' ' || r.src[p+1] == '\n')
}

// maxKey is below the longest key yaml.v3 reads (a "simple key" spans at most 1024
// characters).
const maxKey = 1000

// block reads a value that starts on a line of its own, indented more than parent
// (a sequence may also sit at the parent's indentation, after a mapping key, when
// seqSame). Without such a line the value is null.
func (r *fastReader) block(parent int, seqSame bool) tree.Node {
	r.skipBlank()
	if r.pos >= len(r.src) || r.marker() {
		return tree.NullNode
	}
	i := r.indent()
	p := r.pos + i
	isSeq := r.seqEntry(p)
	if i < parent || i == parent && !(seqSame && isSeq) {
		return tree.NullNode
	}
	if isSeq {
		return r.sequence(i)
	}
	if r.keyEnd(p) >= 0 {
		return r.mapping(i, p)
	}
	n, end := r.inline(p, parent)
	r.pos = r.endLine(end)
	return n
}

// mapping reads a block mapping whose keys start at column ind; the first key starts at
// p (inside the line when the mapping is a sequence entry: "- key: value").
func (r *fastReader) mapping(ind, p int) tree.Node {
	mark := r.Open()
	for {
		colon := r.keyEnd(p)
		if colon < 0 {
			giveUp()
		}
		if colon-p > maxKey {
			giveUp()
		}
		key := r.key(p, colon)
		stream := r.StreamItems(&key)
		var v tree.Node
		q := colon + 1
		for q < len(r.src) && r.src[q] == ' ' {
			q++
		}
		if q == len(r.src) || r.src[q] == '\n' || r.src[q] == '#' {
			r.pos = r.endLine(colon + 1)
			v = r.block(ind, true)
		} else {
			var end int
			v, end = r.inline(q, ind)
			r.pos = r.endLine(end)
		}
		if stream {
			r.StopItems()
		}
		r.Pair(key, v)
		if !r.sameLevel(ind) {
			return r.End(tree.Mapping, mark)
		}
		p = r.pos + ind
		if r.seqEntry(p) {
			giveUp()
		}
	}
}

// sameLevel reports whether the next line goes on at column ind; a line indented
// more (a scalar's continuation, or bad indentation) gives up.
func (r *fastReader) sameLevel(ind int) bool {
	r.skipBlank()
	if r.pos >= len(r.src) || r.marker() {
		return false
	}
	i := r.indent()
	if i > ind {
		giveUp()
	}
	return i == ind
}

// sequence reads a block sequence whose "-" entries are at column ind.
func (r *fastReader) sequence(ind int) tree.Node {
	mark := r.Open()
	for {
		p := r.pos + ind + 1
		for p < len(r.src) && r.src[p] == ' ' {
			p++
		}
		var v tree.Node
		switch {
		case p == len(r.src) || r.src[p] == '\n' || r.src[p] == '#':
			r.pos = r.endLine(r.pos + ind + 1)
			v = r.block(ind, false)
		case r.seqEntry(p):
			giveUp() // "- - item"
		case r.keyEnd(p) >= 0:
			v = r.mapping(p-r.pos, p)
		default:
			var end int
			v, end = r.inline(p, ind)
			r.pos = r.endLine(end)
		}
		r.Push(v)
		if !r.sameLevel(ind) || !r.seqEntry(r.pos+ind) {
			return r.End(tree.Sequence, mark)
		}
	}
}

// keyEnd finds the ':' that ends a mapping key starting at p on this line, -1 when the
// line holds no key there.
func (r *fastReader) keyEnd(p int) int {
	s := r.src
	switch s[p] {
	case '"', '\'':
		_, end := r.quoted(p)
		if end < len(s) && s[end] == ':' && (end+1 == len(s) || s[end+1] == ' ' || s[end+1] == '\n') {
			return end
		}
		return -1
	}
	if !plainStart(s, p, false) {
		return -1
	}
	for q := p; q < len(s); q++ {
		switch s[q] {
		case '\n':
			return -1
		case ':':
			if q+1 == len(s) || s[q+1] == ' ' || s[q+1] == '\n' {
				return q
			}
		case '#':
			if s[q-1] == ' ' {
				return -1
			}
		case '\t', '\r':
			giveUp()
		}
	}
	return -1
}

// key reads the key from p to the colon.
func (r *fastReader) key(p, colon int) tree.Node {
	if c := r.src[p]; c == '"' || c == '\'' {
		n, _ := r.quoted(p)
		return n
	}
	return tree.Plain(strings.TrimRight(r.src[p:colon], " "))
}

// inline reads a value that starts at p inside a line of a block at column ind:
// a flow collection (which may go on over more-indented lines), a quoted or plain
// scalar, or a literal block scalar. It returns the offset after the value.
func (r *fastReader) inline(p, ind int) (tree.Node, int) {
	s := r.src
	switch s[p] {
	case '[', '{':
		return r.flow(p, ind)
	case '"', '\'':
		return r.quoted(p)
	case '|':
		if ind < 0 {
			giveUp() // a document that is only a block scalar
		}
		return r.literal(p, ind)
	}
	if !plainStart(s, p, false) {
		giveUp()
	}
	end, q := p, p
	for ; q < len(s) && s[q] != '\n'; q++ {
		switch s[q] {
		case ':':
			if q+1 == len(s) || s[q+1] == ' ' || s[q+1] == '\n' {
				giveUp() // "a: b: c", a mapping where a scalar must be
			}
		case '#':
			if s[q-1] == ' ' {
				return tree.Plain(s[p:end]), q
			}
		case '\t', '\r':
			giveUp()
		case ' ':
			continue
		}
		end = q + 1
	}
	return tree.Plain(s[p:end]), q
}

// plainStart reports whether a plain scalar may start at p: not with an indicator,
// except "-" (and outside flow collections "?" and ":") followed by a character that
// is not a space.
func plainStart(s string, p int, flow bool) bool {
	switch s[p] {
	case '?', ':':
		if flow {
			return false
		}
		fallthrough
	case '-':
		return p+1 < len(s) && s[p+1] != ' ' && s[p+1] != '\n' && !(flow && isFlowIndicator(s[p+1]))
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ', '\n', '\t', '\r':
		return false
	}
	return true
}

func isFlowIndicator(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}

// quoted reads a single- or double-quoted scalar on one line; double quotes take
// JSON's escapes. It returns the offset after the closing quote.
func (r *fastReader) quoted(p int) (tree.Node, int) {
	s := r.src
	q := s[p]
	var b []byte // nil until an escape needs a copy
	start := p + 1
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n' || c == '\r':
			giveUp()
		case c == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b = append(append(b, s[start:i]...), '\'')
			i++
			start = i + 1
		case c == q:
			v := s[start:i]
			if b != nil {
				v = string(append(b, v...))
			}
			return tree.Node{Kind: tree.Scalar, Tag: tree.Str, Value: v}, i + 1
		case c == '\\' && q == '"':
			b = append(b, s[start:i]...)
			var n int
			b, n = unescape(b, s[i:])
			i += n - 1
			start = i + 1
		}
	}
	giveUp()
	return tree.Node{}, 0
}

// unescape appends the character a JSON escape at the start of s stands for and
// returns how many bytes the escape took.
func unescape(b []byte, s string) ([]byte, int) {
	if len(s) < 2 {
		giveUp()
	}
	switch s[1] {
	case '"', '\\':
		return append(b, s[1]), 2
	case 'b':
		return append(b, '\b'), 2
	case 'f':
		return append(b, '\f'), 2
	case 'n':
		return append(b, '\n'), 2
	case 'r':
		return append(b, '\r'), 2
	case 't':
		return append(b, '\t'), 2
	case 'u':
		if len(s) < 6 {
			giveUp()
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		if err != nil || v >= 0xd800 && v <= 0xdfff || v == 0 {
			giveUp()
		}
		return utf8.AppendRune(b, rune(v)), 6
	}
	giveUp()
	return nil, 0
}

// literal reads a literal block scalar ("|", "|-" or "|+") of a value in a block at
// column ind. Its lines are indented as its first line is, more than ind.
func (r *fastReader) literal(p, ind int) (tree.Node, int) {
	s := r.src
	chomp := byte(0)
	q := p + 1
	if q < len(s) && (s[q] == '-' || s[q] == '+') {
		chomp = s[q]
		q++
	}
	line := r.endLine(q)
	var b strings.Builder
	indent, breaks := -1, 0
	for line < len(s) {
		i := 0
		for line+i < len(s) && s[line+i] == ' ' {
			i++
		}
		end := r.nextLine(line)
		text := s[line+i : end]
		if text == "" {
			giveUp() // spaces without a line break end the input
		}
		if text == "\n" {
			if indent < 0 || i > indent {
				giveUp() // leading empty lines, or spaces that would be content
			}
			breaks++
			line = end
			continue
		}
		if indent < 0 {
			if i <= ind {
				break
			}
			indent = i
		}
		if i < indent || r.marker0(line) {
			break
		}
		if strings.ContainsAny(text, "\t\r") {
			giveUp()
		}
		for ; breaks > 0; breaks-- {
			b.WriteByte('\n')
		}
		if !strings.HasSuffix(text, "\n") {
			giveUp() // the input ends inside the scalar, without a line break
		}
		b.WriteString(s[line+indent : end])
		line = end
	}
	if indent < 0 {
		giveUp() // an empty literal
	}
	v := b.String()
	switch chomp {
	case '-':
		v = strings.TrimSuffix(v, "\n")
	case '+':
		v += strings.Repeat("\n", breaks)
	}
	// The reader goes on at the line after the scalar: return the line break before
	// it, which endLine accepts.
	return tree.Node{Kind: tree.Scalar, Tag: tree.Str, Value: v}, line - 1
}

// marker0 reports a document marker at the start of the line at p.
func (r *fastReader) marker0(p int) bool {
	s := r.src[p:]
	return strings.HasPrefix(s, "---") || strings.HasPrefix(s, "...")
}

// flow reads a flow collection at p, in a block at column ind: lines it goes on to
// must be indented more than ind.
func (r *fastReader) flow(p, ind int) (tree.Node, int) {
	s := r.src
	open := s[p]
	kind, close := tree.Sequence, byte(']')
	if open == '{' {
		kind, close = tree.Mapping, '}'
	}
	mark := r.Open()
	p = r.flowSpace(p+1, ind)
	if s[p] == close {
		return r.End(kind, mark), p + 1
	}
	for {
		var k tree.Node
		stream := false
		if kind == tree.Mapping {
			var q int
			k, q = r.flowScalar(p, ind)
			if q-p > maxKey {
				giveUp()
			}
			q = r.flowSpace(q, ind)
			if s[q] != ':' {
				giveUp()
			}
			p = r.flowSpace(q+1, ind)
			if s[p] == ',' || s[p] == '}' {
				giveUp()
			}
			stream = r.StreamItems(&k)
		}
		v, q := r.flowValue(p, ind)
		if kind == tree.Mapping {
			if stream {
				r.StopItems()
			}
			r.Pair(k, v)
		} else {
			r.Push(v)
		}
		p = r.flowSpace(q, ind)
		switch s[p] {
		case ',':
			p = r.flowSpace(p+1, ind)
			if s[p] == close {
				return r.End(kind, mark), p + 1
			}
			if s[p] == ',' {
				giveUp()
			}
		case close:
			return r.End(kind, mark), p + 1
		default:
			giveUp()
		}
	}
}

// flowValue reads a value inside a flow collection.
func (r *fastReader) flowValue(p, ind int) (tree.Node, int) {
	switch r.src[p] {
	case '[', '{':
		return r.flow(p, ind)
	}
	return r.flowScalar(p, ind)
}

// flowScalar reads a quoted or plain scalar inside a flow collection.
func (r *fastReader) flowScalar(p, ind int) (tree.Node, int) {
	s := r.src
	if c := s[p]; c == '"' || c == '\'' {
		return r.quoted(p)
	}
	if !plainStart(s, p, true) {
		giveUp()
	}
	end, q := p, p
loop:
	for ; q < len(s); q++ {
		switch s[q] {
		case '\n', ',', '[', ']', '{', '}':
			break loop
		case ':':
			if q+1 == len(s) || s[q+1] == ' ' || s[q+1] == '\n' {
				break loop
			}
			if isFlowIndicator(s[q+1]) {
				giveUp() // "{a:}" and the like: YAML and JSON disagree
			}
		case '?':
			giveUp() // yaml.v3 ends a plain scalar there, YAML 1.2 does not
		case '#':
			if s[q-1] == ' ' {
				break loop
			}
		case '\t', '\r':
			giveUp()
		case ' ':
			continue
		}
		end = q + 1
	}
	n := tree.Plain(s[p:end])
	if q < len(s) && s[q] == '\n' {
		// A plain scalar does not go on over lines here (it could in YAML).
		next := r.flowSpace(q, ind)
		if c := s[next]; c != ',' && c != ']' && c != '}' {
			giveUp()
		}
	}
	return n, end
}

// flowSpace skips spaces, comments and line breaks inside a flow collection and
// returns the next offset, which holds a character; the end of the input gives up.
func (r *fastReader) flowSpace(p, ind int) int {
	s := r.src
	for p < len(s) {
		switch s[p] {
		case ' ':
			p++
		case '#':
			if p > 0 && s[p-1] != ' ' && s[p-1] != '\n' {
				return p
			}
			p = r.nextLine(p) - 1
			if p < len(s) && s[p] != '\n' {
				p = len(s)
			}
		case '\n':
			p++
			i := spaces(s, p)
			if p+i < len(s) && s[p+i] != '\n' && s[p+i] != '#' && (i <= ind || r.marker0(p)) {
				giveUp()
			}
			p += i
		case '\t', '\r':
			giveUp()
		default:
			return p
		}
	}
	giveUp()
	return 0
}
