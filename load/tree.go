package load

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// node is one value of a manifest document: what the walker reads. Three readers make
// these trees: yaml.v3 (the reference, for any YAML; see fromYAML), the fast reader
// for the block and flow shapes that kubectl, generators and people write (fast.go),
// and jsontext for JSON (json.go). They must give equal trees for every input the
// faster ones accept (JSON where yaml.v3 reads it as JSON); the tests compare them.
// Positions are not kept: problems are placed by field path (and syntax errors by
// yaml.v3, with their line).
type node struct {
	kind nodeKind
	tag  scalarTag // scalars only
	// streamed: a List's items that the fast reader handed on one by one (content
	// is empty).
	streamed bool
	// value is a scalar's text, after quoting and escapes are undone.
	value string
	// content is a mapping's keys and values, alternating, or a sequence's items.
	content []node
}

type nodeKind uint8

const (
	noNode nodeKind = iota // an empty document
	scalarNode
	mappingNode
	sequenceNode
)

// scalarTag is a scalar's resolved YAML type, as yaml.v3 resolves it (YAML 1.2 core
// schema with YAML 1.1 booleans for True/TRUE... but not yes/no).
type scalarTag uint8

const (
	tagStr scalarTag = iota
	tagInt
	tagFloat
	tagBool
	tagNull
	tagOther // timestamps, binary, merge keys, application tags
)

// tagOf maps yaml.v3's short tags onto scalarTag.
func tagOf(short string) scalarTag {
	switch short {
	case "!!str":
		return tagStr
	case "!!int":
		return tagInt
	case "!!float":
		return tagFloat
	case "!!bool":
		return tagBool
	case "!!null":
		return tagNull
	}
	return tagOther
}

// fromYAML converts a yaml.v3 tree. Aliases become their anchored value; a value
// aliased many times is converted once and shared, so alias bombs stay small.
func fromYAML(n *yaml.Node) node {
	c := converter{seen: map[*yaml.Node]node{}}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return node{}
		}
		n = n.Content[0]
	}
	return c.convert(n)
}

type converter struct {
	seen map[*yaml.Node]node
}

func (c *converter) convert(n *yaml.Node) node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if done, ok := c.seen[n]; ok {
		return done
	}
	var out node
	switch n.Kind {
	case yaml.ScalarNode:
		out = node{kind: scalarNode, tag: tagOf(n.ShortTag()), value: n.Value}
	case yaml.MappingNode, yaml.SequenceNode:
		out.kind = mappingNode
		if n.Kind == yaml.SequenceNode {
			out.kind = sequenceNode
		}
		out.content = make([]node, len(n.Content))
		for i, child := range n.Content {
			out.content[i] = c.convert(child)
		}
	}
	if n.Anchor != "" {
		c.seen[n] = out
	}
	return out
}

// get finds key in a mapping node; nil when absent or n is not a mapping.
func get(n *node, key string) *node {
	if n == nil || n.kind != mappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.content); i += 2 {
		if n.content[i].value == key {
			return &n.content[i+1]
		}
	}
	return nil
}

func isNull(n *node) bool {
	return n == nil || n.kind == noNode || (n.kind == scalarNode && n.tag == tagNull)
}

func scalar(n *node) string {
	if n == nil || n.kind != scalarNode {
		return ""
	}
	return n.value
}

func describe(n *node) string {
	switch n.kind {
	case mappingNode:
		return "a mapping"
	case sequenceNode:
		return "a list"
	case scalarNode:
		switch n.tag {
		case tagStr:
			return fmt.Sprintf("the string %q", n.value)
		case tagInt, tagFloat:
			return "the number " + n.value
		case tagBool:
			return "the boolean " + n.value
		case tagNull:
			return "null"
		}
		return fmt.Sprintf("%q", n.value)
	}
	return "something else"
}
