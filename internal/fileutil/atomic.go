// Package fileutil writes files so that readers never see half of one, and so that a
// write never replaces what it must not: a device, a FIFO, a folder, or a file the
// same run reads.
package fileutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// WriteAtomic writes a file through a temporary file in the same folder and a rename:
// on any error the old file (if any) is left as it was and no temporary file remains.
// A symbolic link is followed (the file it names is replaced, the link stays); the
// target must be a regular file or not exist (CheckOutput).
func WriteAtomic(path string, write func(io.Writer) error) (err error) {
	path, err = target(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	stop := removeOnSignal(tmp.Name())
	defer func() {
		stop()
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi, statErr := os.Stat(path); statErr == nil {
		mode = fi.Mode().Perm()
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteFileAtomic writes bytes atomically.
func WriteFileAtomic(path string, data []byte) error {
	return WriteAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// removeOnSignal removes the temporary file name if SIGINT or SIGTERM arrives before
// the returned stop is called, then lets the signal end the process as it would have.
func removeOnSignal(name string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			os.Remove(name)
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// target is the path a write replaces: path with its symbolic links followed. It is an
// error for it to be anything but a regular file (or nothing yet).
func target(path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Nothing there yet (or a link to nothing: write where it points).
		if dest, lerr := os.Readlink(path); lerr == nil {
			if !filepath.IsAbs(dest) {
				dest = filepath.Join(filepath.Dir(path), dest)
			}
			return dest, nil
		}
		return path, nil
	case err != nil:
		return "", err
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is %s, not a regular file: svcgen writes only regular files (leave -o out to write to stdout)", path, kind(fi.Mode()))
	}
	return resolved, nil
}

// kind names what a non-regular file is.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// CheckOutput checks, before anything is read or written, that path may be written:
// it is a regular file or nothing yet (symbolic links followed), and it is none of
// the run's inputs. inputs are files and folders the run reads; a folder is read
// recursively for manifests (exts), so a manifest file inside it counts as an input.
func CheckOutput(flag, path string, inputs []string, exts []string) error {
	dest, err := target(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		if same(dest, in) {
			return fmt.Errorf("%s: %s is also an input of this run; write the output elsewhere", flag, path)
		}
		if inside(dest, in) && hasExt(dest, exts) {
			return fmt.Errorf("%s: %s is inside the input folder %s, which the next run would read as a manifest; write the output elsewhere", flag, path, in)
		}
	}
	return nil
}

// same reports whether two paths name the same file (or would: an output not yet
// written is compared by its cleaned absolute path).
func same(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, _ := filepath.Abs(a)
	absB, _ := filepath.Abs(b)
	return absA == absB
}

// inside reports whether path lies under the folder dir.
func inside(path, dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	absDir, err1 := filepath.EvalSymlinks(dir)
	absPath, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	absDir, _ = filepath.Abs(absDir)
	if realParent, err := filepath.EvalSymlinks(filepath.Dir(absPath)); err == nil {
		absPath = filepath.Join(realParent, filepath.Base(absPath))
	}
	rel, err := filepath.Rel(absDir, absPath)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

func hasExt(path string, exts []string) bool {
	for _, e := range exts {
		if strings.HasSuffix(path, e) {
			return true
		}
	}
	return false
}

// Exclusive takes an exclusive lock that serialises the runs that read and then rewrite
// the file path (--lock): the folder that holds it is locked with flock(2), since the
// file itself is replaced by a rename and a lock on it would stay with the old file.
// It waits until the lock is free; unlock releases it.
func Exclusive(path string) (unlock func(), err error) {
	dir := filepath.Dir(path)
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s for %s: %w", dir, path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
