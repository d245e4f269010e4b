// Package modes is the one registry of kube-proxy's proxy modes: for each, how compile
// writes its rules (whole, or the change from the rules on a node), how its rules are
// read back and traced, and its way into the kernel for apply, audit, diff and cleanup.
// Commands, verify and the tests loop over it; adding a mode is an entry here (a new
// release's layout is an entry of the release table, which every mode reads from the
// service map).
package modes

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/svcgen/svcgen/apply"
	"github.com/svcgen/svcgen/internal/pipeline"
	iptplan "github.com/svcgen/svcgen/iptables/plan"
	iptrules "github.com/svcgen/svcgen/iptables/rules"
	iptsyntax "github.com/svcgen/svcgen/iptables/syntax"
	ipvsrules "github.com/svcgen/svcgen/ipvs/rules"
	ipvssyntax "github.com/svcgen/svcgen/ipvs/syntax"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	nftplan "github.com/svcgen/svcgen/nftables/plan"
	nftrules "github.com/svcgen/svcgen/nftables/rules"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"github.com/svcgen/svcgen/trace"
)

// Mode is one proxy mode.
type Mode struct {
	// Name is the mode as kube-proxy's configuration spells it.
	Name string
	// refuses gives, for each output option the mode lacks ("--noflush"), why.
	refuses map[string]string
	// oneScript: one output holds every family's rules (nftables: the ip and ip6
	// tables in one script); else each family is an output of its own.
	oneScript bool
	// write writes compile's output of the maps, one per family (the options
	// checked; more than one map only when oneScript).
	write func(w io.Writer, maps []*ir.ServiceMap, o Options) error
	// parts writes the output as named files (--split); nil: the mode has none.
	parts func(sm *ir.ServiceMap, create func(name string, write func(io.Writer) error) error) error
	// tracer reads back what the mode writes for sm, as a node holds it.
	tracer func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error)
	// backend is the mode's way into this network namespace's kernel.
	backend func(family model.IPFamily, wait time.Duration) apply.Backend
}

// Options are compile's choices of output.
type Options struct {
	// NoFlush writes exactly kube-proxy's payload for iptables-restore --noflush.
	NoFlush bool
	// Previous, when set, is the rules on the node now (an earlier output, or the
	// node's dump): the output is the change from them, as kube-proxy's partial sync.
	Previous *Input
	// Minimal (with Previous) leaves out what did not change.
	Minimal bool
	// Stages writes a whole nftables table as several transactions.
	Stages bool
}

// Input is a rules file to read: its name for errors, and its text.
type Input struct {
	Name string
	R    io.Reader
}

// OptionError is an option the mode does not take: a usage mistake.
type OptionError struct{ Msg string }

func (e *OptionError) Error() string { return e.Msg }

// registry lists the modes: iptables first (kube-proxy's default through v1.39, and
// the first cleanup runs, since its rules use the ipvs mode's sets).
var registry = []Mode{iptablesMode, ipvsMode, nftablesMode}

// All returns every mode, in the registry's order.
func All() []Mode { return append([]Mode(nil), registry...) }

