package load

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// quote is how messages show text that comes from the input or the file system (a
// file, kind, namespace or object name, a key): as it is when it is plain, else
// quoted as Go quotes strings, so that a name can neither break a message apart nor
// send a terminal its control codes. Plain is valid UTF-8 of printable characters but
// spaces, quotes and backslashes, and not empty.
func quote(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
