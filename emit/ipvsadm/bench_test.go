package ipvsadm

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
)

func generated(b *testing.B, services int) *ir.ServiceMap {
	var in bytes.Buffer
	if err := gen.Write(&in, gen.Options{Services: services, Endpoints: 10, Nodes: 50, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	l := &load.Loader{}
	l.Bytes("gen.yaml", in.Bytes())
	if err := l.Errors.Err(); err != nil {
		b.Fatal(err)
	}
	r, err := compiler.Resolve(&l.Cluster, compiler.ResolveOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sm, err := compiler.Compile(r.Cluster, compiler.Options{Mode: compiler.IPVS})
	if err != nil {
		b.Fatal(err)
	}
	return sm
}

// BenchmarkScript measures Build and WriteScript over generated clusters of 10
// endpoints a Service: go test -bench Script ./emit/ipvsadm
func BenchmarkScript(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		sm := generated(b, n)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			var size int64
			for i := 0; i < b.N; i++ {
				cw := &countWriter{}
				if err := WriteScript(cw, Build(sm), Header{}); err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			b.ReportMetric(float64(size), "bytes/script")
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
