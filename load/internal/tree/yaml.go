package tree

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// The reference reader's limits. yaml.v3 gives a document as written, aliases as
// pointers to the values they name; FromYAML makes the tree they stand for, which
// could be far larger than the document (a billion values from a few lines: the
// "billion laughs") or never end (an alias inside the value it names). kubectl's
// YAML library refuses both; so does FromYAML.
const (
	// MaxNesting is how deep values may nest: no Kubernetes object nests a tenth as
	// deep, and the walker and yaml.v3 recurse.
	MaxNesting = 1000
	// MaxAliasValues is how many values aliases may add to a document, or as many as
	// it writes itself where that is more: a document that uses anchors to share a
	// few values grows by little.
	MaxAliasValues = 100_000
)

// FromYAML converts a yaml.v3 document (or value) into a tree. A value aliased
// many times is converted once and shared. It reports to problem, at the path where
// it is, every key that a mapping repeats (the walker reads the first), a merge key
// that names no mapping, and what
// makes the document unusable, and then returns false: an alias inside the value it
// names, aliases that add more than MaxAliasValues, nesting deeper than MaxNesting
// (one problem of each kind).
func FromYAML(n *yaml.Node, problem func(at Path, msg string)) (Node, bool) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return Node{}, true
		}
		n = n.Content[0]
	}
	c := converter{done: map[*yaml.Node]converted{}, open: map[*yaml.Node]bool{}, problem: problem}
	c.maxAdded = max(written(n, 0), MaxAliasValues)
	out, _ := c.convert(n)
	return out, !c.cycle && !c.bomb && !c.deep
}

// written counts the values of n as written, an alias as one.
func written(n *yaml.Node, depth int) int {
	count := 1
	if depth < MaxNesting {
		for _, child := range n.Content {
			count += written(child, depth+1)
		}
	}
	return count
}

type converter struct {
	// done holds the anchored values converted, open those being converted.
	done map[*yaml.Node]converted
	open map[*yaml.Node]bool
	// added counts the values that aliases add, up to maxAdded.
	added, maxAdded int
	// steps lead to the value being converted.
	steps   []pathStep
	problem func(at Path, msg string)
	// One problem of each kind is enough for a document.
	cycle, bomb, deep bool
}

// converted is a converted value and how many values its tree holds.
type converted struct {
	node Node
	size int
}

type pathStep struct {
	key   string
	index int // -1: a key
}

// at is the path of the value being converted; of its first steps only with
// first.
func (c *converter) at(first ...int) Path {
	steps := c.steps
	if len(first) > 0 {
		steps = steps[:min(len(steps), first[0])]
	}
	var p Path
	for _, s := range steps {
		if s.index < 0 {
			p = p.Key(s.key)
		} else {
			p = p.Index(s.index)
		}
	}
	return p
}

// report reports a problem of a kind the document has not had yet.
func (c *converter) report(had *bool, at Path, format string, args ...any) {
	if !*had {
		*had = true
		c.problem(at, fmt.Sprintf(format, args...))
	}
}

// convert converts n and tells how many values its tree holds.
func (c *converter) convert(n *yaml.Node) (Node, int) {
	if n.Kind == yaml.AliasNode {
		return c.alias(n)
	}
	if len(c.steps) >= MaxNesting {
		c.report(&c.deep, c.at(1), "values nest deeper than %d levels", MaxNesting)
		return NullNode, 1
	}
	if n.Anchor != "" {
		c.open[n] = true
		defer delete(c.open, n)
	}
	var out Node
	size := 1
	switch n.Kind {
	case yaml.ScalarNode:
		out = Node{Kind: Scalar, Tag: TagOf(n.ShortTag()), Value: n.Value}
	case yaml.MappingNode:
		out, size = c.mapping(n)
	case yaml.SequenceNode:
		out = Node{Kind: Sequence, Content: make([]Node, len(n.Content))}
		for i, child := range n.Content {
			c.steps = append(c.steps, pathStep{index: i})
			var s int
			out.Content[i], s = c.convert(child)
			c.steps = c.steps[:len(c.steps)-1]
			size += s
		}
	}
	if n.Anchor != "" {
		c.done[n] = converted{out, size}
	}
	return out, size
}

// mapping converts a mapping, merge keys ("<<: *defaults", as kubectl reads them)
// merged: after the mapping's own keys, those of the mapping a merge key names, or
// of each in a list of them, that the mapping does not have already (the first
// wins).
func (c *converter) mapping(n *yaml.Node) (Node, int) {
	out := Node{Kind: Mapping, Content: make([]Node, 0, len(n.Content))}
	size := 1
	var merges []Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ks := c.convert(n.Content[i])
		c.steps = append(c.steps, pathStep{key: k.Value, index: -1})
		v, vs := c.convert(n.Content[i+1])
		c.steps = c.steps[:len(c.steps)-1]
		size += ks + vs
		if IsMergeKey(&k) {
			merges = append(merges, v)
			continue
		}
		out.Content = append(out.Content, k, v)
	}
	if DuplicateKey(out.Content) >= 0 {
		c.duplicates(&out)
	}
	for _, m := range merges {
		from := []Node{m}
		if m.Kind == Sequence {
			from = m.Content
		}
		for _, f := range from {
			if f.Kind != Mapping {
				c.problem(c.at().Key("<<"), fmt.Sprintf("a merge key takes a mapping, or a list of them; got %s", Describe(&f)))
				continue
			}
			for i := 0; i+1 < len(f.Content); i += 2 {
				if Get(&Node{Kind: Mapping, Content: out.Content}, f.Content[i].Value) == nil {
					out.Content = append(out.Content, f.Content[i], f.Content[i+1])
				}
			}
		}
	}
	out.Content = slices.Clip(out.Content)
	return out, size
}

// IsMergeKey reports a merge key: a plain "<<".
func IsMergeKey(k *Node) bool { return k.Kind == Scalar && k.Tag == Other && k.Value == "<<" }

// alias is the value an alias names, already converted: YAML names only values
// written before; one still being converted is a cycle.
func (c *converter) alias(n *yaml.Node) (Node, int) {
	target := n.Alias
	if target == nil {
		return NullNode, 1
	}
	if c.open[target] {
		c.report(&c.cycle, c.at(), "alias *%s is inside the value it names: it would never end", n.Value)
		return NullNode, 1
	}
	done, ok := c.done[target]
	if !ok {
		done.node, done.size = c.convert(target)
	}
	if c.added+done.size > c.maxAdded {
		c.report(&c.bomb, c.at(), "aliases add more than %d values to the document (here *%s)", c.maxAdded, n.Value)
		return NullNode, 1
	}
	c.added += done.size
	return done.node, done.size
}

// duplicates reports every key that a mapping repeats, at the key.
func (c *converter) duplicates(m *Node) {
	at := c.at()
	seen := map[string]bool{}
	for i := 0; i < len(m.Content); i += 2 {
		if k := &m.Content[i]; k.Kind == Scalar {
			if seen[k.Value] {
				c.problem(at.Key(k.Value), "duplicate key (kubectl refuses a mapping that repeats a key)")
			}
			seen[k.Value] = true
		}
	}
}
