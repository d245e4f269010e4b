package tree

import (
	"strconv"

	"github.com/svcgen/svcgen/internal/textutil"
)

// Path is where a field is inside an object, "spec.ports[0].targetPort", kept as
// the steps that lead there and written out only when a problem is reported at it.
// The walker hands one to every accessor, for every field of every item, and nearly
// none is ever written: built as strings, the paths of a 10,000-Service cluster
// were about half of the load's 671k allocations. A Path is a plain value (it
// lives in its callers' frames, never on the heap), and written out it is exactly
// the string that joining the same steps with "." and "[i]" gives, each key quoted
// as textutil.Quote quotes it.
type Path struct {
	steps [maxSteps]step
	n     uint8
}

// maxSteps is as deep as the walker goes ("spec.containers[0].ports[1].name" is
// four steps); a deeper path is written out into one step, which costs a string.
const maxSteps = 4

// step is a key with an optional index ("ports[1]"), or an index alone after
// another index or at the start.
type step struct {
	key   string // a key or a run of keys joined by "."
	item  int32  // the index + 1; 0: none
	noKey bool
	flat  bool // key is a path written out, quoted already
}

// At is the path of a field named by key, or a dotted run of keys: At("spec.ports").
// At("") is the object itself.
func At(key string) Path {
	if key == "" {
		return Path{}
	}
	return Path{}.Key(key)
}

// Key is the path of field k of the value at p.
func (p Path) Key(k string) Path {
	if p.n == maxSteps {
		p = p.flat()
	}
	p.steps[p.n] = step{key: k}
	p.n++
	return p
}

// Index is the path of item i of the list at p.
func (p Path) Index(i int) Path {
	if p.n > 0 && p.steps[p.n-1].item == 0 {
		p.steps[p.n-1].item = int32(i) + 1
		return p
	}
	if p.n == maxSteps {
		p = p.flat()
	}
	p.steps[p.n] = step{item: int32(i) + 1, noKey: true}
	p.n++
	return p
}

// flat is a full path written out into one step, to make room for more. It is
// never needed by the walker as written (four steps are enough), so it is kept out
// of Key and Index, which are inlined.
//
//go:noinline
func (p Path) flat() Path {
	s := p.String()
	if s == "" {
		return Path{}
	}
	return Path{steps: [maxSteps]step{{key: s, flat: true}}, n: 1}
}

// String writes the path out: keys joined by ".", each index as "[i]". A key that is
// not plain (see textutil.Quote) is quoted: it comes from the input.
func (p Path) String() string {
	var b []byte
	for _, s := range p.steps[:p.n] {
		if !s.noKey {
			if len(b) > 0 {
				b = append(b, '.')
			}
			if s.flat {
				b = append(b, s.key...)
			} else {
				b = append(b, textutil.Quote(s.key)...)
			}
		}
		if s.item > 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.item)-1, 10)
			b = append(b, ']')
		}
	}
	return string(b)
}
