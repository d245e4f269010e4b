package load

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// What the loader checks of every input before any reader trusts it, whichever way
// it is read (text, file or stream) and whichever reader reads it, so that a bad
// input is reported alike on every path:
//
//   - its size: at most MaxInput bytes (DefaultMaxInput, 256 MiB), checked before a
//     regular file is read and as any input is read, so that a link to /dev/zero or
//     an endless pipe stops there;
//   - its first block (headSize): a NUL byte or invalid UTF-8 there says the input is
//     binary before much of it is read (a stream is searched for NUL bytes to its
//     end as it is read, as it is read whole before any reader starts).
//
// Beyond the first block the fast readers give up on NUL bytes, invalid UTF-8 and
// control characters, and yaml.v3, the reader they leave the input to, gets it
// checked for all three to the end before it reads it: the input's first problem is
// reported, on every path. (A search of the whole input for NUL bytes up front cost
// 2% of reading a JSON List.)

// DefaultMaxInput is how many bytes svcgen reads from one input at most: about 15
// times the 10,000-Service cluster as kubectl prints it (18 MB of YAML, 46 MB of
// JSON).
const DefaultMaxInput = 256 << 20

// headSize is the first block of an input, where invalid UTF-8 is looked for before
// any reader starts.
const headSize = 64 << 10

// inputError is why an input is not a manifest, or was not read.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func notManifest(format string, args ...any) error {
	return &inputError{"not a YAML or JSON manifest: " + fmt.Sprintf(format, args...)}
}

func tooLarge(max int64) error {
	return &inputError{fmt.Sprintf("larger than %s, the most svcgen reads from one input", size(max))}
}

// size writes a number of bytes for a message: "256 MiB".
func size(n int64) string {
	for _, u := range []struct {
		unit  string
		bytes int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.bytes && n%u.bytes == 0 {
			return fmt.Sprintf("%d %s", n/u.bytes, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// inspector checks an input as it is read, in consecutive parts (see inspect).
type inspector struct {
	max int64
	// all: check UTF-8 to the end, not only in the first block, and the
	// characters YAML allows; nul: look for NUL bytes to the end (a stream, read
	// whole before any reader starts, stops at the first).
	all, nul bool
	off      int64
	// pending is the start of a character cut short at the end of the last part.
	pending string
}

// inspect checks the part p of an input, which comes after what was checked so far;
// eof: it is the last part.
func inspect[T string | []byte](c *inspector, p T, eof bool) error {
	// The problem first in the input is the one reported, however it is read.
	over := c.off+int64(len(p)) > c.max
	if over {
		p, eof = p[:c.max-c.off], false
	}
	text := p // what is checked for UTF-8: the first block, or all of it
	if !c.all && c.off+int64(len(p)) > headSize {
		text, eof = p[:max(0, headSize-c.off)], false
	}
	nul := -1
	if c.all || c.nul {
		nul = indexNUL(p)
	} else {
		nul = indexNUL(text)
	}
	if nul >= 0 && nul < len(text) {
		// Up to the NUL byte, which no character goes on into.
		text, eof = text[:nul], true
	}
	if len(text) > 0 || c.pending != "" {
		if err := c.utf8(string(text), eof); err != nil {
			return err
		}
	}
	if nul >= 0 {
		return notManifest("binary data (a NUL byte at offset %d)", c.off+int64(nul))
	}
	if over {
		return tooLarge(c.max)
	}
	c.off += int64(len(p))
	return nil
}

// utf8 checks text, which starts at c.off, for invalid UTF-8, and with all for the
// control characters that YAML does not allow; a character it cuts short at its end
// is checked with the next part, unless it is the last.
func (c *inspector) utf8(text string, eof bool) error {
	start := c.off - int64(len(c.pending))
	if c.pending != "" {
		text = c.pending + text
		c.pending = ""
	}
	if !c.all && utf8.ValidString(text) {
		return nil
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			if rest := text[i:]; !eof && len(rest) < utf8.UTFMax && !utf8.FullRuneInString(rest) {
				c.pending = rest
				return nil
			}
			return notManifest("not UTF-8 (a byte 0x%02x at offset %d)", text[i], start+int64(i))
		case c.all && !yamlChar(r):
			return notManifest("a control character (%U at offset %d)", r, start+int64(i))
		}
		i += n
	}
	return nil
}

// yamlChar reports a character that YAML allows in a document (yaml.v3 reports any
// other as a syntax error, found where its buffer happens to end: so the reference
// reader's input is checked for them first).
func yamlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7e || r == 0x85 ||
		r >= 0xa0 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff
}

// invalidUTF8 is the offset of the first byte of text that is not UTF-8, -1 when
// every byte is.
func invalidUTF8(text string) int {
	if utf8.ValidString(text) {
		return -1
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// indexNUL is the offset of the first NUL byte, -1 when there is none. It searches
// a block at a time: one search of 46 MB of text is a few milliseconds in which the
// goroutine cannot be preempted, and the garbage collector spun waiting for it,
// again and again (a fifth more CPU for a JSON List at 10k).
func indexNUL[T string | []byte](p T) int {
	for off := 0; off < len(p); off += headSize {
		block := p[off:min(off+headSize, len(p))]
		var i int
		if s, ok := any(block).(string); ok {
			i = strings.IndexByte(s, 0)
		} else {
			i = bytes.IndexByte(any(block).([]byte), 0)
		}
		if i >= 0 {
			return off + i
		}
	}
	return -1
}

// checked is a reader that inspects what it reads and stops, with an error that
// stays, at the first problem.
type checked struct {
	r   io.Reader
	c   inspector
	err error
}

func (c *checked) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if bad := inspect(&c.c, p[:n], err == io.EOF); bad != nil {
		c.err = bad
		return 0, bad
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}
