package load

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// walker reads typed fields out of one object's YAML tree, recording a positioned
// problem for every field of the wrong shape. Accessors return the zero value on error,
// so decoding goes on and finds the next problem too.
type walker struct {
	origin  model.Origin
	errs    *model.Problems
	warns   *model.Problems
	dialect Dialect
}

func (w *walker) errorf(field, format string, args ...any) {
	w.errs.Add(w.origin, field, format, args...)
}

func (w *walker) warnf(field, format string, args ...any) {
	w.warns.Add(w.origin, field, format, args...)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// get finds key in a mapping node; nil when absent or n is not a mapping.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") || n.Kind == 0
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// mapping returns the mapping at key (nil when absent), reporting any other shape.
func (w *walker) mapping(parent *yaml.Node, path, key string) *yaml.Node {
	n := get(parent, key)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		w.errorf(join(path, key), "expected a mapping, got %s", describe(n))
		return nil
	}
	return n
}

// seq calls fn for each item of the list at key.
func (w *walker) seq(parent *yaml.Node, path, key string, fn func(item *yaml.Node, itemPath string)) {
	n := get(parent, key)
	if isNull(n) {
		return
	}
	p := join(path, key)
	if n.Kind != yaml.SequenceNode {
		w.errorf(p, "expected a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		if item.Kind == yaml.AliasNode {
			item = item.Alias
		}
		fn(item, index(p, i))
	}
}

// str reads a string field.
func (w *walker) str(parent *yaml.Node, key string) string {
	return w.strAt(parent, "", key)
}

func (w *walker) strAt(parent *yaml.Node, path, key string) string {
	n := get(parent, key)
	if isNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		w.errorf(join(path, key), "expected a string, got %s", describe(n))
		return ""
	}
	return n.Value
}

// strItem reads a list item that must be a string.
func (w *walker) strItem(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		w.errorf(path, "expected a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// strList reads a list of strings.
func (w *walker) strList(parent *yaml.Node, path, key string) []string {
	var out []string
	w.seq(parent, path, key, func(item *yaml.Node, p string) {
		if s, ok := w.strItem(item, p); ok {
			out = append(out, s)
		}
	})
	return out
}

// has reports whether key is present and not null.
func has(parent *yaml.Node, key string) bool { return !isNull(get(parent, key)) }

// boolean reads a bool field; ok is false when absent.
func (w *walker) boolean(parent *yaml.Node, path, key string) (v, ok bool) {
	n := get(parent, key)
	if isNull(n) {
		return false, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		w.errorf(join(path, key), "expected true or false, got %s", describe(n))
		return false, false
	}
	b, err := strconv.ParseBool(n.Value)
	if err != nil {
		// YAML 1.1 spellings such as "yes" are tagged !!bool by the parser too.
		b = n.Value == "yes" || n.Value == "Yes" || n.Value == "on" || n.Value == "On"
	}
	return b, true
}

// boolPtr reads an optional bool.
func (w *walker) boolPtr(parent *yaml.Node, path, key string) *bool {
	v, ok := w.boolean(parent, path, key)
	if !ok {
		return nil
	}
	return &v
}

// integer reads an integer field in [min, max]; ok is false when absent or wrong.
func (w *walker) integer(parent *yaml.Node, path, key string, min, max int64) (int64, bool) {
	n := get(parent, key)
	if isNull(n) {
		return 0, false
	}
	p := join(path, key)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		w.errorf(p, "expected a number, got %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		w.errorf(p, "%s is not a whole number in range", n.Value)
		return 0, false
	}
	if v < min || v > max {
		w.errorf(p, "%d is out of range (%d-%d)", v, min, max)
		return 0, false
	}
	return v, true
}

// port reads a port number 1-65535; 0 when absent.
func (w *walker) port(parent *yaml.Node, path, key string) int32 {
	v, _ := w.integer(parent, path, key, 1, 65535)
	return int32(v)
}

// stringMap reads labels, annotations or a selector.
func (w *walker) stringMap(parent *yaml.Node, path, key string) map[string]string {
	n := w.mapping(parent, path, key)
	if n == nil {
		return nil
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			w.errorf(join(join(path, key), k.Value), "expected a string, got %s", describe(v))
			continue
		}
		m[k.Value] = v.Value
	}
	return m
}

// addr parses an IP address (sloppily, as kube-proxy does).
func (w *walker) addr(s, path string) (netip.Addr, bool) {
	a, err := model.ParseAddr(s)
	if err != nil {
		w.errorf(path, "%v", err)
		return netip.Addr{}, false
	}
	return a, true
}

// prefix parses a CIDR.
func (w *walker) prefix(s, path string) (netip.Prefix, bool) {
	p, err := model.ParsePrefix(s)
	if err != nil {
		w.errorf(path, "%v", err)
		return netip.Prefix{}, false
	}
	return p, true
}

// protocol reads a protocol field; TCP when absent.
func (w *walker) protocol(parent *yaml.Node, path, key string) model.Protocol {
	s := w.strAt(parent, path, key)
	if s == "" {
		return model.TCP
	}
	p, err := model.ParseProtocol(s, w.dialect == MiniK8s)
	if err != nil {
		w.errorf(join(path, key), "%v", err)
		return model.TCP
	}
	return p
}

// name validates text that reaches rules; see model.CheckName.
func (w *walker) name(s, path string, rule model.NameRule) bool {
	warning, err := model.CheckName(s, rule)
	if err != nil {
		w.errorf(path, "%v", err)
		return false
	}
	if warning != "" {
		w.warnf(path, "%s", warning)
	}
	return true
}
