package syntax

import "io"

// RestoreWriter writes iptables-restore text for other emitters (the ipvs mode's
// companion chains) through this package's one line writer, so quoting and newlines
// are decided in one place. Errors are sticky; Close reports the first.
type RestoreWriter struct {
	b Buffer
}

// NewRestoreWriter writes to w.
func NewRestoreWriter(w io.Writer) *RestoreWriter {
	return &RestoreWriter{b: Buffer{out: w}}
}

// Table starts a table: "*name".
func (w *RestoreWriter) Table(name string) { w.b.Line("*" + name) }

// Chain declares a chain, which flushes it under --noflush: ":NAME - [0:0]".
func (w *RestoreWriter) Chain(name string) { w.b.ChainLine(name, "-") }

// Rule appends "-A chain args...". A "-m comment --comment TEXT" run in args is
// quoted as kube-proxy quotes it; text that could break the file is an error.
func (w *RestoreWriter) Rule(chain string, args ...string) {
	w.b.Start(chain)
	w.b.Args(args)
	w.b.End()
}

// Commit ends a table.
func (w *RestoreWriter) Commit() { w.b.Line("COMMIT") }

// Close flushes what is buffered and returns the first error.
func (w *RestoreWriter) Close() error {
	return w.b.Flush()
}
