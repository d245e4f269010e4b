package textutil

import "testing"

// Names from the input show as they are when plain, else quoted; free text keeps
// its quotes and spaces but no control character.
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"web": "web", "shop/web-1": "shop/web-1", "app.kubernetes.io/name": "app.kubernetes.io/name", "ünïcode": "ünïcode",
		"": `""`, "we b": `"we b"`, `a"b`: `"a\"b"`, `a\b`: `"a\\b"`, "\x1b[31mred": `"\x1b[31mred"`, "a\tb": `"a\tb"`,
		"rtl\u202egnp": `"rtl\u202egnp"`, "nbsp\u00a0": `"nbsp\u00a0"`, "bad\xffutf8": `"bad\xffutf8"`, "del\x7f": `"del\x7f"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`found "x" here`: `found "x" here`, "a \x1b[2J b": `a \x1b[2J b`, "rtl \u202e": `rtl \u202e`, `back\slash`: `back\slash`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %s, want %s", in, got, want)
		}
	}
}
