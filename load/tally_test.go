package load

import (
	"strings"
	"testing"
)

// The Tally says what each input held: the objects of each kind svcgen read, in the
// order of its kinds, and those it passed over, most first; a List's items count,
// not the List.
func TestTally(t *testing.T) {
	l := &Loader{}
	l.Text("a.yaml", okService+"---\n"+okService+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
	l.Text("b.json", `{"apiVersion": "v1", "kind": "List", "items": [
		{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s", "labels": {"kubernetes.io/service-name": "ok"}}, "addressType": "IPv4"},
		{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "d"}},
		{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "e"}},
		{"apiVersion": "v1", "kind": "Servcie", "metadata": {"name": "typo"}},
		{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}]}`)
	l.Text("c yaml", "# nothing\n")
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	for input, want := range map[string]string{
		"a.yaml":   "read 2 Services; passed over 1 ConfigMap",
		"b.json":   "read 1 EndpointSlice, 1 Node; passed over 2 Ingress, 1 Servcie",
		`"c yaml"`: "",
		"":         "read 2 Services, 1 EndpointSlice, 1 Node; passed over 2 Ingress, 1 ConfigMap, 1 Servcie",
	} {
		if got := l.Tally.Line(input); got != want {
			t.Errorf("%q: %q, want %q", input, got, want)
		}
	}
	if got := strings.Join(l.Tally.Inputs(), " "); got != `a.yaml b.json "c yaml"` {
		t.Errorf("inputs %s", got)
	}
	if l.Tally.Read("Service") != 2 || l.Tally.Read("Pod") != 0 || l.Tally.Read("List") != 0 {
		t.Errorf("read %d Services, %d Pods, %d Lists", l.Tally.Read("Service"), l.Tally.Read("Pod"), l.Tally.Read("List"))
	}
	// Read in pieces, streamed items and all, an input counts as read whole.
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ServiceList\nitems:\n")
	for range 50 {
		b.WriteString("- " + strings.ReplaceAll(strings.TrimSuffix(okService, "\n"), "\n", "\n  ") + "\n")
	}
	big := strings.Repeat(okService+"---\n", 100) + b.String()
	for _, min := range []int{100, 1000, 1 << 20} {
		p := &Loader{pieces: min}
		p.load(&source{name: "x", file: &dribble{r: strings.NewReader(big)}})
		if got := p.Tally.Line(""); got != "read 150 Services" {
			t.Errorf("pieces of %d: %s", min, got)
		}
	}
}
