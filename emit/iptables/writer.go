package iptables

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// lineBuf is the one writer of iptables-restore lines: words joined by single spaces,
// every line ended by "\n", comments quoted when they hold a space (as kube-proxy writes
// them). It can stream: with w set, full chunks go to w as they fill. Errors are sticky.
type lineBuf struct {
	buf   []byte
	lines int
	out   io.Writer
	err   error
	// markCommits: commit ends each block with the commit mark (Options.MarkCommits).
	markCommits bool
}

const flushSize = 64 << 10

// errUnsafe is returned for text that would break a rules file. Input validation keeps
// such text out; this is the last line of defence.
var errUnsafe = errors.New("text with a quote, backslash or newline cannot go into an iptables rule")

// line writes a whole line of words.
func (b *lineBuf) line(words ...string) {
	for i, w := range words {
		if i > 0 {
			b.buf = append(b.buf, ' ')
		}
		b.buf = append(b.buf, w...)
	}
	b.end()
}

// commit ends a block: "COMMIT", after the commit mark with markCommits (the
// declaration and the -X of chainCommitMark, which CountLines leaves out).
func (b *lineBuf) commit() {
	if b.markCommits {
		b.chainLine(chainCommitMark, "-")
		b.line("-X", chainCommitMark)
	}
	b.line("COMMIT")
}

// isCommitMark reports a line of the commit mark.
func isCommitMark(l []byte) bool {
	return string(l) == ":"+chainCommitMark+" - [0:0]" || string(l) == "-X "+chainCommitMark
}

// start begins a rule line: "-A chain".
func (b *lineBuf) start(chain string) { b.op("-A", chain) }

// op begins a command line on a chain: "-I chain", "-D chain".
func (b *lineBuf) op(op, chain string) {
	b.buf = append(b.buf, op...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, chain...)
}

// w appends words to the current line.
func (b *lineBuf) w(words ...string) {
	for _, w := range words {
		b.buf = append(b.buf, ' ')
		b.buf = append(b.buf, w...)
	}
}

// comment appends "-m comment --comment TEXT", quoting TEXT when it holds a space.
func (b *lineBuf) comment(text string) {
	if strings.ContainsAny(text, "\"\\\n\r") {
		b.fail(fmt.Errorf("%q: %w", text, errUnsafe))
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

// end finishes the current line.
func (b *lineBuf) end() {
	b.buf = append(b.buf, '\n')
	b.lines++
	if b.out != nil && len(b.buf) >= flushSize {
		b.flush()
	}
}

// chainLine declares a chain: ":NAME - [0:0]", or ":NAME POLICY [0:0]" for built-ins.
func (b *lineBuf) chainLine(name, policy string) {
	b.buf = append(b.buf, ':')
	b.buf = append(b.buf, name...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, policy...)
	b.buf = append(b.buf, " [0:0]\n"...)
	b.lines++
	if b.out != nil && len(b.buf) >= flushSize {
		b.flush()
	}
}

func (b *lineBuf) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// flush sends buffered bytes to w.
func (b *lineBuf) flush() {
	if b.out == nil || len(b.buf) == 0 {
		return
	}
	if b.err == nil {
		_, b.err = b.out.Write(b.buf)
	}
	b.buf = b.buf[:0]
}

// writeTo copies another buffer's bytes into this one.
func (b *lineBuf) append(o *lineBuf) {
	b.buf = append(b.buf, o.buf...)
	b.lines += o.lines
	b.fail(o.err)
	if b.out != nil && len(b.buf) >= flushSize {
		b.flush()
	}
}

func (b *lineBuf) reset() {
	b.buf = b.buf[:0]
	b.lines = 0
}
