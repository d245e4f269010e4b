package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/modes"
)

// Benchmarks of loading a generated 10,000-service x 10-endpoint cluster (about
// 100,000 chains and 300,000 rules) into a network namespace. Each cold load is tens
// of seconds of CPU: run them on purpose, a few times, e.g.
//
//	go test ./e2e -run '^$' -bench 'Apply' -benchtime 1x
//
// They need root, like the other real-kernel tests. Pick sizes with the sub-benchmark
// names, e.g. -bench 'ApplyColdStart/(noflush-blocks-of-(1000|2000)|full-restore)$'.

const (
	benchServices  = 10000
	benchEndpoints = 10
)

var benchMap struct {
	sm   *ir.ServiceMap
	file string
}

// bigCluster generates and compiles the cluster once per process.
func bigCluster(b *testing.B) (*ir.ServiceMap, string) {
	b.Helper()
	if benchMap.sm == nil {
		dir, err := os.MkdirTemp("", "svcgen-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		var buf bytes.Buffer
		if err := gen.Write(&buf, gen.Options{Services: benchServices, Endpoints: benchEndpoints, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		benchMap.file = filepath.Join(dir, "cluster.yaml")
		if err := os.WriteFile(benchMap.file, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		benchMap.sm = testkit.CompileFiles(b, pipeline.Settings{}, benchMap.file).Map
	}
	return benchMap.sm, benchMap.file
}

// benchLab makes the node namespace of a benchmark.
func benchLab(b *testing.B) (*netlab.Lab, string) {
	l := netlab.New(b)
	return l, l.NS("node")
}

// cpuTime is the CPU time (user and system) this process and its waited-for children
// (iptables-restore, iptables-save) have used: on a machine shared with other work,
// a fairer measure than the wall clock.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// BenchmarkApplyColdStart loads the cluster into an empty namespace (that holds another
// tool's rules) with apply's staged restore, for several block sizes, and with one full
// iptables-restore (no --noflush) of the complete file for comparison: the cost of a
// full load, which also replaces everything else in the tables.
func BenchmarkApplyColdStart(b *testing.B) {
	sm, _ := bigCluster(b)
	for _, max := range []int{100, 250, 500, 1000, 2000, 5000, 10000, 20000} {
		b.Run(fmt.Sprintf("noflush-blocks-of-%d", max), func(b *testing.B) {
			var cpus time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				l, ns := benchLab(b)
				if out, err := l.Try("ip", "netns", "exec", ns, "sh", "-c", "printf '*nat\\n:OTHER-TOOL - [0:0]\\n-A PREROUTING -j OTHER-TOOL\\nCOMMIT\\n' | iptables-restore --noflush"); err != nil {
					b.Fatal(out, err)
				}
				backend := apply.NewIPTables(sm.Family, 30*time.Second)
				backend.MaxChains = max
				a := &apply.Applier{Backend: backend}
				cpu := cpuTime()
				b.StartTimer()
				err := netlab.InNS(ns, func() error {
					_, err := a.Sync(context.Background(), sm, apply.SyncOptions{})
					return err
				})
				b.StopTimer()
				cpus += cpuTime() - cpu
				if err != nil {
					b.Fatal(err)
				}
				l.Cleanup()
			}
			b.ReportMetric(cpus.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
	b.Run("full-restore", func(b *testing.B) {
		var rules bytes.Buffer
		if err := iptrules.Write(&rules, sm, iptrules.Options{}); err != nil {
			b.Fatal(err)
		}
		var cpus time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			l, ns := benchLab(b)
			l.Counters(ns, iptrules.Counters...)
			cpu := cpuTime()
			b.StartTimer()
			if err := l.Feed(ns, rules.Bytes(), "iptables-restore"); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cpus += cpuTime() - cpu
			l.Cleanup()
		}
		b.ReportMetric(cpus.Seconds()/float64(b.N), "cpu-s/op")
	})
}

// BenchmarkApplyOneEndpoint changes one endpoint of one Service of the loaded cluster
// per iteration and applies it: "memory" as apply --watch does between intervals (the
// state it loaded kept in memory, and the recompiled Service named), "reread" as a
// one-shot apply does (iptables-save first). The compile is not timed: the incremental
// recompile is measured on its own.
func BenchmarkApplyOneEndpoint(b *testing.B) {
	sm, _ := bigCluster(b)
	l, ns := benchLab(b)
	defer l.Cleanup()
	a := &apply.Applier{Backend: apply.NewIPTables(sm.Family, 30*time.Second), Conntrack: apply.NetlinkConntrack{}}
	ctx := context.Background()
	if err := netlab.InNS(ns, func() error {
		_, err := a.Sync(ctx, sm, apply.SyncOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	moves := 0
	for _, mode := range []string{"memory", "reread"} {
		b.Run(mode, func(b *testing.B) {
			var written float64
			var steps apply.Steps
			cpu := cpuTime()
			err := netlab.InNS(ns, func() error {
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					moves++
					svc := 5000 + moves%1000
					next := moveEndpoint(sm, svc, moves)
					opts := apply.SyncOptions{Reread: mode == "reread"}
					if mode == "memory" { // as pipeline.Watch tells apply --watch
						opts.Hint = &apply.Hint{Since: sm, Changed: []string{sm.Services[svc].Key()}}
					}
					res, err := a.Sync(ctx, next, opts)
					if err != nil {
						return err
					}
					if res.Summary.Rules == 0 {
						return fmt.Errorf("move %d wrote nothing", moves)
					}
					written += float64(res.Summary.Rules)
					steps.Read += res.Steps.Read
					steps.Plan += res.Steps.Plan
					steps.Load += res.Steps.Load
					sm = next
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			n := float64(b.N)
			b.ReportMetric((cpuTime()-cpu).Seconds()/n, "cpu-s/op")
			b.ReportMetric(written/n, "rules/op")
			b.ReportMetric(steps.Read.Seconds()*1e3/n, "read-ms/op")
			b.ReportMetric(steps.Plan.Seconds()*1e3/n, "plan-ms/op")
			b.ReportMetric(steps.Load.Seconds()*1e3/n, "restore-ms/op")
		})
	}
}

// moveEndpoint returns the map with the first reachable endpoint of one Service on another port
// (a new KUBE-SEP chain, the old one deleted); other Services are shared, as an
// incremental compiler shares what did not change.
func moveEndpoint(sm *ir.ServiceMap, svc, n int) *ir.ServiceMap {
	out := *sm
	out.Services = append([]*ir.Service(nil), sm.Services...)
	s := *sm.Services[svc]
	s.Ports = append([]*ir.Port(nil), s.Ports...)
	p := *s.Ports[0]
	p.Endpoints = append([]ir.Endpoint(nil), p.Endpoints...)
	p.Endpoints[p.Reachable[0]].Port = uint16(20000 + n%20000)
	s.Ports[0] = &p
	out.Services[svc] = &s
	return &out
}

// BenchmarkApplyInterval is one --watch interval with nothing changed on the loaded
// cluster, per mode: "read" reads the kernel's rules back and compares (as every
// interval did before, and still does on iptables-legacy), "generation" first reads
// nf_tables' ruleset generation and skips the read while it stands still, and
// "generation-after-a-load" is the interval right after a load of svcgen's own that
// may find nothing to change in the kernel: a Service without endpoints added (in
// nftables mode, set and map elements only) and removed again (in iptables mode, a
// filter block that only flushes chains), by turns (the loads are not timed; the
// intervals after each are reported apart). The cluster's cold load is not timed. A
// run of every mode takes minutes (nftables: a staged load, and one read of the table
// costs tens of seconds): e.g.
//
//	go test ./e2e -run '^$' -bench 'ApplyInterval' -benchtime 3x
//	go test ./e2e -run '^$' -bench 'ApplyInterval/.*/generation-after-a-load' -benchtime 4x
func BenchmarkApplyInterval(b *testing.B) {
	_, file := bigCluster(b)
	idleFile := filepath.Join(b.TempDir(), "idle.yaml")
	if err := os.WriteFile(idleFile, []byte(idleService), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, mode := range []compiler.Mode{compiler.IPTables, compiler.NFTables} {
		b.Run(string(mode), func(b *testing.B) {
			sm := testkit.CompileFiles(b, pipeline.Settings{Mode: mode}, file).Map
			l, ns := benchLab(b)
			defer l.Cleanup()
			m, err := modes.Lookup(string(mode))
			if err != nil {
				b.Fatal(err)
			}
			backend := m.Backend(sm.Family, 30*time.Second)
			for _, how := range []string{"read", "generation", "generation-after-a-load"} {
				a := &apply.Applier{Backend: backend}
				if how != "read" {
					a.Generation = apply.NFTablesGeneration
				}
				synced := false
				b.Run(how, func(b *testing.B) {
					// The first sync loads the cluster (cold, the first time) or reads it.
					if !synced {
						if err := netlab.InNS(ns, func() error {
							_, err := a.Sync(ctx, sm, apply.SyncOptions{})
							return err
						}); err != nil {
							b.Fatal(err)
						}
						synced = true
					}
					if how == "generation-after-a-load" {
						idle := testkit.CompileFiles(b, pipeline.Settings{Mode: mode}, file, idleFile).Map
						intervalsAfterLoads(b, a, ns, sm, idle)
						return
					}
					var read time.Duration
					skipped := 0
					cpu := cpuTime()
					err := netlab.InNS(ns, func() error {
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							res, err := a.Sync(ctx, sm, apply.SyncOptions{Reread: true})
							if err != nil {
								return err
							}
							if res.Changed {
								return fmt.Errorf("an interval with nothing changed loaded: %s", res.Summary.Text)
							}
							read += res.Steps.Read
							if res.ReadSkipped {
								skipped++
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					n := float64(b.N)
					b.ReportMetric((cpuTime()-cpu).Seconds()/n, "cpu-s/op")
					b.ReportMetric(read.Seconds()*1e3/n, "read-ms/op")
					b.ReportMetric(float64(skipped)/n, "skipped/op")
				})
			}
		})
	}
}

// idleService is a Service without endpoints (its cluster IP taken from the generated
// cluster's ServiceCIDR).
const idleService = `apiVersion: v1
kind: Service
metadata: {name: idle, namespace: bench}
spec:
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
`

// intervalsAfterLoads loads idle over sm and sm over idle by turns, as syncs of a
// manifest change (untimed), each followed by a timed interval with nothing changed.
// It reports the intervals' CPU after adding and after removing the Service apart.
func intervalsAfterLoads(b *testing.B, a *apply.Applier, ns string, sm, idle *ir.ServiceMap) {
	ctx := context.Background()
	var cpu, load [2]time.Duration // [0]: after adding idle's Service, [1]: after removing it
	var count, skipped [2]int
	cur := sm
	err := netlab.InNS(ns, func() error {
		// The state a previous run left, as a manifest change's sync sees it.
		if _, err := a.Sync(ctx, sm, apply.SyncOptions{}); err != nil {
			return err
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			next, k := idle, 0
			if cur == idle {
				next, k = sm, 1
			}
			b.StopTimer()
			res, err := a.Sync(ctx, next, apply.SyncOptions{})
			if err != nil {
				return err
			}
			if !res.Changed {
				return fmt.Errorf("load %d changed nothing", i)
			}
			cur = next
			load[k] += res.Took
			b.StartTimer()
			c := cpuTime()
			if res, err = a.Sync(ctx, cur, apply.SyncOptions{Reread: true}); err != nil {
				return err
			}
			cpu[k] += cpuTime() - c
			if res.Changed {
				return fmt.Errorf("an interval with nothing changed loaded: %s", res.Summary.Text)
			}
			count[k]++
			if res.ReadSkipped {
				skipped[k]++
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for k, what := range []string{"added", "removed"} {
		if count[k] == 0 {
			continue
		}
		n := float64(count[k])
		b.ReportMetric(cpu[k].Seconds()/n, "cpu-s/interval-after-"+what)
		b.ReportMetric(float64(skipped[k])/n, "skipped/interval-after-"+what)
		b.ReportMetric(load[k].Seconds()/n, "load-s/"+what)
	}
}
