package apply

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/release"
)

// genCluster is a node with one NodePort Service; its endpoints are appended.
const genCluster = `
apiVersion: v1
kind: Node
metadata: {name: node1}
status: {addresses: [{type: InternalIP, address: 198.18.0.1}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  type: NodePort
  clusterIP: 198.19.0.10
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
`

// idleService is a Service without endpoints, to go before genCluster. Adding it writes
// only set and map elements in nftables mode (and rules in iptables mode); removing it
// deletes them (and, in iptables mode, only flushes filter chains that end up empty).
const idleService = `
apiVersion: v1
kind: Service
metadata: {name: idle, namespace: demo}
spec:
  clusterIP: 198.19.0.20
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---`

func genMap(t *testing.T, mode compiler.Mode, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	return genMapFor(t, mode, "", endpoints...)
}

// genMapFor is genMap for a kube-proxy release ("" for the newest).
func genMapFor(t *testing.T, mode compiler.Mode, version string, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	return compileWithEndpoints(t, genCluster, mode, version, endpoints...)
}

// compileWithEndpoints compiles manifests that end in genCluster's EndpointSlice, with
// these endpoints on node1 appended to it.
func compileWithEndpoints(t *testing.T, manifests string, mode compiler.Mode, version string, endpoints ...string) *ir.ServiceMap {
	t.Helper()
	for _, e := range endpoints {
		manifests += "- {addresses: [" + e + "], nodeName: node1}\n"
	}
	s := pipeline.Settings{Mode: mode}
	if version != "" {
		r, err := release.Parse(version)
		if err != nil {
			t.Fatal(err)
		}
		s.Release = r
	}
	return testkit.Compile(t, "cluster.yaml", manifests, s).Map
}

// counting counts a backend's reads of the kernel: the test hook of the drift checks.
type counting struct {
	Backend
	reads int
}

func (c *counting) Read(ctx context.Context) (State, error) {
	c.reads++
	return c.Backend.Read(ctx)
}

func (c *counting) InNFTables() bool {
	t, ok := c.Backend.(generationTracked)
	return ok && t.InNFTables()
}

