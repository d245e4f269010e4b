package tree

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// ResolvePlain's shortcuts agree with yaml.v3.
func TestResolvePlain(t *testing.T) {
	for _, v := range []string{
		"a", "true", "True", "TRUE", "tRUE", "false", "null", "Null", "NULL", "nULL", "no", "yes", "on", "off", "y", "n", "~",
		"0", "1", "80", "08", "0x10", "0o7", "0b1", "1_000", "123456789012345678", "1234567890123456789", "99999999999999999999",
		"1.5", "1.", ".5", "1e3", "1.5e3", "+1", "-1", "-1.5", ".inf", "-.inf", ".nan", "10.0.0.1", "10.0.0.0/8", "1/2",
		"2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2001-12-1.4.5", "1.2.3", "fd00::1", "::1",
		"1:2", "0.0.0.0/0", "10.0.0.1e5", "<<", "-", "+", ".", "1..2", "1_0.5", "0x1.8p1",
	} {
		want := TagOf((&yaml.Node{Kind: yaml.ScalarNode, Value: v}).ShortTag())
		if got := ResolvePlain(v); got != want {
			t.Errorf("ResolvePlain(%q) = %d, yaml.v3 says %d", v, got, want)
		}
	}
}
