package load_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	"github.com/svcgen/svcgen/load"
)

// FuzzLoad feeds arbitrary bytes through load, resolve, compile and the iptables
// emitter. It must never panic, must give the same bytes twice, and every line it
// writes must be a line iptables-restore reads, with no quote, backslash or control
// character inside a word: text that could break a rules file never reaches a rule.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"../examples", "../testdata/minik8s"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data, false)
				f.Add(data, true)
			}
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: NodePort, ports: [{port: 80, targetPort: x}], selector: {a: b}}\n"), false)
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a\"b"},"spec":{"ports":[{"port":1}]}}]}`), false)
	f.Fuzz(func(t *testing.T, data []byte, minik8s bool) {
		first, err1 := compileBytes(data, minik8s)
		second, err2 := compileBytes(data, minik8s)
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(first, second) {
			t.Fatalf("not deterministic: %v / %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		checkRules(t, first)
	})
}

func compileBytes(data []byte, minik8s bool) ([]byte, error) {
	l := &load.Loader{}
	if minik8s {
		l.Dialect = load.MiniK8s
	}
	l.Bytes("fuzz.yaml", data)
	if err := l.Errors.Err(); err != nil {
		return nil, err
	}
	r, err := compiler.Resolve(&l.Cluster, compiler.ResolveOptions{MiniK8s: minik8s})
	if err != nil {
		return nil, err
	}
	sm, err := compiler.Compile(r.Cluster, compiler.Options{})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := iptrules.Write(&b, sm, iptrules.Options{}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func checkRules(t *testing.T, out []byte) {
	t.Helper()
	if _, err := iptsyntax.ParseBytes("out", out); err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		inQuote := false
		for _, c := range line {
			switch {
			case c == '"':
				inQuote = !inQuote
			case c == '\\' || c < 0x20 || c == 0x7f:
				t.Fatalf("unsafe character %q in %q", c, line)
			case inQuote && c == '$':
				t.Fatalf("shell character in %q", line)
			}
		}
		if inQuote {
			t.Fatalf("unbalanced quote in %q", line)
		}
	}
}
