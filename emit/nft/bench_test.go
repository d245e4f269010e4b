package nft

import (
	"bytes"
	"io"
	"testing"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/load"
)

// generated compiles a generated cluster for nftables mode.
func generated(b *testing.B, services int) *ir.ServiceMap {
	b.Helper()
	var m bytes.Buffer
	if err := gen.Write(&m, gen.Options{Services: services, Endpoints: 10}); err != nil {
		b.Fatal(err)
	}
	l := &load.Loader{}
	l.Bytes("gen.yaml", m.Bytes())
	if err := l.Errors.Err(); err != nil {
		b.Fatal(err)
	}
	res, err := pipeline.Compile(&l.Cluster, nil, false, pipeline.Settings{Mode: compiler.NFTables})
	if err != nil {
		b.Fatal(err)
	}
	return res.Map
}

func benchWrite(b *testing.B, services int) {
	sm := generated(b, services)
	b.ResetTimer()
	for b.Loop() {
		if err := Write(io.Discard, sm, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchParse(b *testing.B, services int) {
	var script bytes.Buffer
	if err := Write(&script, generated(b, services), Options{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(script.Len()))
	b.ResetTimer()
	for b.Loop() {
		if _, err := ParseBytes("script", script.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}

// go test -run - -bench . ./emit/nft (the 10k benchmarks take a while).
func BenchmarkWrite1k(b *testing.B)  { benchWrite(b, 1000) }
func BenchmarkWrite10k(b *testing.B) { benchWrite(b, 10000) }
func BenchmarkParse1k(b *testing.B)  { benchParse(b, 1000) }
func BenchmarkParse10k(b *testing.B) { benchParse(b, 10000) }
