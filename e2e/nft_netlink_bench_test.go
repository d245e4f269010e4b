package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/release"
)

// BenchmarkNFTApplySync is apply --watch's sync in nftables mode on the loaded
// 10,000-Service cluster, in the v1.35 and v1.37 layouts, with each kernel: "nft"
// (every transaction through nft -f, as before) and "netlink" (apply's default,
// NetlinkNFT), for three changes: one endpoint moved (the Service named, as
// pipeline.Watch tells apply), a Service without endpoints added or removed (by turns),
// and nothing changed (an interval: the generation read, the read skipped). The state
// is in memory, so nothing is read back. The cold (staged) load is not timed. E.g.
//
//	go test ./e2e -run '^$' -bench NFTApplySync -benchtime 5x
func BenchmarkNFTApplySync(b *testing.B) {
	_, file := bigCluster(b)
	idleFile := filepath.Join(b.TempDir(), "idle.yaml")
	if err := os.WriteFile(idleFile, []byte(idleService), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, version := range []string{"1.35", "1.37"} {
		b.Run(version, func(b *testing.B) {
			r, err := release.Parse(version)
			if err != nil {
				b.Fatal(err)
			}
			s := pipeline.Settings{Mode: compiler.NFTables, Release: r}
			sm := testkit.CompileFiles(b, s, file).Map
			idle := testkit.CompileFiles(b, s, file, idleFile).Map
			l, ns := benchLab(b)
			defer l.Cleanup()
			backend := apply.NewNFTables(sm.Family)
			a := &apply.Applier{Backend: backend, Generation: apply.NFTablesGeneration}
			if err := netlab.InNS(ns, func() error {
				_, err := a.Sync(ctx, sm, apply.SyncOptions{})
				return err
			}); err != nil {
				b.Fatal(err)
			}
			cur, moves := sm, 0
			for _, kernel := range []apply.NFTKernel{apply.ExecNFT{}, apply.NetlinkNFT{}} {
				name := "nft"
				if _, ok := kernel.(apply.NetlinkNFT); ok {
					name = "netlink"
				}
				backend.Kernel = kernel
				for _, change := range []string{"endpoint-moved", "service-added-or-removed", "nothing"} {
					b.Run(name+"/"+change, func(b *testing.B) {
						var steps apply.Steps
						var took time.Duration
						cpu := cpuTime()
						err := netlab.InNS(ns, func() error {
							b.ResetTimer()
							for i := 0; i < b.N; i++ {
								next, opts := cur, apply.SyncOptions{Reread: true}
								switch change {
								case "endpoint-moved": // away from sm and back, by turns
									moves++
									const svc = 5000
									next = sm
									if cur == sm {
										next = moveEndpoint(sm, svc, moves)
									}
									opts = apply.SyncOptions{Hint: &apply.Hint{Since: cur, Changed: []string{sm.Services[svc].Key()}}}
								case "service-added-or-removed":
									next, opts = idle, apply.SyncOptions{}
									if cur == idle {
										next = sm
									}
								}
								res, err := a.Sync(ctx, next, opts)
								if err != nil {
									return err
								}
								if res.Changed != (change != "nothing") || (change == "nothing" && !res.ReadSkipped) {
									return fmt.Errorf("%s: changed %v, read skipped %v", change, res.Changed, res.ReadSkipped)
								}
								steps.Read += res.Steps.Read
								steps.Plan += res.Steps.Plan
								steps.Load += res.Steps.Load
								took += res.Took
								cur = next
							}
							b.StopTimer()
							if cur != sm { // back to sm, untimed
								if _, err := a.Sync(ctx, sm, apply.SyncOptions{}); err != nil {
									return err
								}
								cur = sm
							}
							return nil
						})
						if err != nil {
							b.Fatal(err)
						}
						n := float64(b.N)
						b.ReportMetric((cpuTime()-cpu).Seconds()/n, "cpu-s/op")
						b.ReportMetric(took.Seconds()*1e3/n, "sync-ms/op")
						b.ReportMetric(steps.Plan.Seconds()*1e3/n, "plan-ms/op")
						b.ReportMetric(steps.Load.Seconds()*1e3/n, "load-ms/op")
					})
				}
			}
		})
	}
}
