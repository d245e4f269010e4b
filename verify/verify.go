// Package verify checks that every backend implements the service map: for every
// frontend of every Service (cluster IP, node port on each node address, external IP,
// load-balancer IP, with and without an allowed source) and every kind of source, the
// rules a mode writes, read back and traced, reach the same endpoints with the same
// probabilities, the same affinity and the same masquerade decision as the service
// map says (Expect), allowing only the documented differences of each mode
// (Differences).
package verify

import (
	"fmt"
	"io"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/svcgen/svcgen/compiler"
	"github.com/svcgen/svcgen/internal/textutil"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/modes"
	"github.com/svcgen/svcgen/release"
	"github.com/svcgen/svcgen/trace"
)

// Options select what to verify.
type Options struct {
	// Node names the node (see compiler.Options).
	Node string
	// Modes to check; empty: every mode verify knows (Modes).
	Modes []compiler.Mode
	// Release and Gates: see compiler.Options.
	Release release.Release
	Gates   map[string]bool
	// Families: see compiler.Options; a dual-stack run probes each family's rules.
	Families []model.IPFamily
}

// Report is what verify found.
type Report struct {
	Modes []*ModeReport
}

// ModeReport is one mode's result.
type ModeReport struct {
	Mode      compiler.Mode
	Family    model.IPFamily
	Frontends int
	Probes    int
	// Applied counts the probes each documented difference applied to, by name.
	Applied       map[string]int
	Disagreements []Disagreement
}

// Disagreement is a probe where a mode's rules and the service map part ways.
type Disagreement struct {
	Mode      compiler.Mode
	Probe     Probe
	Got, Want *trace.Result
	// Err is set when the rules could not be traced at all.
	Err error
}

// OK reports whether every mode agreed everywhere.
func (r *Report) OK() bool {
	for _, m := range r.Modes {
		if len(m.Disagreements) > 0 {
			return false
		}
	}
	return true
}

// Run compiles the resolved cluster in every mode and checks each against its service
// map.
func Run(c *model.Cluster, opts Options) (*Report, error) {
	modes := opts.Modes
	if len(modes) == 0 {
		modes = Modes()
	}
	r := &Report{}
	for _, m := range modes {
		b, ok := backendFor(m)
		if !ok {
			return nil, fmt.Errorf("mode %s: verify cannot check it in this version of svcgen (it checks %s)", m, joinModes(Modes()))
		}
		maps, err := compiler.CompileAll(c, compiler.Options{Node: opts.Node, Mode: m, Release: opts.Release, Gates: opts.Gates, Families: opts.Families})
		if err != nil {
			return nil, err
		}
		for _, sm := range maps {
			mr, err := Check(b, sm, c)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", m, sm.Family, err)
			}
			r.Modes = append(r.Modes, mr)
		}
	}
	return r, nil
}

