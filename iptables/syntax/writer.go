package syntax

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Buffer is the one writer of iptables-restore lines: words joined by single spaces,
// every line ended by "\n", comments quoted when they hold a space (as kube-proxy writes
// them). It can stream: made with NewStream, full chunks go to the writer as they fill.
// Errors are sticky: the first one is kept and reported by Err (and Flush).
type Buffer struct {
	buf   []byte
	lines int
	out   io.Writer
	err   error
	// markCommits: Commit ends each block with the commit mark (see MarkCommits).
	markCommits bool
	// header is a comment line written before the first line, if any line is.
	header string
}

// Header has the buffer start with "# text" once it writes anything: an output that
// turns out empty stays empty. text must hold no newline.
func (b *Buffer) Header(text string) {
	if strings.ContainsAny(text, "\n\r") {
		b.Fail(fmt.Errorf("%q: %w", text, errUnsafe))
		return
	}
	b.header = text
}

// begin writes the header before the first line.
func (b *Buffer) begin() {
	if b.header != "" {
		h := b.header
		b.header = ""
		b.Line("# " + h)
	}
}

// NewStream returns a buffer that writes to w whenever a chunk fills; markCommits makes
// Commit end each block with the commit mark (see CommitMark).
func NewStream(w io.Writer, markCommits bool) *Buffer {
	return &Buffer{out: w, markCommits: markCommits}
}

// FlushSize is the chunk a streaming buffer writes at once.
const FlushSize = 64 << 10

// errUnsafe is returned for text that would break a rules file. Input validation keeps
// such text out; this is the last line of defence.
var errUnsafe = errors.New("text with a quote, backslash or newline cannot go into an iptables rule")

// Line writes a whole line of words.
func (b *Buffer) Line(words ...string) {
	b.begin()
	for i, w := range words {
		if i > 0 {
			b.buf = append(b.buf, ' ')
		}
		b.buf = append(b.buf, w...)
	}
	b.End()
}

// Commit ends a block: "COMMIT", after the commit mark when the buffer marks commits
// (the declaration and the -X of CommitMark, which CountLines leaves out).
func (b *Buffer) Commit() {
	if b.markCommits {
		b.ChainLine(CommitMark, "-")
		b.Line("-X", CommitMark)
	}
	b.Line("COMMIT")
}

// isCommitMark reports a line of the commit mark.
func isCommitMark(l []byte) bool {
	return string(l) == ":"+CommitMark+" - [0:0]" || string(l) == "-X "+CommitMark
}

// Start begins a rule line: "-A chain".
func (b *Buffer) Start(chain string) { b.Op("-A", chain) }

// Op begins a command line on a chain: "-I chain", "-D chain".
func (b *Buffer) Op(op, chain string) {
	b.begin()
	b.buf = append(b.buf, op...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, chain...)
}

// Words appends words to the current line.
func (b *Buffer) Words(words ...string) {
	for _, w := range words {
		b.buf = append(b.buf, ' ')
		b.buf = append(b.buf, w...)
	}
}

// Args appends parsed words back, quoting comments as Comment does.
func (b *Buffer) Args(args []string) {
	for i := 0; i < len(args); i++ {
		if i+3 < len(args) && args[i] == "-m" && args[i+1] == "comment" && args[i+2] == "--comment" {
			b.Comment(args[i+3])
			i += 3
			continue
		}
		b.Words(args[i])
	}
}

// Comment appends "-m comment --comment TEXT", quoting TEXT when it holds a space.
func (b *Buffer) Comment(text string) {
	if strings.ContainsAny(text, "\"\\\n\r") {
		b.Fail(fmt.Errorf("%q: %w", text, errUnsafe))
		return
	}
	b.buf = append(b.buf, " -m comment --comment "...)
	if strings.IndexByte(text, ' ') >= 0 {
		b.buf = append(b.buf, '"')
		b.buf = append(b.buf, text...)
		b.buf = append(b.buf, '"')
		return
	}
	b.buf = append(b.buf, text...)
}

// End finishes the current line.
func (b *Buffer) End() {
	b.buf = append(b.buf, '\n')
	b.lines++
	b.maybeFlush()
}

// ChainLine declares a chain: ":NAME - [0:0]", or ":NAME POLICY [0:0]" for built-ins.
func (b *Buffer) ChainLine(name, policy string) {
	b.begin()
	b.buf = append(b.buf, ':')
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, policy...)
	b.buf = append(b.buf, " [0:0]\n"...)
	b.lines++
	b.maybeFlush()
}

// Fail records err unless an error is recorded already.
func (b *Buffer) Fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Err is the first error.
func (b *Buffer) Err() error { return b.err }

func (b *Buffer) maybeFlush() {
	if b.out != nil && len(b.buf) >= FlushSize {
		b.Flush()
	}
}

// Flush sends buffered bytes to the stream's writer (nothing without one) and returns
// the first error.
func (b *Buffer) Flush() error {
	if b.out == nil || len(b.buf) == 0 {
		return b.err
	}
	if b.err == nil {
		_, b.err = b.out.Write(b.buf)
	}
	b.buf = b.buf[:0]
	return b.err
}

// Append copies another buffer's lines (and its error) into this one.
func (b *Buffer) Append(o *Buffer) {
	if len(o.buf) > 0 {
		b.begin()
	}
	b.buf = append(b.buf, o.buf...)
	b.lines += o.lines
	b.Fail(o.err)
	b.maybeFlush()
}

// AppendText copies whole lines, each ended by "\n", that another buffer wrote.
func (b *Buffer) AppendText(text []byte) {
	if len(text) > 0 {
		b.begin()
	}
	b.buf = append(b.buf, text...)
	b.lines += bytes.Count(text, []byte{'\n'})
	b.maybeFlush()
}

// AppendLine copies one line written by another buffer (without its "\n").
func (b *Buffer) AppendLine(line []byte) {
	b.begin()
	b.buf = append(b.buf, line...)
	b.End()
}

// Bytes is what the buffer holds (what it has not streamed yet).
func (b *Buffer) Bytes() []byte { return b.buf }

// Lines counts the lines written.
func (b *Buffer) Lines() int { return b.lines }

// Len is the number of bytes held.
func (b *Buffer) Len() int { return len(b.buf) }

// Reset empties the buffer and its line count.
func (b *Buffer) Reset() {
	b.buf = b.buf[:0]
	b.lines = 0
}
