package model

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one input error or warning, placed at a field of an object:
//
//	svc.yaml: document 2 (Service default/web): spec.ports[0].port: 70000 is out of range
type Problem struct {
	Origin Origin
	Field  string // path inside the object; may be empty
	Msg    string
}

func (p *Problem) Error() string {
	field := p.Origin.Field(p.Field)
	if field == "" {
		return p.Origin.String() + ": " + p.Msg
	}
	return p.Origin.String() + ": " + field + ": " + p.Msg
}

// Problems collects every input error, so a user sees all of them at once.
// The zero value is ready to use.
type Problems struct {
	list []*Problem
}

// Add records a problem.
func (ps *Problems) Add(o Origin, field, format string, args ...any) {
	ps.list = append(ps.list, &Problem{Origin: o, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Len is the number of problems.
func (ps *Problems) Len() int { return len(ps.list) }

// List is every problem, in the order files and documents were read.
func (ps *Problems) List() []*Problem { return ps.list }

// Truncate forgets every problem after the first n.
func (ps *Problems) Truncate(n int) { ps.list = ps.list[:n] }

// Merge appends another collection.
func (ps *Problems) Merge(other *Problems) { ps.list = append(ps.list, other.list...) }

// Sort orders problems by file, document and message so output is stable however the
// inputs were walked.
func (ps *Problems) Sort() {
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if a.Origin.File != b.Origin.File {
			return a.Origin.File < b.Origin.File
		}
		if a.Origin.Doc != b.Origin.Doc {
			return a.Origin.Doc < b.Origin.Doc
		}
		return a.Error() < b.Error()
	})
}

// Err is nil when there are no problems, else an error listing all of them one per line.
func (ps *Problems) Err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ProblemList{Problems: ps.list}
}

// ProblemList is the error Problems.Err returns.
type ProblemList struct {
	Problems []*Problem
}

func (l *ProblemList) Error() string {
	lines := make([]string, len(l.Problems))
	for i, p := range l.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}
