package verify

import (
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/modes"
)

// Modes lists the modes verify checks: every mode of the registry, in its order. verify
// writes the service map in a mode's syntax, reads the text back as a node would hold
// it, and traces packets through it (modes.Mode.Tracer).
func Modes() []compiler.Mode {
	var out []compiler.Mode
	for _, m := range modes.All() {
		out = append(out, compiler.Mode(m.Name))
	}
	return out
}

func backendFor(m compiler.Mode) (modes.Mode, bool) {
	md, err := modes.Lookup(string(m))
	return md, err == nil
}