// Names lists the modes for messages: "iptables, ipvs or nftables".
func Names() string {
	names := make([]string, len(registry))
	for i, m := range registry {
		names[i] = m.Name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Lookup finds a mode by name.
func Lookup(name string) (Mode, error) {
	for _, m := range registry {
		if m.Name == name {
			return m, nil
		}
	}
	return Mode{}, fmt.Errorf("unknown mode %q (want %s)", name, Names())
}

// Detect names the mode whose rules a ruleset file holds, from its text as
// trace.DetectFormat tells it: iptables-save output or restore input is iptables
// mode's, an nft script or listing nftables mode's, and ipvs mode's script (or its
// ipvsadm and ipset parts) ipvs mode's.
func Detect(data []byte) (Mode, error) {
	format, err := trace.DetectFormat(data)
	if err != nil {
		return Mode{}, err
	}
	switch format {
	case trace.IPTablesText:
		return iptablesMode, nil
	case trace.NFTText:
		return nftablesMode, nil
	}
	return ipvsMode, nil
}

// Check refuses, before anything is read, the options the mode does not take.
func (m Mode) Check(o Options, split bool) error {
	for _, c := range []struct {
		flag string
		set  bool
	}{{"--noflush", o.NoFlush}, {"--previous", o.Previous != nil}, {"--minimal", o.Minimal}, {"--stages", o.Stages}, {"--split", split}} {
		if why, refused := m.refuses[c.flag]; c.set && refused {
			return &OptionError{Msg: c.flag + " is for " + takers(c.flag) + " mode (-m); " + why}
		}
	}
	if o.Minimal && o.Previous == nil {
		return &OptionError{Msg: "--minimal needs --previous"}
	}
	if o.Stages && o.Previous != nil {
		return &OptionError{Msg: "--stages writes the whole table; it cannot be combined with --previous"}
	}
	return nil
}

// takers names the modes that take an option: "iptables or nftables".
func takers(flag string) string {
	var names []string
	for _, m := range registry {
		if _, refused := m.refuses[flag]; !refused {
			names = append(names, m.Name)
		}
	}
	return strings.Join(names, " or ")
}

// Write writes compile's output to w: the whole ruleset, or with o.Previous the change
// from it.
func (m Mode) Write(w io.Writer, sm *ir.ServiceMap, o Options) error {
	return m.WriteAll(w, []*ir.ServiceMap{sm}, o)
}

// OneScript reports whether one output holds the rules of every family of a run
// (nftables); otherwise a dual-stack run writes an output per family.
func (m Mode) OneScript() bool { return m.oneScript }

// WriteAll writes the output of a run's maps (one per family) to w; a mode that is
// not OneScript takes one map only.
func (m Mode) WriteAll(w io.Writer, maps []*ir.ServiceMap, o Options) error {
	if err := m.Check(o, false); err != nil {
		return err
	}
	if len(maps) > 1 && !m.oneScript {
		return &OptionError{Msg: m.Name + " mode writes one output per IP family; write them one at a time"}
	}
	return m.write(w, maps, o)
}

// Split writes the output as named files (compile --split); create makes one.
func (m Mode) Split(sm *ir.ServiceMap, create func(name string, write func(io.Writer) error) error) error {
	if m.parts == nil {
		return m.Check(Options{}, true)
	}
	return m.parts(sm, create)
}

// Tracer writes sm's rules in the mode's syntax, reads them back as a node would hold
// them, and traces packets through them.
func (m Mode) Tracer(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
	return m.tracer(sm, host)
}

// Backend is the mode's way into the kernel of this network namespace for one family;
// wait bounds the waits for locks the mode's tools take.
func (m Mode) Backend(family model.IPFamily, wait time.Duration) apply.Backend {
	return m.backend(family, wait)
}

// Cleaners are what cleanup runs: every mode, both families, in the registry's order.
func Cleaners(wait time.Duration) []apply.Cleaner {
	var out []apply.Cleaner
	for _, m := range registry {
		for _, f := range []model.IPFamily{model.IPv4, model.IPv6} {
			out = append(out, m.backend(f, wait))
		}
	}
	return out
}

var iptablesMode = Mode{
	Name: "iptables",
	refuses: map[string]string{
		"--stages": "a large iptables restore is staged by apply, in blocks of chains",
		"--split":  "its rules are one iptables-restore file",
	},
	write: func(w io.Writer, maps []*ir.ServiceMap, o Options) error {
		sm := maps[0]
		if o.Previous == nil {
			f := iptrules.Complete
			if o.NoFlush {
				f = iptrules.NoFlush
			}
			return iptrules.Write(w, sm, iptrules.Options{Format: f})
		}
		prev, err := iptsyntax.Parse(o.Previous.Name, o.Previous.R)
		if err != nil {
			return &pipeline.InputError{Err: err}
		}
		return iptplan.Write(w, sm, iptplan.Options{Previous: prev, Minimal: o.Minimal})
	},
	tracer: func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
		// Written into a string and read light: the rules keep pieces of the text, not a
		// copy of it, and their lines, not their words (the tracer reads a chain's words
		// when a trace reaches it).
		var b strings.Builder
		if err := iptrules.Write(&b, sm, iptrules.Options{Format: iptrules.Complete}); err != nil {
			return nil, fmt.Errorf("writing iptables rules: %w", err)
		}
		rs, err := iptsyntax.ParseLight("iptables rules", b.String())
		if err != nil {
			return nil, fmt.Errorf("reading back iptables rules: %w", err)
		}
		return trace.NewIPTables(rs, host)
	},
	backend: func(f model.IPFamily, wait time.Duration) apply.Backend { return apply.NewIPTables(f, wait) },
}

var nftablesMode = Mode{
	Name: "nftables",
	refuses: map[string]string{
		"--noflush": "the nftables script owns its table and touches nothing else",
		"--split":   "its rules are one nft script",
	},
	oneScript: true,
	write: func(w io.Writer, maps []*ir.ServiceMap, o Options) error {
		// Each family's table is written whole, one after the other: nft -f loads
		// the file as one transaction. A previous ruleset holds both tables, and
		// each family's change is made from its own.
		var prev *nftsyntax.Ruleset
		if o.Previous != nil {
			var err error
			if prev, err = nftsyntax.Parse(o.Previous.Name, o.Previous.R); err != nil {
				return &pipeline.InputError{Err: err}
			}
		}
		for _, sm := range maps {
			var err error
			if prev == nil {
				err = nftrules.Write(w, sm, nftrules.Options{Stages: o.Stages})
			} else {
				err = nftplan.Write(w, sm, nftplan.Options{Previous: prev, Minimal: o.Minimal})
			}
			if err != nil {
				return err
			}
		}
		return nil
	},
	tracer: func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
		var b bytes.Buffer
		if err := nftrules.Write(&b, sm, nftrules.Options{}); err != nil {
			return nil, fmt.Errorf("writing nftables rules: %w", err)
		}
		rs, err := nftsyntax.ParseBytes("nftables rules", b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("reading back nftables rules: %w", err)
		}
		return trace.NewNFTRuleset(rs, host)
	},
	backend: func(f model.IPFamily, _ time.Duration) apply.Backend { return apply.NewNFTables(f) },
}

