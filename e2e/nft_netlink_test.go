package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/mdlayher/netlink"
	"github.com/svcgen/svcgen/nftables/nlbatch"
	"golang.org/x/sys/unix"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/netlab"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/internal/randcluster"
	"github.com/svcgen/svcgen/internal/testkit"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/release"
	"sigs.k8s.io/knftables"
)

// netlinkCase is a cluster and the same cluster one step on (a document left out).
type netlinkCase struct {
	name   string
	before string // manifests
	after  string
}

// oneStep is the manifests without one document, chosen by seed.
func oneStep(manifests string, seed uint64) (string, int) {
	docs := strings.Split(manifests, "\n---\n")
	if len(docs) < 2 {
		return manifests, -1
	}
	i := rand.New(rand.NewPCG(seed, seed)).IntN(len(docs))
	return strings.Join(append(docs[:i:i], docs[i+1:]...), "\n---\n"), i
}

// netlinkCases: every golden case's input, and random clusters, each with a document
// left out at random (twice, with two seeds).
func netlinkCases(t *testing.T) []netlinkCase {
	var out []netlinkCase
	dirs, _ := filepath.Glob("../golden/*/input.yaml")
	for _, in := range dirs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err := os.ReadFile(filepath.Join(filepath.Dir(in), "config.yaml")); err == nil {
			data = append(append(data, "\n---\n"...), cfg...)
		}
		for seed := uint64(1); seed <= 2; seed++ {
			after, i := oneStep(string(data), seed)
			out = append(out, netlinkCase{fmt.Sprintf("%s-doc%d", filepath.Base(filepath.Dir(in)), i), string(data), after})
		}
	}
	for seed := uint64(1); seed <= 16; seed++ {
		data := string(randcluster.Generate(seed, randcluster.Options{IPv6: seed%4 == 0}))
		after, i := oneStep(data, seed)
		out = append(out, netlinkCase{fmt.Sprintf("random-%d-doc%d", seed, i), data, after})
	}
	return out
}

// compileQuiet compiles manifests for nftables mode, or returns nil when they do not
// compile to one table (a dual-stack case, an input a step broke).
func compileQuiet(name, manifests string, r release.Release) (sm *ir.ServiceMap) {
	defer func() {
		if recover() != nil {
			sm = nil
		}
	}()
	tb := &quietTB{}
	res := testkit.Compile(tb, name, manifests, pipeline.Settings{Mode: compiler.NFTables, Release: r})
	if tb.failed || res == nil {
		return nil
	}
	return res.Map
}

// partialStep is one step of netlinkCases as apply loads it: the table before (an nft
// script), and the transactions of the minimal partial sync to the table after.
type partialStep struct {
	name   string
	family knftables.Family
	whole  []byte
	txs    []nftplan.Tx
}

