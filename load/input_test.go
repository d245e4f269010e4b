package load

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const okService = "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\nspec: {ports: [{port: 80}]}\n"

// A folder's FIFO, device or socket is passed over, with a warning naming it: a
// FIFO would wait for a writer for ever, and a *.yaml link to /dev/zero was read
// until memory ran out. The folder's regular files, through links too, are read.
func TestFolderReadsRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), okService)
	write(t, filepath.Join(dir, "real.txt"), strings.Replace(okService, "ok", "linked", 1))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"zero.yaml": "/dev/zero", "b.yaml": filepath.Join(dir, "real.txt"), "sub.json": os.TempDir()} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	l := &Loader{}
	l.Path(dir, nil)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if len(l.Cluster.Services) != 2 {
		t.Errorf("%d services, want 2 (a.yaml and b.yaml)", len(l.Cluster.Services))
	}
	want := []string{
		dir + "/fifo.yaml: passed over: a FIFO, not a regular file (name it with -f to read it)",
		dir + "/sub.json: passed over: a folder, not a regular file (name it with -f to read it)",
		dir + "/zero.yaml: passed over: a device, not a regular file (name it with -f to read it)",
	}
	if got := fmt.Sprint(l.InputWarnings); got != fmt.Sprint(want) {
		t.Errorf("warnings\n%s\nwant\n%s", got, want)
	}
	files, passed, err := Files(dir)
	if err != nil || len(files) != 2 || len(passed) != 3 {
		t.Errorf("Files: %q, %d passed over, %v", files, len(passed), err)
	}
}

// A file named twice, by a folder and by name, or through a link is read once (it
// was read each time, so its Services were "defined twice"); inputs that cannot be
// read are each named, without the system call.
func TestFileReadOnce(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, okService)
	link := filepath.Join(t.TempDir(), "link.yaml")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	l := &Loader{}
	for _, p := range []string{a, a, dir, link, filepath.Join(dir, "missing.yaml"), filepath.Join(dir, "gone.yaml")} {
		l.Path(p, nil)
	}
	want := fmt.Sprintf("[%[1]s/missing.yaml: no such file or directory %[1]s/gone.yaml: no such file or directory]", dir)
	if got := fmt.Sprint(l.InputErrors); got != want {
		t.Errorf("input errors\n%s\nwant\n%s", got, want)
	}
	if err := l.Errors.Err(); err != nil || len(l.Cluster.Services) != 1 {
		t.Errorf("%d Services, %v; want one", len(l.Cluster.Services), err)
	}
}

// A FIFO named as an input is read, as a stream.
func TestNamedFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		fh, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		io.WriteString(fh, okService)
		fh.Close()
	}()
	l := &Loader{}
	l.Path(fifo, nil)
	if err := l.Err(); err != nil || len(l.Cluster.Services) != 1 {
		t.Errorf("%d services, %v", len(l.Cluster.Services), err)
	}
}

// endless reads the same text for ever, and counts what it gave.
type endless struct {
	text string
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.text[int(e.read+int64(n))%len(e.text):])
	}
	e.read += int64(n)
	return n, nil
}

// A stream (stdin, a FIFO, a device) is read up to MaxInput; binary data is found in
// its first block, before more of it is read.
func TestStreamsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		most             int64
	}{
		{"zeros", "\x00", `<stdin>: not a YAML or JSON manifest: binary data (a NUL byte at offset 0)`, 64 << 10},
		{"random", "apiVersion: v1\n\xa3\x10", `<stdin>: not a YAML or JSON manifest: not UTF-8 (a byte 0xa3 at offset 15)`, 64 << 10},
		{"late NUL", strings.Repeat("a", 100<<10) + "\x00", `<stdin>: not a YAML or JSON manifest: binary data (a NUL byte at offset 102400)`, 200 << 10},
		{"text", "# no end\n", `<stdin>: larger than 1 MiB, the most svcgen reads from one input`, 1<<20 + 64<<10},
	} {
		in := &endless{text: tc.text}
		l := &Loader{MaxInput: 1 << 20}
		l.Path("-", in)
		if got := fmt.Sprint(l.Err()); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if in.read > tc.most {
			t.Errorf("%s: read %d bytes, want at most %d", tc.name, in.read, tc.most)
		}
	}
}

// A regular file larger than MaxInput is refused before it is read; one that is not
// UTF-8 is reported as such, however it is read.
func TestFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 300<<20); err != nil { // sparse: 300 MiB of NUL bytes
		t.Fatal(err)
	}
	latin1 := filepath.Join(dir, "latin1.yaml")
	text := strings.Repeat(okService+"---\n", 2000) + "# caf\xe9\n" // past the first block
	write(t, latin1, text)
	for _, r := range []Reader{Fast, Reference} {
		l := &Loader{Reader: r}
		l.Path(big, nil)
		l.Path(latin1, nil)
		want := big + ": larger than 256 MiB, the most svcgen reads from one input\n" +
			latin1 + fmt.Sprintf(": not a YAML or JSON manifest: not UTF-8 (a byte 0xe9 at offset %d)", strings.Index(text, "\xe9"))
		if got := fmt.Sprint(l.Err()); got != want || len(l.Cluster.Services) != 0 {
			t.Errorf("reader %q: %d services, errors\n%s\nwant\n%s", r, len(l.Cluster.Services), got, want)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
