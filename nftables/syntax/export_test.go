package syntax

// Exported for the external tests (svcgen_test.go).
var (
	ParseScript     = parseScript
	ParseScriptWith = parseScriptWith
)
