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
	{compiler.IPTables, mapTracer(compiler.IPTables)},
	{compiler.NFTables, mapTracer(compiler.NFTables)},
	{compiler.IPVS, mapTracer(compiler.IPVS)},
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

// mapTracer traces what svcgen writes for a mode, read back (trace.ForMap).
func mapTracer(m compiler.Mode) func(*ir.ServiceMap, trace.Host) (trace.Tracer, error) {
	return func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
		return trace.ForMap(string(m), sm, host)
	}
}