// inNS runs fn in a namespace (the tools apply runs and the netlink socket of the
// generation read are made from the calling thread, so they are in it too).
func inNS(t *testing.T, ns string, fn func()) {
	t.Helper()
	if err := netlab.InNS(ns, func() error { fn(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// The generation moves by one for each committed nf_tables transaction, nft's or
// iptables-nft's (one for each block of a restore), and not for reads. The kernel
// commits a transaction only when it holds a change: one that adds an element already
// there, flushes an empty chain or declares an empty chain as it is moves nothing,
// and the commit mark of svcgen's loads (adding and deleting one chain; see
// nftplan.Load.MarkCommits and iptables.Options.MarkCommits) makes any transaction move it by
// one, even when another program made a chain of the mark's name.
func TestGenerationCountsCommits(t *testing.T) {
	l := netlab.New(t)
	ns := l.NS("gen")
	gen := func() uint32 {
		t.Helper()
		var g uint32
		inNS(t, ns, func() {
			var err error
			if g, err = NFTablesGeneration(); err != nil {
				t.Fatal(err)
			}
		})
		return g
	}
	nft := []string{"nft", "-f", "-"}
	restore := []string{"iptables-restore", "--noflush"}
	const nftMark = "add chain ip t svcgen-commit\ndelete chain ip t svcgen-commit\n"
	const ipMark = ":SVCGEN-COMMIT - [0:0]\n-X SVCGEN-COMMIT\n"
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		moves uint32
	}{
		{"nft -f, one transaction", "add table ip t\nadd chain ip t c\nadd rule ip t c accept\n", nft, 1},
		{"nft list", "", []string{"nft", "list", "ruleset"}, 0},
		{"nft: a map and an element", "add map ip t m { type ipv4_addr : verdict ; }\nadd element ip t m { 198.18.0.1 : goto c }\n", nft, 1},
		{"nft: the element again", "add element ip t m { 198.18.0.1 : goto c }\n", nft, 0},
		{"nft: the element again, with the commit mark", "add element ip t m { 198.18.0.1 : goto c }\n" + nftMark, nft, 1},
		{"nft: an empty chain", "add chain ip t e\n", nft, 1},
		{"nft: its flush", "flush chain ip t e\n", nft, 0},
		{"nft: its flush, with the commit mark", "flush chain ip t e\n" + nftMark, nft, 1},
		{"nft: the commit mark alone", nftMark, nft, 1},
		{"nft: another program's chain of the mark's name", "add chain ip t svcgen-commit\n", nft, 1},
		{"nft: the commit mark over it", nftMark, nft, 1},
		{"iptables-restore, two blocks", "*nat\n:X - [0:0]\n-A X -j RETURN\nCOMMIT\n*filter\n:Y - [0:0]\n-A Y -j RETURN\nCOMMIT\n", restore, 2},
		{"iptables-save", "", []string{"iptables-save"}, 0},
		{"iptables-restore: an empty chain", "*nat\n:Z - [0:0]\nCOMMIT\n", restore, 1},
		{"iptables-restore: the empty chain declared again", "*nat\n:Z - [0:0]\nCOMMIT\n", restore, 0},
		{"iptables-restore: again, with the commit mark", "*nat\n:Z - [0:0]\n" + ipMark + "COMMIT\n", restore, 1},
		{"iptables-restore: two blocks of the commit mark alone", "*nat\n" + ipMark + "COMMIT\n*filter\n" + ipMark + "COMMIT\n", restore, 2},
	} {
		if _, err := exec.LookPath(tc.args[0]); err != nil {
			t.Fatalf("%s is not installed", tc.args[0])
		}
		if tc.args[0] == "iptables-restore" && !strings.Contains(l.In(ns, "iptables", "-V"), "nf_tables") {
			continue // iptables-legacy: not in nf_tables
		}
		before := gen()
		if err := l.Feed(ns, []byte(tc.stdin), tc.args...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if moved := gen() - before; moved != tc.moves {
			t.Errorf("%s: the generation moved by %d, want %d", tc.name, moved, tc.moves)
		}
	}
}

// TestSkipReadWhileGenerationStands drives the applier as apply --watch does (every
// sync an interval's, asking to read the kernel again) in a namespace, for nftables
// mode and for iptables mode on iptables-nft: an interval with nothing changed does
// not read the rules; another program's change to kube-proxy's rules is read and
// repaired at the next interval; a change elsewhere in nf_tables is read and changes
// nothing; a change made between the end of a load and the generation read after it
// is not missed, after any load (one that only adds elements, or only flushes, too);
// a load that only adds elements or flushes is followed by an interval that does not
// read; and a manifest change's sync uses the state in memory, as before.
// On iptables-legacy every interval reads.
func TestSkipReadWhileGenerationStands(t *testing.T) {
	l := netlab.New(t)
	for _, mode := range []compiler.Mode{compiler.NFTables, compiler.IPTables} {
		t.Run(string(mode), func(t *testing.T) {
			ns := l.NS("skip" + string(mode)[:3])
			sm1 := genMap(t, mode, "198.18.1.1", "198.18.1.2")
			sm2 := genMap(t, mode, "198.18.1.1", "198.18.1.3")
			var backend Backend = NewNFTables(model.IPv4)
			if mode == compiler.IPTables {
				backend = NewIPTables(model.IPv4, 5*time.Second)
			}
			c := &counting{Backend: backend}
			a := &Applier{Backend: c, Generation: NFTablesGeneration}
			legacy := mode == compiler.IPTables && !strings.Contains(l.In(ns, "iptables", "-V"), "nf_tables")
			reread := true // an interval's sync; false: a manifest change's
			sync := func(what string, sm *ir.ServiceMap, wantRead, wantChanged bool) *Result {
				t.Helper()
				before := c.reads
				var res *Result
				inNS(t, ns, func() {
					var err error
					if res, err = a.Sync(context.Background(), sm, SyncOptions{Reread: reread}); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
				})
				if legacy && reread {
					wantRead = true
				}
				if read := c.reads > before; read != wantRead || res.ReadSkipped != (reread && !wantRead) {
					t.Errorf("%s: read the kernel %v (skipped %v), want %v", what, read, res.ReadSkipped, wantRead)
				}
				if res.Changed != wantChanged {
					t.Errorf("%s: changed %v, want %v (%s)", what, res.Changed, wantChanged, res.Summary.Text)
				}
				return res
			}
			// drift deletes kube-proxy's rules of the Service by hand (rules an endpoint
			// change does not rewrite).
			drift := func() {
				if mode == compiler.NFTables {
					l.In(ns, "nft", "flush", "chain", "ip", "kube-proxy", webChain(t, l, ns, "external-"))
				} else {
					l.In(ns, "iptables", "-t", "nat", "-F", "KUBE-NODEPORTS")
				}
			}
			sync("first sync", sm1, true, true)
			sync("nothing changed", sm1, false, false)
			sync("nothing changed, again", sm1, false, false)
			drift()
			sync("after another program's change", sm1, true, true)
			sync("after the repair", sm1, false, false)
			l.In(ns, "nft", "add", "table", "ip", "elsewhere")
			sync("after a change elsewhere", sm1, true, false)
			sync("after that", sm1, false, false)
			sync("a new endpoint, loaded", sm2, false, true)
			sync("after the load", sm2, false, false)
			// A load that may add nothing the kernel lacks (in nftables mode, only the
			// elements of a Service without endpoints; in iptables mode, removing it
			// only flushes chains) is still known to be all that committed.
			idle := compileWithEndpoints(t, idleService+genCluster, mode, "", "198.18.1.1", "198.18.1.3")
			res := sync("a Service without endpoints added", idle, false, true)
			if mode == compiler.NFTables && (res.Summary.Rules != 0 || res.Summary.Chains != 0 || res.Summary.Deleted != 0) {
				t.Errorf("adding a Service without endpoints wrote more than elements: %s", res.Summary.Text)
			}
			sync("after adding it", idle, false, false)
			sync("the Service without endpoints removed", sm2, false, true)
			sync("after removing it", sm2, false, false)
			// Another program's change raced in right after such a load is found.
			a.testHookAfterLoad = drift
			sync("an add-only load raced by another program", idle, false, true)
			a.testHookAfterLoad = nil
			sync("after that race", idle, true, true)
			sync("after its repair, again", idle, false, false)
			// Another program changes kube-proxy's rules right after svcgen's load,
			// before the generation is read: the next interval must find it.
			a.testHookAfterLoad = drift
			sync("a load raced by another program", sm1, false, true)
			a.testHookAfterLoad = nil
			sync("after the race", sm1, true, true)
			sync("after its repair", sm1, false, false)
			// A manifest change's sync trusts the state in memory, as before: drift is
			// repaired at the next interval.
			drift()
			reread = false
			sync("a change after another program's", sm2, false, true)
			reread = true
			sync("the interval after it", sm2, true, true)
			sync("and the next", sm2, false, false)
		})
	}
}

// webChain is demo/web's nftables chain of a kind ("service-", "external-") in the
// namespace.
func webChain(t *testing.T, l *netlab.Lab, ns, kind string) string {
	t.Helper()
	for _, line := range strings.Split(l.In(ns, "nft", "list", "chains", "ip"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "chain" && strings.HasPrefix(f[1], kind) && strings.Contains(f[1], "demo/web/") {
			return f[1]
		}
	}
	t.Fatalf("no %s chain of demo/web:\n%s", kind, l.In(ns, "nft", "list", "chains", "ip"))
	return ""
}
