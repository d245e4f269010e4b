package load

import (
	"sort"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/internal/textutil"
)

// counts are the objects one Loader met: of each kind it reads (as kinds lists
// them) and of each kind it passed over (as written).
type counts struct {
	read   []int // by kind, as kinds lists them, as far as one was read
	passed map[string]int
}

func (c *counts) readOne(k *kindInfo) {
	c.grow(k.index + 1)
	c.read[k.index]++
}

func (c *counts) grow(n int) {
	if len(c.read) < n {
		c.read = append(c.read, make([]int, n-len(c.read))...)
	}
}

func (c *counts) pass(kind string) {
	if c.passed == nil {
		c.passed = map[string]int{}
	}
	c.passed[kind]++
}

func (c *counts) add(o *counts) {
	c.grow(len(o.read))
	for i, n := range o.read {
		c.read[i] += n
	}
	for kind, n := range o.passed {
		if c.passed == nil {
			c.passed = map[string]int{}
		}
		c.passed[kind] += n
	}
}

// Tally counts the objects the Loader met in each input, by kind: those it read and
// those it passed over (a List is not counted, its items are), for a command to say
// what it read.
type Tally struct {
	inputs []string // in the order they were read, as messages name them
	counts map[string]*counts
}

func (t *Tally) add(input string, c *counts) {
	if t.counts == nil {
		t.counts = map[string]*counts{}
	}
	if t.counts[input] == nil {
		t.inputs = append(t.inputs, input)
		t.counts[input] = &counts{}
	}
	t.counts[input].add(c)
}

// Merge adds what o counted.
func (t *Tally) Merge(o *Tally) {
	for _, input := range o.inputs {
		t.add(input, o.counts[input])
	}
}

// Inputs are the inputs read, in order, named as messages name them.
func (t *Tally) Inputs() []string { return t.inputs }

// total is the counts of one input, or of every input for "".
func (t *Tally) total(input string) *counts {
	if input != "" {
		if c := t.counts[input]; c != nil {
			return c
		}
		return &counts{}
	}
	var all counts
	for _, in := range t.inputs {
		all.add(t.counts[in])
	}
	return &all
}

// Read is how many objects of kind (as kinds names it: "Service") were read.
func (t *Tally) Read(kind string) int {
	if k := byName[kind]; k != nil {
		if c := t.total(""); k.index < len(c.read) {
			return c.read[k.index]
		}
	}
	return 0
}

// Line says what was met in input, or in every input for "": "read 12 Services, 14
// EndpointSlices; passed over 14 ConfigMap, 2 CustomResourceDefinition" (the kinds
// read as kinds lists them, those passed over most first); "" when no object was.
func (t *Tally) Line(input string) string { return t.line(input, nil, 0) }

// Summary is Line for every input, with the Pods made from each kind of workload
// ("9 Deployments (27 Pods made)", made counts them by kind) and the Nodes made
// (--nodes): what a command says it read.
func (t *Tally) Summary(made map[string]int, nodesMade int) string {
	return t.line("", made, nodesMade)
}

func (t *Tally) line(input string, made map[string]int, nodesMade int) string {
	c := t.total(input)
	var read, passed []string
	for i, n := range c.read {
		if n > 0 {
			count := textutil.Count(n, kinds[i].name, kinds[i].plural)
			if pods, ok := made[kinds[i].name]; ok {
				count += " (" + textutil.Count(pods, "Pod", "Pods") + " made)"
			}
			read = append(read, count)
		}
	}
	if nodesMade > 0 {
		read = append(read, textutil.Count(nodesMade, "Node", "Nodes")+" made (--nodes)")
	}
	kindsPassed := make([]string, 0, len(c.passed))
	for kind := range c.passed {
		kindsPassed = append(kindsPassed, kind)
	}
	sort.Slice(kindsPassed, func(i, j int) bool {
		a, b := kindsPassed[i], kindsPassed[j]
		return c.passed[a] > c.passed[b] || c.passed[a] == c.passed[b] && a < b
	})
	for _, kind := range kindsPassed {
		passed = append(passed, strconv.Itoa(c.passed[kind])+" "+kind)
	}
	var parts []string
	if len(read) > 0 {
		parts = append(parts, "read "+strings.Join(read, ", "))
	}
	if len(passed) > 0 {
		parts = append(parts, "passed over "+strings.Join(passed, ", "))
	}
	return strings.Join(parts, "; ")
}
