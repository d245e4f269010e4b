package compiler

// IndexFrom is indexFrom for the external tests (package compiler_test): how many
// endpoints a port has before duplicates are found through a map.
const IndexFrom = indexFrom
