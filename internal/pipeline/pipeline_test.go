package pipeline

import (
	"bytes"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcgen/svcgen/gen"
	"github.com/svcgen/svcgen/model"
)

// TestKeepMapsFreesTheClusters: once a command keeps only the maps, nothing of the
// Result (the tally of what was read included) holds the objects the loader read,
// and the maps are whole. A Result that kept a pointer into the Loader kept them
// all, through writing (about 150 MB at 50,000 Services).
func TestKeepMapsFreesTheClusters(t *testing.T) {
	var buf bytes.Buffer
	if err := gen.Write(&buf, gen.Options{Services: 20, Endpoints: 3, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, path, buf.String())
	res, err := Run(Inputs{Files: []string{path}}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	var freed atomic.Int32
	watch := func(objs ...*model.Service) {
		for _, o := range objs {
			runtime.AddCleanup(o, func(*atomic.Int32) { freed.Add(1) }, &freed)
		}
	}
	watch(res.Cluster.Services...)
	loaded := int32(len(res.Cluster.Services))
	services := len(res.Map.Services)
	res.KeepMaps()
	if res.Cluster != nil || res.Resolved != nil {
		t.Fatal("KeepMaps kept a cluster")
	}
	for i := 0; i < 50 && freed.Load() < loaded; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // cleanups run on a goroutine of their own
	}
	if got := freed.Load(); got != loaded {
		t.Errorf("%d of the %d loaded Services freed after KeepMaps", got, loaded)
	}
	if len(res.Map.Services) != services || services == 0 || res.Read.Read("Service") != int(loaded) {
		t.Errorf("after KeepMaps: %d Services in the map (was %d), tally %d of %d", len(res.Map.Services), services, res.Read.Read("Service"), loaded)
	}
	runtime.KeepAlive(res)
}