// partialSteps walks netlinkCases in the v1.35 and v1.37 layouts, there and back (the
// document taken away, then put back), and calls fn with each step that is a partial
// sync; it returns how many steps were not (no change, or a whole table).
func eachPartialStep(t *testing.T, fn func(partialStep)) (notPartial int) {
	t.Helper()
	for _, version := range []string{"1.35", "1.37"} {
		r, err := release.Parse(version)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range netlinkCases(t) {
			before, after := compileQuiet(c.name, c.before, r), compileQuiet(c.name, c.after, r)
			if before == nil || after == nil || before.Family != after.Family {
				continue
			}
			family := knftables.IPv4Family
			if before.Family == model.IPv6 {
				family = knftables.IPv6Family
			}
			for step, pair := range [][2]*ir.ServiceMap{{before, after}, {after, before}} {
				name := fmt.Sprintf("%s %s step %d", version, c.name, step)
				var whole strings.Builder
				if err := nftrules.Write(&whole, pair[0], nftrules.Options{}); err != nil {
					t.Fatal(err)
				}
				prev, err := nftsyntax.ParseBytes(name, []byte(whole.String()))
				if err != nil {
					t.Fatal(err)
				}
				txs, err := nftplan.Partial(nftrules.NewTable(pair[1]), nftplan.Options{Previous: prev, Minimal: true}).Transactions(nftplan.Load{MarkCommits: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(txs) == 0 || strings.Contains(string(txs[0].Text), "delete table") {
					notPartial++
					continue
				}
				fn(partialStep{name: name, family: family, whole: []byte(whole.String()), txs: txs})
			}
		}
	}
	return notPartial
}

// sortElements sorts each run of "\telement" lines of nft --debug=netlink output: the
// kernel lists a hashed set's elements in the order of a hash with a random seed.
func sortElements(listing string) string {
	lines := strings.Split(listing, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && strings.HasPrefix(lines[j], "\telement ") {
			j++
		}
		if j > i {
			slices.Sort(lines[i:j])
			i = j
		} else {
			i++
		}
	}
	return strings.Join(lines, "\n")
}

// TestNFTNetlinkLoadsAsNft loads partial syncs two ways into two fresh namespaces
// holding the same table: with nft -f, and with apply's default kernel (NetlinkNFT: one
// netlink batch of the messages nft would send). For the golden inputs and random
// clusters, each with one document taken away and put back, in the v1.35 and v1.37
// layouts, the tables must list the same, with handles ("nft -a list table") and as
// the kernel's expressions ("nft --debug=netlink list table"), and every transaction
// must move the ruleset generation by exactly one. Most transactions must go through
// netlink (the others fall back to nft -f whole).
func TestNFTNetlinkLoadsAsNft(t *testing.T) {
	l := netlab.New(t)
	viaNft, viaNetlink := l.NS("nlnft"), l.NS("nlbatch")
	var batches, fallbacks, txs int
	why := map[string]int{}
	kernel := apply.NetlinkNFT{Loaded: func(nl bool, err error) {
		if nl {
			batches++
			return
		}
		fallbacks++
		why[regexp.MustCompile(`"[^"]*"|[0-9]+`).ReplaceAllString(fmt.Sprint(err), "_")]++
	}}
	notPartial := eachPartialStep(t, func(s partialStep) {
		for _, ns := range []string{viaNft, viaNetlink} {
			l.In(ns, "nft", "flush", "ruleset")
			if err := l.Feed(ns, s.whole, "nft", "-f", "-"); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		for _, x := range s.txs {
			txs++
			if err := l.Feed(viaNft, x.Text, "nft", "-f", "-"); err != nil {
				t.Fatalf("%s: nft -f: %v\n%s", s.name, err, x.Text)
			}
			var g0, g1 uint32
			err := netlab.InNS(viaNetlink, func() error {
				var err error
				if g0, err = apply.NFTablesGeneration(); err != nil {
					return err
				}
				if err := kernel.Run(t.Context(), x.Text); err != nil {
					return err
				}
				g1, err = apply.NFTablesGeneration()
				return err
			})
			if err != nil {
				t.Fatalf("%s: netlink: %v\n%s", s.name, err, x.Text)
			}
			if g1-g0 != 1 {
				t.Errorf("%s: the transaction moved the generation by %d, want 1", s.name, g1-g0)
			}
		}
		for _, list := range [][]string{{"-a", "list", "table"}, {"--debug=netlink", "list", "table"}} {
			args := append(append([]string{"nft"}, list...), string(s.family), nftsyntax.TableName)
			a, b := sortElements(l.In(viaNft, args...)), sortElements(l.In(viaNetlink, args...))
			if a != b {
				t.Errorf("%s: %v differs, nft -f against netlink:\n%s\ntransaction:\n%s", s.name, list, lineDiff(a, b), s.txs[0].Text)
			}
		}
	})
	t.Logf("%d transactions: %d as netlink batches, %d through nft -f; %d steps were no partial sync (no change, or a whole table: not compared); fallbacks by reason: %v", txs, batches, fallbacks, notPartial, why)
	if batches == 0 || fallbacks*4 > txs {
		t.Errorf("%d of %d transactions fell back to nft -f", fallbacks, txs)
	}
}

// TestNFTNetlinkEncodesAsNft holds nlbatch's messages to what nft sends for the same
// transaction (nft --check --debug=mnl, on the same table), attribute by attribute,
// for every step of TestNFTNetlinkLoadsAsNft that nlbatch encodes.
func TestNFTNetlinkEncodesAsNft(t *testing.T) {
	l := netlab.New(t)
	ns := l.NS("nlmnl")
	var compared, failed int
	eachPartialStep(t, func(s partialStep) {
		if failed >= 5 {
			return
		}
		l.In(ns, "nft", "flush", "ruleset")
		if err := l.Feed(ns, s.whole, "nft", "-f", "-"); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, x := range s.txs {
			var enc nlbatch.Encoder
			if _, err := enc.Encode(x.Text); err != nil {
				continue
			}
			out, err := mnlOf(ns, x.Text)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			sent, err := nlbatch.ParseMNL(out)
			if err != nil {
				t.Fatal(err)
			}
			nft := nlbatch.Batch(sent)
			enc = nlbatch.Encoder{SetID: firstSetID(nft) - 1}
			ours, err := enc.Encode(x.Text)
			if err != nil {
				t.Fatal(err)
			}
			compared++
			var sentOurs []nlbatch.Sent
			for _, m := range ours {
				sentOurs = append(sentOurs, nlbatch.Sent{Type: uint16(m.Header.Type), Data: m.Data})
			}
			a, b := sortElementRuns(nlbatch.Comparable(nft)), sortElementRuns(nlbatch.Comparable(sentOurs))
			if got, want := strings.Join(b, "\n"), strings.Join(a, "\n"); got != want {
				failed++
				if dir := os.Getenv("SVCGEN_MNL_DUMPS"); dir != "" {
					os.WriteFile(filepath.Join(dir, fmt.Sprintf("mnl-%d.txt", failed)), out, 0o644)
				}
				t.Errorf("%s: the messages differ from nft's (- nft, + nlbatch):\n%s\ntransaction:\n%s", s.name, lineDiff(want, got), x.Text)
			}
		}
	})
	t.Logf("%d transactions compared with nft's messages", compared)
	if compared == 0 {
		t.Error("no transaction compared")
	}
}

// sortElementRuns sorts each run of element messages of one kind: nft sometimes
// sends the element lines of a run in another order than they are written (and the
// elements of a set have no order).
func sortElementRuns(msgs []string) []string {
	kind := func(m string) string {
		for _, k := range []string{"message 10/12 ", "message 10/14 "} {
			if strings.HasPrefix(m, k) {
				return k
			}
		}
		return ""
	}
	for i := 0; i < len(msgs); {
		j := i + 1
		for kind(msgs[i]) != "" && j < len(msgs) && kind(msgs[j]) == kind(msgs[i]) {
			j++
		}
		slices.Sort(msgs[i:j])
		i = j
	}
	return msgs
}

// mnlOf is what nft sends for a script, checked and not committed (nft --check).
func mnlOf(ns string, script []byte) ([]byte, error) {
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "--check", "--debug=mnl", "-f", "-")
	cmd.Stdin = bytes.NewReader(script)
	return cmd.CombinedOutput()
}

// firstSetID is the id of the first set a batch adds (0 if none).
func firstSetID(msgs []nlbatch.Sent) uint32 {
	for _, m := range msgs {
		if m.Type != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSET {
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
		if err != nil {
			return 0
		}
		for _, a := range attrs {
			if a.Type == unix.NFTA_SET_ID {
				return binary.BigEndian.Uint32(a.Data)
			}
		}
	}
	return 1
}

// quietTB is a testing.TB that records failure instead of failing.
type quietTB struct {
	testing.TB
	failed bool
}

func (q *quietTB) Helper()                  {}
func (q *quietTB) Fatal(args ...any)        { q.failed = true; panic("fatal") }
func (q *quietTB) Fatalf(string, ...any)    { q.failed = true; panic("fatal") }
func (q *quietTB) Errorf(string, ...any)    { q.failed = true }
func (q *quietTB) Error(args ...any)        { q.failed = true }
func (q *quietTB) Logf(string, ...any)      {}
func (q *quietTB) Cleanup(func())           {}
func (q *quietTB) TempDir() string          { return os.TempDir() }
func (q *quietTB) Name() string             { return "quiet" }
func (q *quietTB) Failed() bool             { return q.failed }
func (q *quietTB) Skipf(string, ...any)     { panic("skip") }
func (q *quietTB) Setenv(key, value string) {}
func (q *quietTB) Log(args ...any)          {}
func (q *quietTB) Skip(args ...any)         { panic("skip") }
func (q *quietTB) SkipNow()                 { panic("skip") }
func (q *quietTB) FailNow()                 { q.failed = true; panic("fatal") }
func (q *quietTB) Fail()                    { q.failed = true }
func (q *quietTB) Skipped() bool            { return false }
func (q *quietTB) Chdir(string)             {}
func (q *quietTB) ArtifactDir() string      { return os.TempDir() }

// TestNFTNetlinkRefused: a transaction the kernel refuses changes nothing, through
// netlink as through nft -f: the batch is aborted whole (the generation does not
// move, the table lists as before), and the error is nft's own, naming the line (the
// same text is run through nft -f after the kernel refused the batch).
func TestNFTNetlinkRefused(t *testing.T) {
	l := netlab.New(t)
	ns := l.NS("nlrefused")
	sm := compileQuiet("refused", string(randcluster.Generate(3, randcluster.Options{})), release.Release{})
	if sm == nil {
		t.Fatal("the random cluster does not compile")
	}
	var whole strings.Builder
	if err := nftrules.Write(&whole, sm, nftrules.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Feed(ns, []byte(whole.String()), "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	before := l.In(ns, "nft", "-a", "list", "table", "ip", "kube-proxy")
	// A new chain and rule (encodable), then the delete of an element that is not
	// there: the kernel refuses the third line.
	script := []byte("add chain ip kube-proxy svcgen-test\n" +
		"add rule ip kube-proxy svcgen-test ip saddr 198.18.0.1 jump mark-for-masquerade\n" +
		"delete element ip kube-proxy cluster-ips { 198.18.255.254 }\n")
	var batches, fallbacks int
	kernel := apply.NetlinkNFT{Loaded: func(nl bool, err error) {
		if nl {
			batches++
		} else {
			fallbacks++
		}
	}}
	var g0, g1 uint32
	var runErr error
	if err := netlab.InNS(ns, func() error {
		var err error
		if g0, err = apply.NFTablesGeneration(); err != nil {
			return err
		}
		runErr = kernel.Run(t.Context(), script)
		g1, err = apply.NFTablesGeneration()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "/dev/stdin:3:") {
		t.Errorf("error %v, want nft's, naming line 3", runErr)
	}
	if batches != 0 || fallbacks != 1 {
		t.Errorf("%d batches loaded, %d through nft -f; want the refused batch run again through nft", batches, fallbacks)
	}
	if g1 != g0 {
		t.Errorf("the generation moved from %d to %d", g0, g1)
	}
	if after := l.In(ns, "nft", "-a", "list", "table", "ip", "kube-proxy"); after != before {
		t.Errorf("the table changed:\n%s", lineDiff(before, after))
	}
}
