package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPrefixesNeverMeet: each lab of a process gets its own prefix, and a prefix a
// namespace already has (one left behind by a killed process with this PID) is skipped.
func TestPrefixesNeverMeet(t *testing.T) {
	Require(t)
	a, b := New(t), New(t)
	if a.prefix == b.prefix {
		t.Fatalf("two labs share the prefix %q", a.prefix)
	}
	stale := fmt.Sprintf("svcgen-%d-%04x-left", os.Getpid(), labs.Load()+1)
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", stale).Run() })
	c := New(t)
	if strings.HasPrefix(stale, c.prefix) {
		t.Fatalf("new lab took the prefix %q of a namespace that exists (%s)", c.prefix, stale)
	}
	c.NS("x") // and it can make its namespaces
}
