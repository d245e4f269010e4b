package load

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

// walker reads typed fields out of one object's YAML tree, recording a positioned
// problem for every field of the wrong shape. Accessors return the zero value on error,
// so decoding goes on and finds the next problem too.
type walker struct {
	origin  model.Origin
	errs    *model.Problems
	warns   *model.Problems
	dialect Dialect
	strict  bool     // typos are errors (see typo)
	bools   *[2]bool // false and true, for boolPtr
	text    *keeper  // where the strings it returns are kept
}

// keeper holds the text of the strings the walker hands to the model, copied out of
// the tree (whose scalars are pieces of the whole input, or of the JSON reader's
// buffers), so that the input is garbage once it is loaded: at 10,000 Services the
// model keeps a few megabytes of 18 to 46 MB of manifests. Strings are packed into
// blocks, one allocation for thousands of them; a block lives while one of its
// strings does.
type keeper struct{ block strings.Builder }

// keepBlock is the size of a block; a longer string is copied on its own.
const keepBlock = 32 << 10

func (k *keeper) keep(s string) string {
	switch {
	case s == "":
		return ""
	case len(s) > keepBlock/8:
		return strings.Clone(s)
	}
	k.room(len(s))
	start := k.block.Len()
	k.block.WriteString(s)
	return k.block.String()[start:]
}

// keepBytes is keep for bytes.
func (k *keeper) keepBytes(b []byte) string {
	switch {
	case len(b) == 0:
		return ""
	case len(b) > keepBlock/8:
		return string(b)
	}
	k.room(len(b))
	start := k.block.Len()
	k.block.Write(b)
	return k.block.String()[start:]
}

// room starts a block when the current one has no room for n bytes.
func (k *keeper) room(n int) {
	if k.block.Cap()-k.block.Len() < n {
		k.block = strings.Builder{}
		k.block.Grow(keepBlock)
	}
}

// errorf reports a problem at a field: the one place where its path is written out.
func (w *walker) errorf(field tree.Path, format string, args ...any) {
	w.errs.Add(w.origin, field.String(), format, args...)
}

// warnf reports a warning at a field.
func (w *walker) warnf(field tree.Path, format string, args ...any) {
	w.warns.Add(w.origin, field.String(), format, args...)
}

// mapping returns the mapping at key (nil when absent), reporting any other shape.
func (w *walker) mapping(parent *tree.Node, path tree.Path, key string) *tree.Node {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		return nil
	}
	if n.Kind != tree.Mapping {
		w.errorf(path.Key(key), "expected a mapping, got %s", tree.Describe(n))
		return nil
	}
	return n
}

// seq calls fn for each item of the list at key.
func (w *walker) seq(parent *tree.Node, path tree.Path, key string, fn func(item *tree.Node, itemPath tree.Path)) {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		return
	}
	p := path.Key(key)
	if n.Kind != tree.Sequence {
		w.errorf(p, "expected a list, got %s", tree.Describe(n))
		return
	}
	for i := range n.Content {
		fn(&n.Content[i], p.Index(i))
	}
}

// items calls fn for each item of the list at key, each of which must be a mapping.
func (w *walker) items(parent *tree.Node, path tree.Path, key string, fn func(item *tree.Node, itemPath tree.Path)) {
	w.seq(parent, path, key, func(item *tree.Node, p tree.Path) {
		if item.Kind != tree.Mapping {
			w.errorf(p, "expected a mapping, got %s", tree.Describe(item))
			return
		}
		fn(item, p)
	})
}

// str reads a string field.
func (w *walker) str(parent *tree.Node, key string) string {
	return w.strAt(parent, tree.Path{}, key)
}

func (w *walker) strAt(parent *tree.Node, path tree.Path, key string) string {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		return ""
	}
	if n.Kind != tree.Scalar || n.Tag != tree.Str {
		w.errorf(path.Key(key), "expected a string, got %s", tree.Describe(n))
		return ""
	}
	return w.text.keep(n.Value)
}

// strItem reads a list item that must be a string.
func (w *walker) strItem(n *tree.Node, path tree.Path) (string, bool) {
	if n.Kind != tree.Scalar || n.Tag != tree.Str {
		w.errorf(path, "expected a string, got %s", tree.Describe(n))
		return "", false
	}
	return w.text.keep(n.Value), true
}