func joinModes(ms []compiler.Mode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// CheckMode checks one mode's rules for a compiled service map; c (may be nil) names
// pods in the report.
func CheckMode(m compiler.Mode, sm *ir.ServiceMap, c *model.Cluster) (*ModeReport, error) {
	b, ok := backendFor(m)
	if !ok {
		return nil, fmt.Errorf("mode %s: verify cannot check it in this version of svcgen", m)
	}
	return Check(b, sm, c)
}

// Check traces every probe through one mode's rules.
func Check(m modes.Mode, sm *ir.ServiceMap, c *model.Cluster) (*ModeReport, error) {
	tr, err := m.Tracer(sm, HostOf(sm))
	if err != nil {
		return nil, err
	}
	return CheckTracer(compiler.Mode(m.Name), sm, c, tr), nil
}

// CheckTracer holds any tracer of mode m's rules for the service map (rules read back
// from a kernel, say) to the service map, probe by probe; c (may be nil) names pods.
// A disagreement's Got has no Path: verify compares outcomes (Summary), and tracing
// without paths is several times cheaper (trace.WithoutPaths).
func CheckTracer(m compiler.Mode, sm *ir.ServiceMap, c *model.Cluster, tr trace.Tracer) *ModeReport {
	tr = trace.WithoutPaths(tr)
	l := NewLocator(sm, c)
	x := NewExpecter(sm, l.Host())
	mr := &ModeReport{Mode: m, Family: sm.Family, Applied: map[string]int{}}
	frontends := map[string]bool{}
	for _, p := range Probes(l) {
		mr.Probes++
		frontends[p.Frontend.String()] = true
		want, applied := x.ExpectMode(m, p.Packet)
		for _, name := range applied {
			mr.Applied[name]++
		}
		got, err := tr.Trace(p.Packet)
		if err != nil {
			mr.Disagreements = append(mr.Disagreements, Disagreement{Mode: m, Probe: p, Want: want, Err: err})
			continue
		}
		if Summary(got) != Summary(want) {
			mr.Disagreements = append(mr.Disagreements, Disagreement{Mode: m, Probe: p, Got: got, Want: want})
		}
	}
	mr.Frontends = len(frontends)
	return mr
}

// Summary is a result's comparable form: each way the packet can end, with its
// probability, sorted. The endpoint, masquerade and affinity count only for translated
// packets (a packet dropped after DNAT is dropped).
//
//	DNAT 10.0.0.1:80 1/2 masquerade affinity; DNAT 10.0.0.2:80 1/2 masquerade affinity
func Summary(r *trace.Result) string {
	// Outcomes sorted by how they end; those that end the same way are summed. Most
	// end differently, so most probabilities are written as they are.
	type part struct {
		key string
		p   *big.Rat
	}
	parts := make([]part, 0, len(r.Outcomes))
	for _, o := range r.Outcomes {
		parts = append(parts, part{summaryKey(o), o.Probability})
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].key < parts[j].key })
	var b strings.Builder
	for i := 0; i < len(parts); {
		k, p := parts[i].key, parts[i].p
		for i++; i < len(parts) && parts[i].key == k; i++ {
			p = new(big.Rat).Add(p, parts[i].p)
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		v, rest, _ := strings.Cut(k, " ")
		b.WriteString(strings.TrimSpace(v + " " + p.RatString() + " " + rest))
	}
	return b.String()
}

// summaryKey is how an outcome ends, as Summary writes it around its probability.
func summaryKey(o trace.Outcome) string {
	k := string(o.Verdict)
	if k == "" {
		k = "no-match"
	}
	if o.Verdict == trace.DNAT {
		k += " " + o.Endpoint
		if o.Masquerade {
			k += " masquerade"
		}
		if o.Affinity {
			k += " affinity"
		}
	}
	return k
}

// Write prints the report: a line per mode, then every disagreement with its Service.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	dual := slices.ContainsFunc(r.Modes, func(m *ModeReport) bool { return m.Family != r.Modes[0].Family })
	for _, m := range r.Modes {
		name := string(m.Mode)
		if dual { // a single-family run's report reads as before dual-stack runs
			name += " (" + string(m.Family) + ")"
		}
		fmt.Fprintf(&b, "%s: %s, %s: ", name, textutil.Count(m.Frontends, "frontend", "frontends"), textutil.Count(m.Probes, "probe", "probes"))
		if len(m.Disagreements) == 0 {
			b.WriteString("every probe agrees with the service map")
		} else {
			fmt.Fprintf(&b, "%d disagree with the service map", len(m.Disagreements))
		}
		var applied []string
		for name, n := range m.Applied {
			applied = append(applied, fmt.Sprintf("%q %d", name, n))
		}
		sort.Strings(applied)
		if len(applied) > 0 {
			b.WriteString(" (documented differences applied: " + strings.Join(applied, ", ") + ")")
		}
		b.WriteByte('\n')
		for _, d := range m.Disagreements {
			b.WriteString(d.String())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String describes a disagreement in a few lines, naming the Service.
func (d Disagreement) String() string {
	p := d.Probe
	f := p.Frontend
	from := p.Source.String()
	if from == "" {
		from = "a source"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: Service %s port %s: %s from %s %s",
		d.Mode, f.Service.Key(), portLabel(f.Port), f, from, p.Packet.Src)
	if p.Packet.InIface != "" {
		b.WriteString(" (in on " + p.Packet.InIface + ")")
	}
	b.WriteString(":\n")
	if d.Err != nil {
		fmt.Fprintf(&b, "  the rules cannot be traced: %v\n", d.Err)
	} else {
		fmt.Fprintf(&b, "  %-12s %s\n", string(d.Mode)+":", Summary(d.Got))
	}
	fmt.Fprintf(&b, "  %-12s %s\n", "service map:", Summary(d.Want))
	return b.String()
}

func portLabel(p *ir.Port) string {
	name := p.Name.Port
	if name == "" {
		name = fmt.Sprint(p.Port)
	}
	return name + "/" + string(p.Protocol)
}
