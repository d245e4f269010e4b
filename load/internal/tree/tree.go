// Package tree is the form every reader of the loader gives a manifest document in:
// yaml.v3 (the reference, for any YAML), the fast YAML reader (load/internal/fastyaml)
// and the JSON reader. The readers must give equal trees for every input the faster
// ones accept; the loader's walker reads them.
//
// Positions are not kept: problems are placed by field path (and syntax errors by
// yaml.v3, with their line).
package tree

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Node is one value of a manifest document.
type Node struct {
	Kind Kind
	Tag  Tag // scalars only
	// Streamed: a List's items that a reader handed on one by one (Content is empty).
	Streamed bool
	// Value is a scalar's text, after quoting and escapes are undone.
	Value string
	// Content is a mapping's keys and values, alternating, or a sequence's items.
	Content []Node
}

// Kind is what a node is.
type Kind uint8

// Kinds.
const (
	None     Kind = iota // an empty document
	Scalar               // a string, number, boolean or null
	Mapping              // keys and values
	Sequence             // a list
)

// Tag is a scalar's resolved YAML type, as yaml.v3 resolves it (YAML 1.2 core schema
// with YAML 1.1 booleans for True/TRUE... but not yes/no).
type Tag uint8

// Tags.
const (
	Str Tag = iota
	Int
	Float
	Bool
	Null
	Other // timestamps, binary, merge keys, application tags
)

// TagOf maps yaml.v3's short tags onto Tag.
func TagOf(short string) Tag {
	switch short {
	case "!!str":
		return Str
	case "!!int":
		return Int
	case "!!float":
		return Float
	case "!!bool":
		return Bool
	case "!!null":
		return Null
	}
	return Other
}

// NullNode is the value of a key written without one.
var NullNode = Node{Kind: Scalar, Tag: Null}

// Get finds key in a mapping node; nil when absent or n is not a mapping.
func Get(n *Node, key string) *Node {
	if n == nil || n.Kind != Mapping {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return &n.Content[i+1]
		}
	}
	return nil
}

// IsNull reports a value that is absent or null.
func IsNull(n *Node) bool {
	return n == nil || n.Kind == None || (n.Kind == Scalar && n.Tag == Null)
}

// ScalarText is a scalar's text; "" for anything else.
func ScalarText(n *Node) string {
	if n == nil || n.Kind != Scalar {
		return ""
	}
	return n.Value
}

// Describe names a value for a message: "a mapping", `the string "x"`. Text from
// the input is quoted.
func Describe(n *Node) string {
	switch n.Kind {
	case Mapping:
		return "a mapping"
	case Sequence:
		return "a list"
	case Scalar:
		switch n.Tag {
		case Str:
			return fmt.Sprintf("the string %q", n.Value)
		case Int, Float:
			return "the number " + n.Value
		case Bool:
			return "the boolean " + n.Value
		case Null:
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// DuplicateKey returns the index in a mapping's content of the first key that
// repeats an earlier one, -1 when none does. Only scalar keys are compared, by text
// ("1" and 1 are one key once the manifest is JSON, as the API server reads it).
func DuplicateKey(content []Node) int {
	if len(content) > 32 {
		seen := make(map[string]bool, len(content)/2)
		for i := 0; i < len(content); i += 2 {
			if k := &content[i]; k.Kind == Scalar {
				if seen[k.Value] {
					return i
				}
				seen[k.Value] = true
			}
		}
		return -1
	}
	for i := 2; i < len(content); i += 2 {
		if k := &content[i]; k.Kind == Scalar {
			for j := 0; j < i; j += 2 {
				if content[j].Value == k.Value && content[j].Kind == Scalar {
					return i
				}
			}
		}
	}
	return -1
}

// Plain makes a plain (unquoted) scalar, resolving its type.
func Plain(v string) Node {
	return Node{Kind: Scalar, Tag: ResolvePlain(v), Value: v}
}

// ResolvePlain types a plain scalar exactly as yaml.v3 does: words, small decimal
// numbers, addresses and CIDRs directly, anything else (signs, a dot, 0x..., dates...)
// through yaml.v3.
func ResolvePlain(v string) Tag {
	c := v[0]
	switch {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		// Words are strings but for yaml.v3's few named values.
		switch v {
		case "true", "True", "TRUE", "false", "False", "FALSE":
			return Bool
		case "null", "Null", "NULL":
			return Null
		}
		return Str
	case c >= '1' && c <= '9' && len(v) <= 18 && digits(v):
		return Int
	case len(v) > 4 && v[4] == '-':
		// Perhaps a timestamp: yaml.v3 decides.
	case strings.IndexByte(v, '/') >= 0 || strings.Count(v, ".") > 1:
		// Addresses and CIDRs: no number has a slash or two dots.
		return Str
	}
	return TagOf((&yaml.Node{Kind: yaml.ScalarNode, Value: v}).ShortTag())
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
