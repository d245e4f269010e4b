package load

import (
	"strings"

	"github.com/svcgen/svcgen/load/internal/tree"
)

// reference loads src with yaml.v3 alone.
func reference(name, src string, d Dialect) *Loader {
	l := &Loader{Dialect: d, Reader: Reference}
	l.Text(name, src)
	return l
}

// jsonOnly loads src with the JSON reader alone; nil when it gave up.
func jsonOnly(name, src string, d Dialect) *Loader {
	l := &Loader{Dialect: d}
	ok, _ := l.readDocs(name, 0, func(doc func(int, *tree.Node), item func(int, int, *tree.Node)) bool {
		return readJSON(strings.NewReader(src), doc, item)
	})
	if !ok {
		return nil
	}
	return l
}
