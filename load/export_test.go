package load

import (
	"runtime"
	"sync"
)

// Hooks for the benchmarks of the readers (reference_bench_test.go).

// Slow loads src with yaml.v3 alone.
func Slow(l *Loader, name, src string) { l.slow(name, src) }

// FastOneCore loads src with the fast reader on one goroutine.
func FastOneCore(l *Loader, name, src string) bool { return l.fastPieces(name, src, 1, pieceSize) }

// SlowPieces is yaml.v3 over the documents of src in pieces, one per core, as the fast
// reader splits them (a kind: List is one document: one piece).
func SlowPieces(l *Loader, name, src string) {
	pieces, _ := splitDocuments(src, runtime.GOMAXPROCS(0), pieceSize)
	subs := make([]*Loader, len(pieces))
	var wg sync.WaitGroup
	for i, p := range pieces {
		subs[i] = &Loader{}
		wg.Go(func() { subs[i].slow(name, p) })
	}
	wg.Wait()
	for _, sub := range subs {
		l.Cluster.Append(&sub.Cluster)
		l.Errors.Merge(&sub.Errors)
	}
}
