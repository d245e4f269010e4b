package conformance

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// tally counts what the run compared, per "release mode": cases, cases that agree,
// cases whose differences expected.txt explains (per expectation), cases with
// unexplained differences, and notes (cases not run and why).
type tally struct {
	mu         sync.Mutex
	cases      map[string]int
	same       map[string]int
	expected   map[string]map[string]int // key -> expectation ID -> cases
	unexpected map[string]int
	notes      map[string]map[string]int // key -> note -> cases
	global     []string
	examples   map[string]string // expectation ID -> first example
}

func newTally() tally {
	return tally{
		cases: map[string]int{}, same: map[string]int{}, expected: map[string]map[string]int{},
		unexpected: map[string]int{}, notes: map[string]map[string]int{}, examples: map[string]string{},
	}
}

func (t *tally) note(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.global = append(t.global, fmt.Sprintf(format, args...))
}

func (t *tally) add(key, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.notes[key] == nil {
		t.notes[key] = map[string]int{}
	}
	t.notes[key][note]++
}

// example keeps the smallest diff seen for an expectation, as its example.
func (t *tally) example(id, key, name, part, diff string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ex := fmt.Sprintf("%s %s, %s:\n%s", key, name, part, diff)
	if old, ok := t.examples[id]; !ok || len(ex) < len(old) {
		t.examples[id] = ex
	}
}

func (t *tally) count(key, name string, ids map[string]bool, unexpected bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cases[key]++
	switch {
	case unexpected:
		t.unexpected[key]++
	case len(ids) == 0:
		t.same[key]++
	}
	if t.expected[key] == nil {
		t.expected[key] = map[string]int{}
	}
	for id := range ids {
		t.expected[key][id]++
	}
}

// report logs the tally and the expectations no case needed, and returns it.
func (h *harness) report(t *testing.T, took time.Duration) string {
	tl := &h.tally
	var b strings.Builder
	fmt.Fprintf(&b, "oracle: %s\n", took.Round(time.Second))
	for _, g := range tl.global {
		fmt.Fprintf(&b, "  note: %s\n", g)
	}
	used := map[string]bool{}
	keys := sortedKeys(tl.cases)
	for _, k := range keys {
		fmt.Fprintf(&b, "%-14s %4d cases compared: %4d identical, %4d with explained differences only, %4d unexplained\n",
			k, tl.cases[k], tl.same[k], tl.cases[k]-tl.same[k]-tl.unexpected[k], tl.unexpected[k])
		for _, id := range sortedKeys(tl.expected[k]) {
			fmt.Fprintf(&b, "    %4d cases: %s\n", tl.expected[k][id], id)
			used[id] = true
		}
		for _, n := range sortedKeys(tl.notes[k]) {
			fmt.Fprintf(&b, "    %4d cases: %s\n", tl.notes[k][n], n)
		}
	}
	for _, k := range sortedKeys(tl.notes) {
		if !slices.Contains(keys, k) {
			for _, n := range sortedKeys(tl.notes[k]) {
				fmt.Fprintf(&b, "%-14s %4d cases: %s\n", k, tl.notes[k][n], n)
			}
		}
	}
	for _, e := range h.expectations {
		if ex, ok := tl.examples[e.ID]; ok {
			fmt.Fprintf(&b, "example of %s (%s):\n%s\n", e.ID, e.Reason, ex)
			continue
		}
		fmt.Fprintf(&b, "expectation %s (expected.txt:%d) matched nothing in this run\n", e.ID, e.Line)
		if h.complete && h.ran(e) {
			t.Errorf("expected.txt:%d: %s matched no difference in the releases and modes it names: remove it", e.Line, e.ID)
		}
	}
	t.Log("\n" + b.String())
	return b.String()
}

// ran reports whether the run compared a release and mode the expectation names.
func (h *harness) ran(e *Expectation) bool {
	for _, r := range h.releases {
		for _, m := range h.modes {
			if e.Applies(r.name, m) {
				return true
			}
		}
	}
	return false
}
