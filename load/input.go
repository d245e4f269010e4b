package load

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// StdinName is how stdin is named in messages.
const StdinName = "<stdin>"

// Path loads a file or a folder; "-" reads stdin.
func (l *Loader) Path(path string, stdin io.Reader) error {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		l.Bytes(StdinName, data)
		return nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return l.file(path)
	}
	files, err := manifestFiles(path)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no *.yaml, *.yml or *.json files in this folder", path)
	}
	for _, f := range files {
		if err := l.file(f); err != nil {
			return err
		}
	}
	return nil
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

func (l *Loader) file(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		// A pipe is read once: whole.
		text, err := io.ReadAll(fh)
		if err != nil {
			return err
		}
		l.Bytes(path, text)
		return nil
	}
	return l.read(&source{name: path, file: fh})
}

// Bytes loads the documents of one input named name.
func (l *Loader) Bytes(name string, data []byte) { l.Text(name, string(data)) }

// Text loads the documents of one input named name.
func (l *Loader) Text(name, src string) {
	// Text in memory is checked and read, never fails to be read.
	_ = l.read(&source{name: name, text: src})
}