var ipvsMode = Mode{
	Name: "ipvs",
	refuses: map[string]string{
		"--noflush":  "the ipvs script always converges the node",
		"--previous": "the ipvs script always converges the node",
		"--minimal":  "the ipvs script always converges the node",
		"--stages":   "it is for nftables mode",
	},
	write: func(w io.Writer, maps []*ir.ServiceMap, _ Options) error {
		sm := maps[0]
		return ipvssyntax.WriteScript(w, ipvsrules.Build(sm), ipvssyntax.Header{Node: sm.Node.Name, Title: sm.Header("ipvs")})
	},
	parts: func(sm *ir.ServiceMap, create func(string, func(io.Writer) error) error) error {
		return ipvssyntax.WriteSplit(ipvsrules.Build(sm), create)
	},
	tracer: func(sm *ir.ServiceMap, host trace.Host) (trace.Tracer, error) {
		built := ipvsrules.Build(sm)
		var b bytes.Buffer
		if err := ipvssyntax.WriteScript(&b, built, ipvssyntax.Header{Node: sm.Node.Name, Title: sm.Header("ipvs")}); err != nil {
			return nil, fmt.Errorf("writing the ipvs script: %w", err)
		}
		n, err := ipvssyntax.ParseScript("ipvs script", &b)
		if err != nil {
			return nil, fmt.Errorf("reading back the ipvs script: %w", err)
		}
		// Which Service a virtual server is for is a comment of the script; take it
		// from the state the script was written from.
		// (By key, the first of each as Node.Service finds it: a search a server was
		// quadratic, 8 s of CPU at 10,000 Services.)
		byKey := make(map[string]*ipvssyntax.VirtualServer, len(built.Services))
		for _, w := range built.Services {
			if k := w.Key(); byKey[k] == nil {
				byKey[k] = w
			}
		}
		for _, vs := range n.Services {
			if w := byKey[vs.Key()]; w != nil {
				vs.For = w.For
			}
		}
		return trace.NewIPVS(n, nil, host)
	},
	backend: func(f model.IPFamily, wait time.Duration) apply.Backend { return apply.NewIPVS(f, wait) },
}
