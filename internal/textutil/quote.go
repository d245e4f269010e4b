package textutil

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote is how messages show text that comes from the input or the file system (a
// file, kind, namespace or object name, a key): as it is when it is plain, else
// quoted as Go quotes strings, so that a name can neither break a message apart nor
// send a terminal its control codes. Plain is valid UTF-8 of printable characters but
// spaces, quotes and backslashes, and not empty.
func Quote(s string) string {
	if plain(s) {
		return s
	}
	return strconv.Quote(s)
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			// Most names are ASCII: printable, no space, quote or backslash.
			if c <= ' ' || c == '"' || c == '\\' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// Escape is free text that may hold input (a message of yaml.v3's) as it may go to a
// terminal: every byte or character that is not printable escaped as Go escapes it
// in a string, the rest as it is.
func Escape(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			q := strconv.Quote(s)
			return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(q[1 : len(q)-1])
		}
	}
	return s
}
