package load

import (
	"bytes"
	"io"
	"strings"
)

// pieceSize is the least input worth a piece of its own: below it a goroutine costs
// more than it saves. Read from a file, a piece is also how much of the input is in
// memory at once (for each core).
const pieceSize = 1 << 20

// A splitter cuts YAML input into pieces that the fast reader reads side by side:
// each piece holds at least min bytes (but the last, read from a reader) and ends
// just before the first "---" line after that, so each piece but the first starts
// with one. It is the one
// place where input is cut; the pieces make up the input exactly.
//
// Input in memory is cut into substrings of it. Input from a reader is read piece by
// piece, so that a large file is never in memory whole (at 10,000 Services it is
// 18 MB, which would otherwise be live beside the model while it is built, and
// double the heap the process grows to); each piece is a string of its own.
type splitter struct {
	min   int
	first bool // the next piece is the first
	// text is the input in memory still to cut; r is nil then.
	text string
	// r is the input to read, buf what has been read of it but not cut yet.
	r   io.Reader
	buf []byte
	eof bool
	// searched counts the bytes searched for a cut, for a test.
	searched int
}

func splitText(text string, min int) *splitter {
	return &splitter{min: min, first: true, text: text}
}

func splitReader(r io.Reader, min int) *splitter {
	return &splitter{min: min, first: true, r: r, buf: make([]byte, 0, min+chunk)}
}

// piece is a piece of the input and its documents, numbered as yaml.v3 numbers
// them: first documents come before it.
type piece struct {
	text        string
	first, docs int
}

// next returns the next piece; false after the last one. The first piece is
// returned even when the input is empty.
func (s *splitter) next(first int) (p piece, ok bool, err error) {
	if !s.first && s.text == "" && len(s.buf) == 0 && (s.r == nil || s.eof) {
		return piece{}, false, nil
	}
	var text string
	if s.r == nil {
		// Text is cut only where what remains is worth a piece too.
		cut := len(s.text)
		if c := markerAfter(s.text, s.min); c >= 0 && len(s.text)-c >= s.min {
			cut = c
		}
		text, s.text = s.text[:cut], s.text[cut:]
	} else {
		if text, err = s.read(); err != nil {
			return piece{}, false, err
		}
	}
	p = piece{text: text, first: first, docs: countDocuments(text, s.first)}
	s.first = false
	return p, true, nil
}

// read reads the next piece from the reader: at least min bytes, then on until the
// first "---" line after them, or the end. It reads min bytes, then steps of a
// chunk, so that what it has read past the cut, to go into the next piece, is small.
func (s *splitter) read() (string, error) {
	from := s.min // markers before this offset are no cut
	for !s.eof {
		if len(s.buf) >= s.min {
			s.searched += len(s.buf) - from
			if cut := markerAfter(s.buf, from); cut >= 0 {
				text := string(s.buf[:cut])
				s.buf = s.buf[:copy(s.buf, s.buf[cut:])]
				return text, nil
			}
			// Search only what comes next (but a marker's start at the end).
			from = max(from, len(s.buf)-len("\n---"))
		}
		want := s.min
		if len(s.buf) >= s.min {
			want = len(s.buf) + chunk
		}
		if want > cap(s.buf) {
			s.buf = append(s.buf[:cap(s.buf)], make([]byte, want-cap(s.buf))...)[:len(s.buf)]
		}
		n, err := s.r.Read(s.buf[len(s.buf):want])
		s.buf = s.buf[:len(s.buf)+n]
		switch {
		case err == io.EOF:
			s.eof = true
		case err != nil:
			return "", err
		}
	}
	text := string(s.buf)
	s.buf = s.buf[:0]
	return text, nil
}

// chunk is how much more the splitter reads at a time once it holds min bytes.
const chunk = 64 << 10

// markerAfter is the offset of the first "---" line in b that starts after from (after
// a line break), -1 when b holds none, or its last line may be one not yet read whole.
func markerAfter[T string | []byte](b T, from int) int {
	for from < len(b) {
		i := indexMarker(b[from:])
		if i < 0 {
			return -1
		}
		at := from + i + 1
		switch s := b[at:]; {
		case len(s) == 3:
			return -1 // a "---" at the end of what was read: the line goes on, or not
		case s[3] == ' ' || s[3] == '\n':
			return at
		}
		from = at
	}
	return -1
}

// indexMarker finds "\n---" in b.
func indexMarker[T string | []byte](b T) int {
	if s, ok := any(b).(string); ok {
		return strings.Index(s, "\n---")
	}
	return bytes.Index(any(b).([]byte), []byte("\n---"))
}

// isMarker reports a "---" line at the start of s.
func isMarker(s string) bool {
	return strings.HasPrefix(s, "---") && (len(s) == 3 || s[3] == ' ' || s[3] == '\n')
}

// countDocuments counts the documents of a piece: one per "---" line, and in the
// first piece one more when content comes before the first "---".
func countDocuments(piece string, firstPiece bool) int {
	n := 0
	implicit := false
	for line := range strings.Lines(piece) {
		switch t := strings.TrimLeft(line, " "); {
		case isMarker(line):
			n++
		case n == 0 && firstPiece && t != "\n" && t != "" && t[0] != '#':
			implicit = true
		}
	}
	if implicit {
		n++
	}
	return n
}
