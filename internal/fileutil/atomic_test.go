package fileutil

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var exts = []string{".yaml", ".yml", ".json"}

// CheckOutput lets only regular files (or nothing yet) be written, and never an input.
func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.yaml")
	must(t, os.WriteFile(in, []byte("a: 1\n"), 0o644))
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	must(t, os.Symlink(fifo, filepath.Join(dir, "to-fifo")))
	must(t, os.Symlink(in, filepath.Join(dir, "to-input")))
	manifests := filepath.Join(dir, "manifests")
	must(t, os.Mkdir(manifests, 0o755))
	for _, tc := range []struct {
		path, want string
	}{
		{"/dev/null", "/dev/null is a device, not a regular file"},
		{fifo, "is a FIFO, not a regular file"},
		{filepath.Join(dir, "to-fifo"), "is a FIFO, not a regular file"},
		{manifests, "is a folder, not a regular file"},
		{in, "is also an input of this run"},
		{filepath.Join(dir, ".", "to-input"), "is also an input of this run"},
		{filepath.Join(manifests, "rules.yaml"), "is inside the input folder"},
		{filepath.Join(manifests, "rules.txt"), ""},
		{filepath.Join(dir, "new.rules"), ""},
	} {
		err := CheckOutput("-o", tc.path, []string{in, manifests, "-", ""}, exts)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
}

// A symbolic link is followed: the file it names is replaced and the link stays. A
// failed write leaves the old file and no temporary file.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.rules"), filepath.Join(dir, "link.rules")
	must(t, os.WriteFile(real, []byte("old\n"), 0o600))
	must(t, os.Symlink("real.rules", link))
	must(t, WriteFileAtomic(link, []byte("new\n")))
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new\n" {
		t.Errorf("the linked file holds %q", b)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the old file's 0600", fi.Mode().Perm())
	}
	err := WriteAtomic(real, func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("disk full")
	})
	if err == nil {
		t.Fatal("the write's error was lost")
	}
	if b, _ := os.ReadFile(real); string(b) != "new\n" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := WriteFileAtomic("/dev/null", nil); err == nil {
		t.Error("/dev/null was written")
	}
}

// SIGTERM during a write removes the temporary file, and the process still ends by
// the signal. The write runs in a child process (this test binary, FILEUTIL_WRITER set).
func TestSignalRemovesTemp(t *testing.T) {
	if dir := os.Getenv("FILEUTIL_WRITER"); dir != "" {
		WriteAtomic(filepath.Join(dir, "out.rules"), func(w io.Writer) error {
			io.WriteString(w, "partial")
			os.WriteFile(filepath.Join(dir, "started"), nil, 0o644)
			time.Sleep(time.Minute) // until the signal
			return nil
		})
		os.Exit(0)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTemp$")
	cmd.Env = append(os.Environ(), "FILEUTIL_WRITER="+dir)
	must(t, cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the writer did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the writer ended with %v, want killed by SIGTERM", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".out.rules.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left after SIGTERM: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.rules")); err == nil {
		t.Error("a half-written output was renamed into place")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
