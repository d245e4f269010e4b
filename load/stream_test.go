package load

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// The splitter's pieces make up the input, whether it cuts text or reads it; each
// piece but the first starts at a "---" line and each but the last holds at least
// min bytes; text and reader are cut alike, but that text keeps a short last piece
// with the one before.
func TestSplitter(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	for name, src := range map[string]string{
		"empty":       "",
		"no marker":   strings.Repeat("a: 1\n", 100),
		"markers":     strings.Repeat("a: 1\n---\nb: 2\n", 100),
		"not markers": strings.Repeat("a: 1\n---x\n--- \n----\n", 50) + "---",
		"long lines":  "a: " + long + "\n---\nb: " + long + "\n---\nc: 1\n",
		"end marker":  strings.Repeat("a: 1\n", 30) + "---",
	} {
		for _, min := range []int{1, 7, 64, 1000} {
			text := pieces(t, splitText(src, min))
			read := pieces(t, splitReader(iotest.HalfReader(strings.NewReader(src)), min))
			// Text is cut as a reader is, but where the last piece would be short.
			same := read
			if n := len(read); n > 1 && len(read[n-1]) < min {
				same = append(read[:n-2:n-2], read[n-2]+read[n-1])
			}
			if strings.Join(text, "|") != strings.Join(same, "|") {
				t.Errorf("%s/%d: text and reader cut apart: %d and %d pieces", name, min, len(text), len(read))
			}
			if got := strings.Join(read, ""); got != src {
				t.Errorf("%s/%d: the pieces make %q", name, min, got)
			}
			for i, p := range read {
				if i > 0 && !isMarker(p) {
					t.Errorf("%s/%d: piece %d starts %q", name, min, i, p[:len(p)/2])
				}
				if i < len(read)-1 && len(p) < min {
					t.Errorf("%s/%d: piece %d has %d bytes", name, min, i, len(p))
				}
			}
			if name == "markers" && min == 64 && len(read) < 10 {
				t.Errorf("%s/%d: only %d pieces", name, min, len(read))
			}
		}
	}
	_, _, err := splitReader(iotest.ErrReader(io.ErrClosedPipe), 1).next(0)
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read error: %v", err)
	}
}

// pieces are the texts of every piece s cuts, checking that each is numbered after
// the documents before it.
func pieces(t *testing.T, s *splitter) []string {
	t.Helper()
	var out []string
	for first := 0; ; {
		p, more, err := s.next(first)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return out
		}
		if p.first != first {
			t.Fatalf("piece %d numbered from %d, want %d", len(out), p.first, first)
		}
		first += p.docs
		out = append(out, p.text)
	}
}

// A document of many megabytes, a List as "kubectl get -o yaml" prints it, is read
// from a file in linear time: the splitter looks for a cut only in what it has not
// searched yet (it searched the whole of what it held after each read, which took
// minutes for a few megabytes).
func TestSplitterOneLargeDocument(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for b.Len() < 4<<20 {
		b.WriteString("- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n")
	}
	s := splitReader(iotest.HalfReader(strings.NewReader(b.String())), 1000)
	got := pieces(t, s)
	if len(got) != 1 || got[0] != b.String() {
		t.Errorf("%d pieces", len(got))
	}
	if s.searched > 2*b.Len() {
		t.Errorf("searched %d bytes of %d for a cut", s.searched, b.Len())
	}
}
