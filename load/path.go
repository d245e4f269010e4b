package load

import "strconv"

// fieldPath is where a field is inside an object, "spec.ports[0].targetPort", kept as
// the steps that lead there and written out only when a problem is reported at it.
// The walker hands one to every accessor, for every field of every item, and nearly
// none is ever written: built as strings, the paths of a 10,000-Service cluster
// were about half of the load's 671k allocations. A fieldPath is a plain value (it
// lives in its callers' frames, never on the heap), and written out it is exactly
// the string that joining the same steps with "." and "[i]" gives.
type fieldPath struct {
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
}

// at is the path of a field named by key, or a dotted run of keys: at("spec.ports").
// at("") is the object itself.
func at(key string) fieldPath {
	if key == "" {
		return fieldPath{}
	}
	return fieldPath{}.key(key)
}

// key is the path of field k of the value at p.
func (p fieldPath) key(k string) fieldPath {
	if p.n == maxSteps {
		p = p.flat()
	}
	p.steps[p.n] = step{key: k}
	p.n++
	return p
}

// index is the path of item i of the list at p.
func (p fieldPath) index(i int) fieldPath {
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
// of key and index, which are inlined.
//
//go:noinline
func (p fieldPath) flat() fieldPath {
	s := p.String()
	if s == "" {
		return fieldPath{}
	}
	return fieldPath{steps: [maxSteps]step{{key: s}}, n: 1}
}

// String writes the path out: keys joined by ".", each index as "[i]".
func (p fieldPath) String() string {
	var b []byte
	for _, s := range p.steps[:p.n] {
		if !s.noKey {
			if len(b) > 0 {
				b = append(b, '.')
			}
			b = append(b, s.key...)
		}
		if s.item > 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.item)-1, 10)
			b = append(b, ']')
		}
	}
	return string(b)
}
