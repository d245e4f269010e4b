package ipvsadm

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/load"
)

// FuzzScript feeds arbitrary manifests through load, resolve, compile and the ipvs
// script: never a panic, the same bytes twice, a script that reads back as the state
// it was written from, and no byte in it that could leave a comment or a quoted word.
func FuzzScript(f *testing.F) {
	seeds, _ := filepath.Glob("../../golden/*/input.yaml")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := buildBytes(data)
		if !ok {
			return
		}
		var a, b bytes.Buffer
		if err := WriteScript(&a, n, Header{}); err != nil {
			return // refused text is fine; a panic or a bad script is not
		}
		if err := WriteScript(&b, n, Header{}); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("the same state gave two scripts")
		}
		for _, c := range a.String() {
			if c != '\n' && c != '\t' && (c < 0x20 || c == 0x7f) {
				t.Fatalf("control character %q in the script", c)
			}
		}
		back, err := ParseScript("fuzz", bytes.NewReader(a.Bytes()))
		if err != nil {
			t.Fatalf("the script does not read back: %v", err)
		}
		for _, vs := range n.Services {
			vs.For = nil
		}
		if !reflect.DeepEqual(back, n) {
			t.Fatalf("the script reads back as another state")
		}
		if strings.Count(a.String(), "<<'") != 4 {
			t.Fatal("the script does not have its four here-documents")
		}
	})
}

func buildBytes(data []byte) (*Node, bool) {
	l := &load.Loader{}
	l.Bytes("fuzz.yaml", data)
	if l.Errors.Err() != nil {
		return nil, false
	}
	r, err := compiler.Resolve(&l.Cluster, compiler.ResolveOptions{})
	if err != nil {
		return nil, false
	}
	sm, err := compiler.Compile(r.Cluster, compiler.Options{Mode: compiler.IPVS})
	if err != nil {
		return nil, false
	}
	return Build(sm), true
}
