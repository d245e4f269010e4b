package conformance

import (
	"fmt"
	"regexp"
	"strings"
)

// Expectation is one known difference between svcgen and kube-proxy, from
// expected.txt: the releases and modes it is expected in, a pattern every differing
// line it covers matches, and why it is there.
type Expectation struct {
	ID       string
	Releases []string // "v1.36"; "*" for all
	Modes    []string // "nftables"; "*" for all
	Pattern  *regexp.Regexp
	Reason   string
	Line     int // in expected.txt
}

// ParseExpectations reads expected.txt: blocks of "key: value" lines separated by
// blank lines, "#" starting a comment line. Keys: id, releases, modes (comma
// separated, or *), pattern (a Go regexp matched against one differing line, its
// "-"/"+" included) and reason. Every key is required.
func ParseExpectations(text string) ([]*Expectation, error) {
	var out []*Expectation
	var cur map[string]string
	start := 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		e, err := expectation(cur, start)
		if err != nil {
			return err
		}
		out, cur = append(out, e), nil
		return nil
	}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "#"):
		case line == "":
			if err := flush(); err != nil {
				return nil, err
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("expected.txt:%d: want key: value, have %q", n+1, line)
			}
			if cur == nil {
				cur, start = map[string]string{}, n+1
			}
			cur[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, flush()
}

func expectation(kv map[string]string, line int) (*Expectation, error) {
	for _, k := range []string{"id", "releases", "modes", "pattern", "reason"} {
		if kv[k] == "" {
			return nil, fmt.Errorf("expected.txt:%d: %s is missing", line, k)
		}
	}
	re, err := regexp.Compile(kv["pattern"])
	if err != nil {
		return nil, fmt.Errorf("expected.txt:%d: pattern: %w", line, err)
	}
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			out = append(out, strings.TrimSpace(p))
		}
		return out
	}
	return &Expectation{
		ID: kv["id"], Releases: split(kv["releases"]), Modes: split(kv["modes"]),
		Pattern: re, Reason: kv["reason"], Line: line,
	}, nil
}

// Applies reports whether the expectation holds for the release and mode.
func (e *Expectation) Applies(release, mode string) bool {
	in := func(list []string, v string) bool {
		for _, x := range list {
			if x == "*" || x == v {
				return true
			}
		}
		return false
	}
	return in(e.Releases, release) && in(e.Modes, mode)
}

// Classify splits the changed lines of a unified diff ("-" and "+" lines, not the
// "---"/"+++" header) into those each applicable expectation covers, by ID, and
// those none covers.
func Classify(diff string, expectations []*Expectation, release, mode string) (covered map[string]int, uncovered []string) {
	covered = map[string]int{}
	for _, line := range strings.Split(diff, "\n") {
		if !(strings.HasPrefix(line, "-") || strings.HasPrefix(line, "+")) ||
			strings.HasPrefix(line, "---") || strings.HasPrefix(line, "+++") {
			continue
		}
		found := false
		for _, e := range expectations {
			if e.Applies(release, mode) && e.Pattern.MatchString(line) {
				covered[e.ID]++
				found = true
				break
			}
		}
		if !found {
			uncovered = append(uncovered, line)
		}
	}
	return covered, uncovered
}