// strList reads a list of strings.
func (w *walker) strList(parent *tree.Node, path tree.Path, key string) []string {
	var out []string
	w.seq(parent, path, key, func(item *tree.Node, p tree.Path) {
		if s, ok := w.strItem(item, p); ok {
			out = append(out, s)
		}
	})
	return out
}

// has reports whether key is present and not null.
func has(parent *tree.Node, key string) bool { return !tree.IsNull(tree.Get(parent, key)) }

// boolean reads a bool field; ok is false when absent.
func (w *walker) boolean(parent *tree.Node, path tree.Path, key string) (v, ok bool) {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		return false, false
	}
	if n.Kind != tree.Scalar || n.Tag != tree.Bool {
		w.errorf(path.Key(key), "expected true or false, got %s", tree.Describe(n))
		return false, false
	}
	b, err := strconv.ParseBool(n.Value)
	if err != nil {
		// YAML 1.1 spellings such as "yes" are tagged !!bool by the parser too.
		b = n.Value == "yes" || n.Value == "Yes" || n.Value == "on" || n.Value == "On"
	}
	return b, true
}

// boolPtr reads an optional bool. The pointer is to one of the Loader's two values,
// shared by every object it loads: model values are read, never written through.
func (w *walker) boolPtr(parent *tree.Node, path tree.Path, key string) *bool {
	v, ok := w.boolean(parent, path, key)
	if !ok {
		return nil
	}
	if v {
		return &w.bools[1]
	}
	return &w.bools[0]
}

// integer reads an integer field in [min, max]; ok is false when absent or wrong.
func (w *walker) integer(parent *tree.Node, path tree.Path, key string, min, max int64) (int64, bool) {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		return 0, false
	}
	p := path.Key(key)
	if n.Kind == tree.Scalar && n.Tag == tree.Float {
		w.errorf(p, "%s is not a whole number", n.Value)
		return 0, false
	}
	if n.Kind != tree.Scalar || n.Tag != tree.Int {
		w.errorf(p, "expected a whole number, got %s", tree.Describe(n))
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
func (w *walker) port(parent *tree.Node, path tree.Path, key string) int32 {
	v, _ := w.integer(parent, path, key, 1, 65535)
	return int32(v)
}

// stringMap reads labels, annotations or a selector.
func (w *walker) stringMap(parent *tree.Node, path tree.Path, key string) map[string]string {
	n := w.mapping(parent, path, key)
	if n == nil {
		return nil
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := &n.Content[i], &n.Content[i+1]
		if v.Kind != tree.Scalar || v.Tag == tree.Null {
			w.errorf(path.Key(key).Key(k.Value), "expected a string, got %s", tree.Describe(v))
			continue
		}
		m[w.text.keep(k.Value)] = w.text.keep(v.Value)
	}
	return m
}

// addr parses an IP address (sloppily, as kube-proxy does).
func (w *walker) addr(s string, path tree.Path) (netip.Addr, bool) {
	a, err := model.ParseAddr(s)
	if err != nil {
		w.errorf(path, "%v", err)
		return netip.Addr{}, false
	}
	return a, true
}

// addrAt reads a required IP address field; a field that is absent, not a string or
// not an address is reported once, at the field.
func (w *walker) addrAt(parent *tree.Node, path tree.Path, key string) (netip.Addr, bool) {
	n := tree.Get(parent, key)
	if tree.IsNull(n) {
		w.errorf(path.Key(key), "missing")
		return netip.Addr{}, false
	}
	s, ok := w.strItem(n, path.Key(key))
	if !ok {
		return netip.Addr{}, false
	}
	return w.addr(s, path.Key(key))
}

// prefix parses a CIDR.
func (w *walker) prefix(s string, path tree.Path) (netip.Prefix, bool) {
	p, err := model.ParsePrefix(s)
	if err != nil {
		w.errorf(path, "%v", err)
		return netip.Prefix{}, false
	}
	return p, true
}

// protocol reads a protocol field; TCP when absent.
func (w *walker) protocol(parent *tree.Node, path tree.Path, key string) model.Protocol {
	s := w.strAt(parent, path, key)
	if s == "" {
		return model.TCP
	}
	p, err := model.ParseProtocol(s, w.dialect == MiniK8s)
	if err != nil {
		w.errorf(path.Key(key), "%v", err)
		return model.TCP
	}
	return p
}

// name validates text that reaches rules; see model.CheckName.
func (w *walker) name(s string, path tree.Path, rule model.NameRule) bool {
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
