package syntax

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"

	"github.com/svcgen/svcgen/internal/textutil"
)

func forEachLine(buf []byte, fn func([]byte)) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			fn(buf)
			return
		}
		fn(buf[:i])
		buf = buf[i+1:]
	}
}

// LineChain is the chain a line is about: ":NAME ...", "-A NAME ...", "-X NAME".
func LineChain(line []byte) string {
	switch {
	case len(line) > 1 && line[0] == ':':
		line = line[1:]
	case len(line) > 3 && line[0] == '-':
		line = line[3:]
	default:
		return ""
	}
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		line = line[:i]
	}
	return string(line)
}

// FailedLine finds the line iptables-restore's error names ("Error occurred at line:
// 8", "line 5: RULE_APPEND failed"), 0 if none.
func FailedLine(stderr string) int {
	m := failedLine.FindStringSubmatch(stderr)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Blocks returns, for each "*table ... COMMIT" block of a restore, the line numbers
// (from 1) of its COMMIT line.
func Blocks(payload []byte) []int {
	var commits []int
	n := 0
	forEachLine(payload, func(l []byte) {
		n++
		if bytes.Equal(bytes.TrimSpace(l), []byte("COMMIT")) {
			commits = append(commits, n)
		}
	})
	return commits
}

// Head returns the first n lines of a restore.
func Head(payload []byte, n int) []byte {
	i := 0
	for ; n > 0 && i < len(payload); n-- {
		j := bytes.IndexByte(payload[i:], '\n')
		if j < 0 {
			return payload
		}
		i += j + 1
	}
	return payload[:i]
}

// Line returns line n (from 1) of a restore, "" if it has fewer.
func Line(payload []byte, n int) string {
	rest := Head(payload, n)
	if n <= 0 || len(rest) == 0 {
		return ""
	}
	rest = bytes.TrimSuffix(rest, []byte("\n"))
	if i := bytes.LastIndexByte(rest, '\n'); i >= 0 {
		rest = rest[i+1:]
	}
	return string(rest)
}

// CountLines tallies a restore's lines, leaving out the commit marks (which change
// nothing).
func CountLines(payload []byte) Count {
	var c Count
	forEachLine(payload, func(l []byte) {
		switch {
		case len(l) == 0, isCommitMark(l):
		case l[0] == ':':
			c.Chains++
		case bytes.HasPrefix(l, []byte("-A ")), bytes.HasPrefix(l, []byte("-I ")):
			c.Rules++
		case bytes.HasPrefix(l, []byte("-D ")):
			c.DeletedRules++
		case bytes.HasPrefix(l, []byte("-X ")):
			c.DeletedChains++
		case string(l) == "COMMIT":
			c.Blocks++
		}
	})
	return c
}

// Count tallies a restore: chain lines (a chain that is deleted is flushed by one
// first), rules added, rules and chains deleted, blocks.
type Count struct {
	Chains, Rules, DeletedRules, DeletedChains, Blocks int
}

func (c Count) String() string {
	return fmt.Sprintf("%s written, %s written, %s and %s deleted, in %s",
		textutil.Count(c.Chains-c.DeletedChains, "chain", "chains"), textutil.Count(c.Rules, "rule", "rules"),
		textutil.Count(c.DeletedRules, "rule", "rules"), textutil.Count(c.DeletedChains, "chain", "chains"),
		textutil.Count(c.Blocks, "block", "blocks"))
}

// Commits counts the COMMIT blocks of a restore (iptables-nft commits each as one
// nf_tables transaction), and reports whether every block is sure to change the
// ruleset: it appends, inserts or deletes a rule or deletes a chain, as the commit mark
// does (Options.MarkCommits); a block that only declares chains may find them as it
// wants them and commit nothing.
func Commits(payload []byte) (n int, sure bool) {
	sure = true
	changes := false
	forEachLine(payload, func(l []byte) {
		switch {
		case bytes.HasPrefix(l, []byte("-A ")), bytes.HasPrefix(l, []byte("-I ")),
			bytes.HasPrefix(l, []byte("-D ")), bytes.HasPrefix(l, []byte("-X ")):
			changes = true
		case string(l) == "COMMIT":
			n++
			sure = sure && changes
			changes = false
		}
	})
	return n, sure
}

var failedLine = regexp.MustCompile(`line:? (\d+)`)

// Counters returns the nfacct counters the rules of a restore name ("-m nfacct
// --nfacct-name NAME"), each once, in the order first named. The kernel refuses a
// rule naming a counter that does not exist, so they are made before the restore.
func Counters(payload []byte) []string {
	var names []string
	seen := map[string]bool{}
	forEachLine(payload, func(line []byte) {
		if !bytes.Contains(line, []byte("--nfacct-name")) {
			return
		}
		f := bytes.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if string(f[i]) == "--nfacct-name" && !seen[string(f[i+1])] {
				seen[string(f[i+1])] = true
				names = append(names, string(f[i+1]))
			}
		}
	})
	return names
}
