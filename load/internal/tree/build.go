package tree

// Builder builds the trees of the fast readers (the fast YAML reader and the JSON
// reader) from the values they read, bottom up: a reader opens a collection, adds
// its children, and ends it. It allocates little: the children of the collections
// being read are gathered on one stack, and with Reuse each finished collection
// copies its own out into a slab that is used again from one document to the next.
//
// A fast reader gives up (GiveUp) on anything it does not read exactly as yaml.v3
// does; the Builder gives up too on nesting deeper than MaxDepth, and on a mapping
// that repeats a key or has a merge key, which the reference reader reports or
// merges.
type Builder struct {
	// Item receives the items of the document's top-level "items" list (nil: keep
	// them in the tree); Doc is the number of the document being read.
	Item func(doc, i int, n *Node)
	Doc  int

	// depth counts the collections being read; itemsDepth is the depth of the
	// streamed list while it is read.
	depth, itemsDepth int
	items             int
	streamed          bool
	// With reuse, collections take their children's memory from slab, which is
	// emptied after each document (and back to itemMark after each streamed item,
	// unless a new slab was started: slabs counts them).
	reuse           bool
	slab            []Node
	slabs, itemSlab int
	itemMark        int
	// stack collects the children of the collections being read; each collection
	// copies its own out when it ends, so the tree holds exactly sized slices.
	stack []Node
}

// MaxDepth is how deep the fast readers let collections nest, long before yaml.v3's
// limit: deeper input is read by the reference reader.
const MaxDepth = 100

// slabSize is how many nodes a slab holds (about 3 MB).
const slabSize = 64 << 10

// notFast is the panic value that abandons a fast reader.
type notFast struct{}

// GiveUp abandons a fast reader: the input is outside what it reads exactly as
// yaml.v3 does. Recover turns it into false.
func GiveUp() { panic(notFast{}) }

// Recover, deferred by a fast reader's entry point, sets *ok to false when the reader
// gave up; other panics go on.
func Recover(ok *bool) {
	if v := recover(); v != nil {
		if _, is := v.(notFast); !is {
			panic(v)
		}
		*ok = false
	}
}

// Reuse makes collections take their memory from *slab, and leaves it there (see
// Release) for the next reader: a reader's caller must then not keep any node past
// the call that hands it over.
func (b *Builder) Reuse(slab *[]Node) {
	if slab != nil {
		b.reuse = true
		b.slab = *slab
	}
}

// Release hands the slab back to where Reuse took it from, emptied.
func (b *Builder) Release(slab *[]Node) {
	if slab != nil {
		*slab = b.slab[:0]
	}
}

// StartDocument resets the Builder for document doc.
func (b *Builder) StartDocument(doc int) {
	b.Doc, b.items, b.streamed = doc, 0, false
}

// EndDocument frees the document's memory for the next one (with Reuse).
func (b *Builder) EndDocument() { b.slab = b.slab[:0] }

// Depth is how many collections are being read.
func (b *Builder) Depth() int { return b.depth }

// Open starts a collection: it returns where its children start on the stack.
func (b *Builder) Open() int {
	b.depth++
	if b.depth > MaxDepth {
		GiveUp()
	}
	return len(b.stack)
}

// alloc returns room for n children (never nil, as yaml.v3's trees have it).
func (b *Builder) alloc(n int) []Node {
	if !b.reuse || n == 0 {
		return make([]Node, n)
	}
	if len(b.slab)+n > cap(b.slab) {
		b.slab = make([]Node, 0, max(n, slabSize))
		b.slabs++
	}
	i := len(b.slab)
	b.slab = b.slab[:i+n]
	return b.slab[i : i+n : i+n]
}

// StreamItems starts handing items to Item when key is the document's first
// top-level "items"; the caller calls StopItems after the value.
func (b *Builder) StreamItems(key *Node) bool {
	if b.Item != nil && b.depth == 1 && !b.streamed && key.Tag == Str && key.Value == "items" {
		b.streamed, b.itemsDepth = true, 2
		b.itemMark, b.itemSlab = len(b.slab), b.slabs
		return true
	}
	return false
}

// StopItems ends the streamed list.
func (b *Builder) StopItems() { b.itemsDepth = 0 }

// Pair adds a key and its value to the mapping being read.
func (b *Builder) Pair(key, value Node) { b.stack = append(b.stack, key, value) }

// Push adds a sequence item, or hands it on when the sequence is the streamed list.
func (b *Builder) Push(v Node) {
	if b.itemsDepth != b.depth {
		b.stack = append(b.stack, v)
		return
	}
	item := v // only this copy escapes, and only here
	b.Item(b.Doc, b.items, &item)
	b.items++
	if b.reuse {
		if b.slabs != b.itemSlab {
			// The item started a slab: all of it is the item's.
			b.itemMark, b.itemSlab = 0, b.slabs
		}
		b.slab = b.slab[:b.itemMark]
	}
}

// End ends the collection opened at mark: a Mapping, or a Sequence (marked Streamed
// when its items were handed on).
func (b *Builder) End(kind Kind, mark int) Node {
	streamed := kind == Sequence && b.itemsDepth == b.depth
	b.depth--
	n := Node{Kind: kind, Content: b.alloc(len(b.stack) - mark)}
	copy(n.Content, b.stack[mark:])
	clear(b.stack[mark:])
	b.stack = b.stack[:mark]
	n.Streamed = streamed
	if kind == Mapping && (DuplicateKey(n.Content) >= 0 || mergeKey(n.Content)) {
		GiveUp()
	}
	return n
}

// mergeKey reports a merge key among a mapping's keys.
func mergeKey(content []Node) bool {
	for i := 0; i < len(content); i += 2 {
		if IsMergeKey(&content[i]) {
			return true
		}
	}
	return false
}
