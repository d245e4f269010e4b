package tree

import "go.yaml.in/yaml/v3"

// FromYAML converts a yaml.v3 tree: the reference reader's. Aliases become their
// anchored value; a value aliased many times is converted once and shared, so alias
// bombs stay small.
func FromYAML(n *yaml.Node) Node {
	c := converter{seen: map[*yaml.Node]Node{}}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return Node{}
		}
		n = n.Content[0]
	}
	return c.convert(n)
}

type converter struct {
	seen map[*yaml.Node]Node
}

func (c *converter) convert(n *yaml.Node) Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if done, ok := c.seen[n]; ok {
		return done
	}
	var out Node
	switch n.Kind {
	case yaml.ScalarNode:
		out = Node{Kind: Scalar, Tag: TagOf(n.ShortTag()), Value: n.Value}
	case yaml.MappingNode, yaml.SequenceNode:
		out.Kind = Mapping
		if n.Kind == yaml.SequenceNode {
			out.Kind = Sequence
		}
		out.Content = make([]Node, len(n.Content))
		for i, child := range n.Content {
			out.Content[i] = c.convert(child)
		}
	}
	if n.Anchor != "" {
		c.seen[n] = out
	}
	return out
}
