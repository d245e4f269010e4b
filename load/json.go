package load

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/svcgen/svcgen/load/internal/tree"
)

// Input whose first character is "{" or "[" is read first as JSON (kubectl's
// "get -o json", a List of thousands of objects most of the time) with jsontext, the
// tokenizer of Go's encoding/json/v2 (in Go 1.26's standard library only under
// GOEXPERIMENT=jsonv2, so the module it grew in). It checks the grammar as it goes
// and leaves svcgen to build the tree with the fast YAML reader's tree.Builder:
// collections take their memory from its slab, and a List's items are handed on one
// by one as the fast YAML reader hands them. A file is read as a stream, never whole: the scalars are copied side by
// side into blocks (see keeper), garbage once their items are decoded (the walker
// keeps what the model needs), so reading 46 MB of JSON takes a few megabytes.
//
// The tree is the one yaml.v3 builds for the same text (JSON is YAML; numbers are
// typed by tree.ResolvePlain), but where yaml.v3 does not read JSON as JSON: it refuses
// the escape \/, a tab before the value and keys of more than 1024 characters, and
// reads a surrogate pair in \u escapes as two characters. Anything that is not
// exactly one JSON value (YAML flow style such as {a: 1}, "---" after the value,
// comments, syntax errors, nesting deeper than tree.MaxDepth, a repeated key) gives
// up, and the input is read as YAML: a syntax error is worded by yaml.v3, with its
// line.

// looksJSON reports whether src starts, after white space, with "{" or "[".
func looksJSON(src string) bool {
	s := strings.TrimLeft(src, " \t\r\n")
	return s != "" && (s[0] == '{' || s[0] == '[')
}

// readJSON reads input holding one JSON value: fn gets it as document 1, item the
// items of its top-level "items" list (fastyaml.Read's shape, its memory reused).
// False when the input is not one JSON value (or cannot be read); fn and item may
// have been called.
func readJSON(in io.Reader, fn func(doc int, n *tree.Node), item func(doc, i int, n *tree.Node)) (ok bool) {
	defer tree.Recover(&ok)
	r := &jsonReader{dec: jsontext.NewDecoder(in, jsontext.AllowDuplicateNames(true))}
	var slab []tree.Node
	r.Reuse(&slab)
	r.Item = item
	r.StartDocument(1)
	n := r.value()
	if _, err := r.dec.ReadToken(); !errors.Is(err, io.EOF) {
		tree.GiveUp() // more after the value, or the value is not JSON
	}
	fn(1, &n)
	return true
}

// jsonReader builds the tree of a JSON value with the fast readers' tree.Builder:
// its stack, slab and List streaming.
type jsonReader struct {
	tree.Builder
	dec *jsontext.Decoder
	// text holds the text of the scalars, packed into blocks that are garbage once
	// the items whose scalars they hold are decoded.
	text     keeper
	unquoted []byte
}

// value reads the next value.
func (r *jsonReader) value() tree.Node {
	switch r.dec.PeekKind() {
	case '{':
		return r.object()
	case '[':
		return r.array()
	case '"':
		return r.string()
	case '0':
		return tree.Plain(r.text.keepBytes(r.raw()))
	case 'n':
		r.token()
		return tree.Node{Kind: tree.Scalar, Tag: tree.Null, Value: "null"}
	case 't', 'f':
		if r.token().Bool() {
			return tree.Node{Kind: tree.Scalar, Tag: tree.Bool, Value: "true"}
		}
		return tree.Node{Kind: tree.Scalar, Tag: tree.Bool, Value: "false"}
	}
	tree.GiveUp() // a syntax error (PeekKind's KindInvalid) or a closing delimiter
	return tree.Node{}
}

func (r *jsonReader) token() jsontext.Token {
	t, err := r.dec.ReadToken()
	if err != nil {
		tree.GiveUp()
	}
	return t
}

func (r *jsonReader) object() tree.Node {
	r.token()
	mark := r.Open()
	for r.dec.PeekKind() == '"' {
		key := r.string()
		stream := r.StreamItems(&key)
		v := r.value()
		if stream {
			r.StopItems()
		}
		r.Pair(key, v)
	}
	if r.token().Kind() != '}' {
		tree.GiveUp()
	}
	return r.End(tree.Mapping, mark)
}

func (r *jsonReader) array() tree.Node {
	r.token()
	mark := r.Open()
	for k := r.dec.PeekKind(); k != ']' && k != jsontext.KindInvalid; k = r.dec.PeekKind() {
		r.Push(r.value())
	}
	r.token() // "]", or the syntax error PeekKind saw
	return r.End(tree.Sequence, mark)
}

// raw reads a scalar and returns its text, valid until the next read.
func (r *jsonReader) raw() []byte {
	v, err := r.dec.ReadValue()
	if err != nil {
		tree.GiveUp()
	}
	return v
}

// string reads a string.
func (r *jsonReader) string() tree.Node {
	q := r.raw()
	var s string
	if v := q[1 : len(q)-1]; bytes.IndexByte(v, '\\') < 0 {
		s = r.text.keepBytes(v)
	} else {
		var err error
		if r.unquoted, err = jsontext.AppendUnquote(r.unquoted[:0], q); err != nil {
			tree.GiveUp()
		}
		s = r.text.keepBytes(r.unquoted)
	}
	return tree.Node{Kind: tree.Scalar, Tag: tree.Str, Value: s}
}
