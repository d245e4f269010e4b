package load

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/svcgen/svcgen/load/internal/fastyaml"
	"github.com/svcgen/svcgen/load/internal/tree"
)

// streamYAML reads a YAML file in pieces of about min bytes (pieceSize), each cut before a
// "---" line as splitDocuments cuts a string, with the fast reader on every core:
// the whole file is never in memory (at 10,000 Services it is 18 MB, which would
// otherwise be live beside the model while it is built, and double the heap the
// process grows to). It returns false, l untouched, when the fast reader gave up on
// a piece; the caller then reads the file whole.
func (l *Loader) streamYAML(name string, in io.Reader, min int) (bool, error) {
	type piece struct {
		text        string
		first, docs int
		sub         *Loader
		ok          bool
	}
	var (
		pieces []*piece
		todo   = make(chan *piece)
		wg     sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var slab []tree.Node // the fast reader's memory, used again piece after piece
			read := func(src string, fn func(int, *tree.Node), item func(int, int, *tree.Node)) bool {
				return fastyaml.Read(src, fn, item, &slab)
			}
			for p := range todo {
				var docs int
				p.ok, docs = p.sub.readPiece(name, p.text, p.first, read)
				p.ok = p.ok && docs == p.docs // later pieces are numbered from the count
				p.text = ""
			}
		})
	}
	err := splitStream(in, min, func(text string, firstPiece bool) {
		p := &piece{text: text, docs: countDocuments(text, firstPiece), sub: &Loader{Dialect: l.Dialect}}
		if n := len(pieces); n > 0 {
			p.first = pieces[n-1].first + pieces[n-1].docs
		}
		pieces = append(pieces, p)
		todo <- p
	})
	close(todo)
	wg.Wait()
	if err != nil {
		return false, err
	}
	for _, p := range pieces {
		if !p.ok {
			return false, nil
		}
	}
	for _, p := range pieces {
		l.Cluster.Append(&p.sub.Cluster)
		l.Errors.Merge(&p.sub.Errors)
		l.Warnings.Merge(&p.sub.Warnings)
	}
	return true, nil
}

// errBinary stops splitStream at a NUL byte: the input is not YAML, and Text says so.
var errBinary = errors.New("binary data")

// splitStream reads in and calls piece with pieces of it, each at least min bytes
// (but the last) and cut before the first "---" line after that, as nextMarker finds
// it; false for the pieces after the first.
func splitStream(in io.Reader, min int, piece func(text string, firstPiece bool)) error {
	r := bufio.NewReaderSize(in, 64<<10)
	buf := make([]byte, 0, 2*min)
	first := true
	for eof := false; !eof; {
		// Read at least min bytes, then on to the end of a line.
		for len(buf) < min && !eof {
			n, err := io.ReadFull(r, buf[len(buf):min])
			buf = buf[:len(buf)+n]
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		cut := -1
		for !eof {
			if cut = markerAfter(buf, min); cut >= 0 {
				break
			}
			line, err := r.ReadSlice('\n')
			for errors.Is(err, bufio.ErrBufferFull) {
				buf = append(buf, line...)
				line, err = r.ReadSlice('\n')
			}
			buf = append(buf, line...)
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		if cut < 0 {
			cut = len(buf)
		}
		if bytes.IndexByte(buf[:cut], 0) >= 0 {
			return errBinary
		}
		if cut > 0 || first {
			piece(string(buf[:cut]), first)
		}
		first = false
		buf = buf[:copy(buf, buf[cut:])]
		if eof && len(buf) > 0 {
			piece(string(buf), false)
		}
	}
	return nil
}

// markerAfter is the offset of the first "---" line starting after from in b (after
// a line break), -1 when b holds none (yet) or its last line may be one not yet read
// whole.
func markerAfter(b []byte, from int) int {
	for from < len(b) {
		i := bytes.Index(b[from:], []byte("\n---"))
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
