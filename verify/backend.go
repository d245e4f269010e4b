package verify

import (
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/trace"
)

// backend is one mode verify can check: it writes the service map in the mode's syntax,
// reads the text back as a node would hold it, and traces packets through it. A mode
// joins verify by adding its entry here.
type backend struct {
	mode   compiler.Mode
	tracer func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error)
}

var backends = []backend{
	{compiler.IPTables, iptablesTracer},
}

// Modes lists the modes verify checks, in order.
func Modes() []compiler.Mode {
	out := make([]compiler.Mode, len(backends))
	for i, b := range backends {
		out[i] = b.mode
	}
	return out
}

func backendFor(m compiler.Mode) (backend, bool) {
	for _, b := range backends {
		if b.mode == m {
			return b, true
		}
	}
	return backend{}, false
}

// iptablesTracer traces the complete iptables-restore file svcgen writes.
func iptablesTracer(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
	return trace.ForMap(string(compiler.IPTables), sm, host)
}
