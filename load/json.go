package load

import (
	"errors"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Input whose first character is "{" or "[" is read first as JSON (kubectl's
// "get -o json", a List of thousands of objects most of the time) with jsontext, the
// tokenizer of Go's encoding/json/v2 (in Go 1.26's standard library only under
// GOEXPERIMENT=jsonv2, so the module it grew in). It checks the grammar as it goes
// and leaves svcgen to build the tree: scalars are pieces of the input (no copy but
// for strings with escapes), collections take their memory from the fast reader's
// slab, and a List's items are handed on one by one as the fast reader hands them.
//
// The tree is the one yaml.v3 builds for the same text (JSON is YAML; numbers are
// typed by resolvePlain), but where yaml.v3 does not read JSON as JSON: it refuses
// the escape \/, a tab before the value and keys of more than 1024 characters, and
// reads a surrogate pair in \u escapes as two characters. Anything that is not exactly one JSON value (YAML flow
// style such as {a: 1}, "---" after the value, comments, syntax errors, nesting
// deeper than maxDepth) gives up, and the input is read as YAML, as before: a syntax
// error is worded by yaml.v3, with its line.

// looksJSON reports whether src starts, after white space, with "{" or "[".
func looksJSON(src string) bool {
	s := strings.TrimLeft(src, " \t\r\n")
	return s != "" && (s[0] == '{' || s[0] == '[')
}

// readJSON is readFastInto (with reuse) for src holding one JSON value: fn gets it as
// document 1, item the items of its top-level "items" list. False when src is not
// one JSON value; fn and item may have been called.
func readJSON(src string, fn func(doc int, n *node), item func(doc, i int, n *node)) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, is := v.(notFast); !is {
				panic(v)
			}
			ok = false
		}
	}()
	r := &jsonReader{
		fastReader: fastReader{src: src, item: item, reuse: true, doc: 1},
		dec:        jsontext.NewDecoder(strings.NewReader(src), jsontext.AllowDuplicateNames(true)),
	}
	n := r.value()
	if _, err := r.dec.ReadToken(); !errors.Is(err, io.EOF) {
		giveUp() // more after the value, or the value is not JSON
	}
	fn(1, &n)
	return true
}

// jsonReader builds the tree of a JSON value with the fast reader's stack, slab and
// List streaming; the fastReader's src and offsets are only used for scalars.
type jsonReader struct {
	fastReader
	dec *jsontext.Decoder
}

// value reads the next value.
func (r *jsonReader) value() node {
	switch r.dec.PeekKind() {
	case '{':
		return r.object()
	case '[':
		return r.array()
	case '"':
		return r.string()
	case '0':
		return plainNode(r.raw())
	case 'n':
		r.token()
		return node{kind: scalarNode, tag: tagNull, value: "null"}
	case 't', 'f':
		if r.token().Bool() {
			return node{kind: scalarNode, tag: tagBool, value: "true"}
		}
		return node{kind: scalarNode, tag: tagBool, value: "false"}
	}
	giveUp() // a syntax error (PeekKind's KindInvalid) or a closing delimiter
	return node{}
}

func (r *jsonReader) token() jsontext.Token {
	t, err := r.dec.ReadToken()
	if err != nil {
		giveUp()
	}
	return t
}

func (r *jsonReader) object() node {
	r.token()
	mark := r.open()
	for r.dec.PeekKind() == '"' {
		key := r.string()
		stream := r.streamItems(&key)
		v := r.value()
		if stream {
			r.itemsDepth = 0
		}
		r.stack = append(r.stack, key, v)
	}
	if r.token().Kind() != '}' {
		giveUp()
	}
	return r.collection(mappingNode, mark)
}

func (r *jsonReader) array() node {
	r.token()
	mark := r.open()
	for k := r.dec.PeekKind(); k != ']' && k != jsontext.KindInvalid; k = r.dec.PeekKind() {
		r.push(r.value())
	}
	r.token() // "]", or the syntax error PeekKind saw
	return r.sequenceEnd(mark)
}

// raw reads a scalar and returns its text: the piece of src it was read from.
func (r *jsonReader) raw() string {
	v, err := r.dec.ReadValue()
	if err != nil {
		giveUp()
	}
	end := int(r.dec.InputOffset())
	return r.src[end-len(v) : end]
}

// string reads a string; only one with escapes is copied.
func (r *jsonReader) string() node {
	q := r.raw()
	s := q[1 : len(q)-1]
	if strings.IndexByte(s, '\\') >= 0 {
		b, err := jsontext.AppendUnquote(nil, q)
		if err != nil {
			giveUp()
		}
		s = string(b)
	}
	return node{kind: scalarNode, tag: tagStr, value: s}
}
