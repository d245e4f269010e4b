package load

import (
	"runtime"
	"sync"
)

// Hooks for the benchmarks of the readers (reference_bench_test.go).

// Slow loads src with yaml.v3 alone.
func Slow(l *Loader, name, src string) {
	l.Reader = Reference
	l.Text(name, src)
}

// FastOneCore loads src with the fast reader on one goroutine: in one piece.
func FastOneCore(l *Loader, name, src string) bool {
	sub := readPieces(l, name, src, len(src)+1)
	if sub != nil {
		l.merge(sub)
	}
	return sub != nil
}

// SlowPieces is yaml.v3 over the documents of src in pieces, one per core, as the
// splitter cuts them (a kind: List is one document: one piece).
func SlowPieces(l *Loader, name, src string) {
	var subs []*Loader
	var wg sync.WaitGroup
	s := splitText(src, max(pieceSize, len(src)/runtime.GOMAXPROCS(0)))
	for {
		p, more, _ := s.next(0)
		if !more {
			break
		}
		sub := &Loader{Reader: Reference}
		subs = append(subs, sub)
		wg.Go(func() { sub.Text(name, p.text) })
	}
	wg.Wait()
	for _, sub := range subs {
		l.merge(sub)
	}
}

// readPieces reads YAML src with the fast reader alone, in pieces of at least min
// bytes; nil when it gave up.
func readPieces(l *Loader, name, src string, min int) *Loader {
	sub, err := l.readYAML(name, splitText(src, min))
	if err != nil {
		panic(err) // text is never read with an error
	}
	return sub
}
