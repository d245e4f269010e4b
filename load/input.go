package load

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/svcgen/svcgen/internal/textutil"
)

// StdinName is how stdin is named in messages.
const StdinName = "<stdin>"

// Path loads a file or a folder; "-" reads stdin. A folder is read recursively, its
// regular *.yaml, *.yml and *.json files only; a file named here is read whatever it
// is, a FIFO or a device as a stream (as stdin is). What cannot be read goes to
// InputErrors, with why.
func (l *Loader) Path(path string, stdin io.Reader) {
	if err := l.path(path, stdin); err != nil {
		l.InputErrors = append(l.InputErrors, err)
	}
}

func (l *Loader) path(path string, stdin io.Reader) error {
	if path == "-" {
		return l.stream(StdinName, stdin)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return PathError(path, err)
	case info.IsDir():
		return l.folder(path)
	case info.Mode().IsRegular():
		return l.file(path, 0)
	}
	fh, err := os.Open(path)
	if err != nil {
		return PathError(path, err)
	}
	defer fh.Close()
	return l.stream(path, fh)
}

// PathError names the input the file system could not read, as the loader names
// inputs ("m.yaml: no such file or directory"), without the system call.
func PathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", textutil.Quote(path), pe.Err)
	}
	return err
}

// fileID is a file as the kernel knows it, whatever the name it is reached by.
type fileID struct{ dev, ino uint64 }

// again reports whether the file was read already (named twice, or by a folder and
// by name, or through a link), and remembers it.
func (l *Loader) again(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	id := fileID{uint64(st.Dev), st.Ino}
	if l.files[id] {
		return true
	}
	if l.files == nil {
		l.files = map[fileID]bool{}
	}
	l.files[id] = true
	return false
}

// folder reads the manifests of a folder and the folders in it.
func (l *Loader) folder(dir string) error {
	files, passed, err := folderFiles(dir)
	if err != nil {
		return err
	}
	l.InputWarnings = append(l.InputWarnings, passed...)
	for _, f := range files {
		// Opened without waiting, in case it is no longer a regular file by now.
		if err := l.file(f, syscall.O_NONBLOCK); err != nil {
			l.InputErrors = append(l.InputErrors, err)
		}
	}
	return nil
}

// Files lists the files Path reads for path, in the order it reads them: path itself
// when it is no folder; else the folder's manifests, with warnings for those it
// passes over.
func Files(path string) (files []string, passed []error, err error) {
	if path == "-" {
		return []string{path}, nil, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil, nil
	}
	return folderFiles(path)
}

// folderFiles lists the regular manifest files under dir (through links too),
// sorted, and warnings for the others, which are passed over: a FIFO would wait for
// a writer for ever, a device may never end.
func folderFiles(dir string) (files []string, passed []error, err error) {
	all, err := manifestFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 {
		return nil, nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files in this folder", textutil.Quote(dir))
	}
	for _, f := range all {
		info, err := os.Stat(f)
		switch {
		case err != nil:
			return nil, nil, err
		case !info.Mode().IsRegular():
			passed = append(passed, fmt.Errorf("%s: passed over: %s, not a regular file (name it with -f to read it)", textutil.Quote(f), fileType(info.Mode())))
		default:
			files = append(files, f)
		}
	}
	return files, passed, nil
}

// fileType names what a file that is not a regular file is.
func fileType(m fs.FileMode) string {
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
	return "a special file"
}

// manifestFiles lists the manifest files under dir, sorted, skipping hidden folders.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if IsManifest(p) {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// IsManifest reports whether a file in a folder is read: *.yaml, *.yml, *.json.
func IsManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// file reads a regular file, opened with flag besides O_RDONLY.
func (l *Loader) file(path string, flag int) error {
	fh, err := os.OpenFile(path, os.O_RDONLY|flag, 0)
	if err != nil {
		return PathError(path, err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	switch {
	case err != nil:
		return PathError(path, err)
	case l.again(info):
		return nil
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s: %s, not a regular file", textutil.Quote(path), fileType(info.Mode()))
	case info.Size() > l.maxInput():
		return named(path, tooLarge(l.maxInput()))
	}
	return named(path, l.read(&source{name: path, file: fh}))
}

// stream reads stdin, a FIFO or a device once, whole (up to MaxInput), inspecting
// it as it comes: binary data stops it at once.
func (l *Loader) stream(name string, r io.Reader) error {
	var text strings.Builder
	if _, err := io.Copy(&text, &checked{r: r, c: inspector{max: l.maxInput(), nul: true}}); err != nil {
		var bad *inputError
		if !errors.As(err, &bad) {
			return fmt.Errorf("reading %s: %w", textutil.Quote(name), err)
		}
		return named(name, err)
	}
	return named(name, l.read(&source{name: name, text: text.String()}))
}

// named puts the input's name in front of the loader's own errors about it; an
// error of the file system names it already.
func named(name string, err error) error {
	var bad *inputError
	if errors.As(err, &bad) {
		return fmt.Errorf("%s: %w", textutil.Quote(name), err)
	}
	return err
}

// Bytes loads the documents of one input named name.
func (l *Loader) Bytes(name string, data []byte) { l.Text(name, string(data)) }

// Text loads the documents of one input named name.
func (l *Loader) Text(name, src string) { l.load(&source{name: name, text: src}) }

// load reads one input, and records why when it cannot.
func (l *Loader) load(src *source) {
	if err := l.read(src); err != nil {
		l.InputErrors = append(l.InputErrors, named(src.name, err))
	}
}
