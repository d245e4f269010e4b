package load

import (
	"bufio"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/svcgen/svcgen/load/internal/fastyaml"
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// How one input is read. Input that looks like JSON is read with jsontext (json.go);
// other input, or JSON that jsontext does not take, by the fast reader, in pieces
// side by side (split.go); and whatever they give up on, by yaml.v3 from the start,
// which also words the syntax errors. Each reader loads into a Loader of its own,
// which joins the caller's only when the reader read the whole input: what a reader
// that gave up loaded is dropped, never undone.

// source is one input for the readers: its text in memory, or a file that can be
// read again from the start.
type source struct {
	name string
	text string
	file io.ReadSeeker // nil: the input is text
	// check is how the file was last opened.
	check *checked
}

// open returns the input from its start, and its first bytes (for a look at what
// it is). A file is inspected as it is read (to the end with all); text was
// inspected before it is opened, and is read as it is, through no buffer.
func (s *source) open(max int64, all bool) (in io.Reader, head string, err error) {
	if s.file == nil {
		return strings.NewReader(s.text), s.text[:min(len(s.text), 512)], nil
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, "", err
	}
	s.check = &checked{r: s.file, c: inspector{max: max, all: all}}
	b := bufio.NewReaderSize(s.check, 256<<10)
	peek, _ := b.Peek(512)
	return b, string(peek), nil
}

// err is the error that stopped the last reading of the file: a reader (yaml.v3)
// may word it as an error of its own.
func (s *source) err() error {
	if s.check == nil {
		return nil
	}
	return s.check.err
}

// read loads one input; an error says why it could not (and nothing of it is
// loaded).
func (l *Loader) read(src *source) error {
	if src.file == nil {
		if err := inspect(&inspector{max: l.maxInput()}, src.text, true); err != nil {
			return err
		}
	}
	sub, err := l.readFast(src)
	if sub == nil && err == nil {
		sub, err = l.readReference(src)
	}
	if err != nil {
		return err
	}
	l.merge(sub)
	l.Tally.add(shown(src.name), &sub.count)
	return nil
}

// readFast reads src with the fast readers; nil, and no error, when they gave up
// (or l.Reader is Reference).
func (l *Loader) readFast(src *source) (*Loader, error) {
	if l.Reader == Reference {
		return nil, nil
	}
	in, head, err := src.open(l.maxInput(), false)
	if err != nil {
		return nil, err
	}
	if looksJSON(head) {
		sub := l.child()
		if ok, _ := sub.readDocs(src.name, 0, func(doc func(int, *tree.Node), item func(int, int, *tree.Node)) bool {
			return readJSON(in, doc, item)
		}); ok {
			return sub, nil
		}
		if in, _, err = src.open(l.maxInput(), false); err != nil {
			return nil, err
		}
	}
	var s *splitter
	if src.file != nil {
		s = splitReader(in, l.pieceSize())
	} else {
		// Text in memory is cut in as many pieces as there are cores: what a piece
		// saves in memory, text has spent already.
		s = splitText(src.text, max(l.pieceSize(), len(src.text)/runtime.GOMAXPROCS(0)))
	}
	return l.readYAML(src.name, s)
}

// readYAML reads YAML from s with the fast reader, its pieces side by side on every
// core; nil when the fast reader gave up on a piece.
func (l *Loader) readYAML(name string, s *splitter) (*Loader, error) {
	type job struct {
		piece
		sub *Loader
		ok  bool
	}
	read := func(j *job, slab *[]tree.Node) {
		var docs int
		j.ok, docs = j.sub.readDocs(name, j.first, func(doc func(int, *tree.Node), item func(int, int, *tree.Node)) bool {
			return fastyaml.Read(j.text, doc, item, slab)
		})
		j.ok = j.ok && docs == j.docs // later pieces are numbered from the count
		j.text = ""
	}
	var (
		jobs []*job
		todo chan *job
		wg   sync.WaitGroup
		err  error
	)
	for first := 0; ; {
		p, more, e := s.next(first)
		if err = e; err != nil || !more {
			break
		}
		jobs = append(jobs, &job{piece: p, sub: l.child()})
		first += p.docs
		if len(jobs) == 2 {
			// Two pieces at least: read them on every core.
			todo = make(chan *job)
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					var slab []tree.Node // the fast reader's memory, used again piece after piece
					for j := range todo {
						read(j, &slab)
					}
				})
			}
			todo <- jobs[0]
		}
		if todo != nil {
			todo <- jobs[len(jobs)-1]
		}
	}
	if todo != nil {
		close(todo)
		wg.Wait()
	} else if err == nil {
		var slab []tree.Node
		read(jobs[0], &slab)
	}
	if err != nil {
		return nil, err
	}
	out := l.child()
	for _, j := range jobs {
		if !j.ok {
			return nil, nil
		}
		out.merge(j.sub)
	}
	return out, nil
}

// readDocs loads the documents that read hands over into l, the first numbered
// first+1, and reports whether the reader managed and how many documents it read.
// Items that the reader streams (a List's) are loaded on their own and join l when
// their document turns out a List: otherwise they mean nothing.
func (l *Loader) readDocs(name string, first int, read func(doc func(int, *tree.Node), item func(int, int, *tree.Node)) bool) (ok bool, docs int) {
	var items *Loader
	file := shown(name)
	ok = read(func(doc int, n *tree.Node) {
		docs++
		if items != nil && isList(n) {
			l.merge(items)
		}
		items = nil
		l.document(model.Origin{File: file, Doc: first + doc}, n)
	}, func(doc, i int, item *tree.Node) {
		if items == nil {
			items = l.child()
		}
		items.listItem(model.Origin{File: file, Doc: first + doc}, i, item)
	})
	return ok, docs
}

// readReference reads src with yaml.v3, checked for UTF-8 and control characters to
// the end: yaml.v3 words them as syntax errors of its own, and where it finds them
// depends on how much it read at once.
func (l *Loader) readReference(src *source) (*Loader, error) {
	if src.file == nil {
		if err := inspect(&inspector{max: l.maxInput(), all: true}, src.text, true); err != nil {
			return nil, err
		}
	}
	in, _, err := src.open(l.maxInput(), true)
	if err != nil {
		return nil, err
	}
	sub := l.child()
	dec := yaml.NewDecoder(in)
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return sub, nil
		}
		if err != nil {
			// What is wrong with the input as a whole comes first, as it does when
			// the input is text, checked before yaml.v3 reads it.
			io.Copy(io.Discard, in)
		}
		if err := src.err(); err != nil {
			return nil, err
		}
		origin := model.Origin{File: shown(src.name), Doc: doc}
		if err != nil {
			// The decoder cannot resynchronise after a syntax error.
			sub.Errors.Add(origin, "", "%s", yamlError(err))
			return sub, nil
		}
		t, usable := tree.FromYAML(&n, func(at tree.Path, msg string) {
			sub.Errors.Add(origin, at.String(), "%s", msg)
		})
		if usable {
			sub.document(origin, &t)
		}
	}
}
