// Package textutil holds small helpers for the text svcgen prints to people:
// summaries and messages, never rules.
package textutil

import "strconv"

// Count writes n and the noun in the form that n takes: "1 chain", "0 chains",
// "2 chains". Both forms are given, as English spells them ("entry", "entries"),
// rather than guessed.
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
