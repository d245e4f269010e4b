package syntax

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Spec is a rule's words understood: the IP-header matches, the match modules with
// their options, and the target. kube-proxy and iptables-save spell one rule in
// different ways (match order, "/32", "0x4000" against "0x00004000", MARK --or-mark
// against --set-xmark, the 11-digit probability of iptables-save); Key gives one
// canonical text for all spellings of a rule, and trace reads the fields.
type Spec struct {
	Src, Dst Addr
	In, Out  Iface
	Proto    string // lower case, "" for any
	ProtoNot bool
	Modules  []Module
	Target   string // "" for a rule without -j
	// Goto: the rule used -g (return to the caller of the chain afterwards).
	Goto       bool
	TargetOpts []Opt
}

// Addr is -s or -d.
type Addr struct {
	Prefix netip.Prefix
	Not    bool
}

// Set reports whether the match is present.
func (a Addr) Set() bool { return a.Prefix.IsValid() }

// Iface is -i or -o; a trailing "+" matches a prefix.
type Iface struct {
	Name string
	Not  bool
}

// Module is "-m name" with its options.
type Module struct {
	Name string
	Opts []Opt
}

// Opt is "[!] --name value...".
type Opt struct {
	Name   string // without the leading dashes
	Not    bool
	Values []string
}

// Opt returns the first option of that name.
func (m Module) Opt(name string) (Opt, bool) {
	for _, o := range m.Opts {
		if o.Name == name {
			return o, true
		}
	}
	return Opt{}, false
}

// Value is the option's first value, "" when it has none.
func (o Opt) Value() string {
	if len(o.Values) == 0 {
		return ""
	}
	return o.Values[0]
}

// Module returns the first module of that name.
func (s *Spec) Module(name string) (Module, bool) {
	for _, m := range s.Modules {
		if m.Name == name {
			return m, true
		}
	}
	return Module{}, false
}

// TargetOpt returns a target option.
func (s *Spec) TargetOpt(name string) (Opt, bool) {
	for _, o := range s.TargetOpts {
		if o.Name == name {
			return o, true
		}
	}
	return Opt{}, false
}

// Comment is the rule's comment, "" if it has none.
func (s *Spec) Comment() string {
	if m, ok := s.Module("comment"); ok {
		o, _ := m.Opt("comment")
		return o.Value()
	}
	return ""
}

var headerLong = map[string]string{
	"--source": "-s", "--src": "-s", "--destination": "-d", "--dst": "-d",
	"--in-interface": "-i", "--out-interface": "-o", "--protocol": "-p",
	"--jump": "-j", "--goto": "-g", "--match": "-m",
}

// ParseSpec understands a rule's words (Rule.Args).
func ParseSpec(args []string) (*Spec, error) {
	s := &Spec{}
	var mod *Module
	inTarget := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		not := false
		if w == "!" {
			not = true
			i++
			if i >= len(args) {
				return nil, fmt.Errorf("%q ends with \"!\"", strings.Join(args, " "))
			}
			w = args[i]
		}
		if short, ok := headerLong[w]; ok {
			w = short
		}
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", w)
			}
			i++
			return args[i], nil
		}
		switch w {
		case "-s", "-d", "-i", "-o", "-p", "-m", "-j", "-g":
			v, err := value()
			if err != nil {
				return nil, err
			}
			if err := s.header(w, v, not, &mod, &inTarget); err != nil {
				return nil, err
			}
			continue
		}
		if !strings.HasPrefix(w, "-") {
			return nil, fmt.Errorf("unexpected word %q", w)
		}
		opt := Opt{Name: strings.TrimLeft(w, "-"), Not: not}
		for i+1 < len(args) && args[i+1] != "!" && !strings.HasPrefix(args[i+1], "-") {
			i++
			opt.Values = append(opt.Values, args[i])
		}
		switch {
		case inTarget:
			s.TargetOpts = append(s.TargetOpts, opt)
		case mod != nil:
			mod.Opts = append(mod.Opts, opt)
		case opt.Name == "dport" || opt.Name == "sport":
			// iptables loads the protocol's match implicitly for -p tcp --dport.
			s.Modules = append(s.Modules, Module{Name: s.Proto, Opts: []Opt{opt}})
			mod = &s.Modules[len(s.Modules)-1]
		default:
			return nil, fmt.Errorf("option %s outside a match module", w)
		}
	}
	return s, nil
}

func (s *Spec) header(flag, v string, not bool, mod **Module, inTarget *bool) error {
	switch flag {
	case "-s", "-d":
		p, err := parseAddrMatch(v)
		if err != nil {
			return err
		}
		if flag == "-s" {
			s.Src = Addr{p, not}
		} else {
			s.Dst = Addr{p, not}
		}
	case "-i":
		s.In = Iface{v, not}
	case "-o":
		s.Out = Iface{v, not}
	case "-p":
		s.Proto, s.ProtoNot = ProtocolName(v), not
	case "-m":
		s.Modules = append(s.Modules, Module{Name: v})
		*mod = &s.Modules[len(s.Modules)-1]
	case "-j", "-g":
		s.Target, s.Goto = v, flag == "-g"
		*inTarget = true
	}
	return nil
}

// ProtocolName spells a protocol given by name or by number as iptables-save spells
// -p: lower case, by name for tcp, udp and sctp. (It prints "-m ipvs --vproto" as a
// number, where kube-proxy writes the name.)
func ProtocolName(v string) string {
	switch strings.ToLower(v) {
	case "6", "tcp":
		return "tcp"
	case "17", "udp":
		return "udp"
	case "132", "sctp":
		return "sctp"
	}
	return strings.ToLower(v)
}

func parseAddrMatch(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("bad address %q", v)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address %q", v)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Key is the rule's canonical text: equal for every spelling of one rule.
func (s *Spec) Key() string {
	var b strings.Builder
	addr := func(flag string, a Addr) {
		if !a.Set() {
			return
		}
		if a.Not {
			b.WriteString("! ")
		}
		b.WriteString(flag)
		b.WriteByte(' ')
		if a.Prefix.IsSingleIP() {
			b.WriteString(a.Prefix.Addr().String())
		} else {
			b.WriteString(a.Prefix.String())
		}
		b.WriteByte(' ')
	}
	iface := func(flag string, f Iface) {
		if f.Name == "" {
			return
		}
		if f.Not {
			b.WriteString("! ")
		}
		b.WriteString(flag + " " + f.Name + " ")
	}
	addr("-s", s.Src)
	addr("-d", s.Dst)
	iface("-i", s.In)
	iface("-o", s.Out)
	if s.Proto != "" {
		if s.ProtoNot {
			b.WriteString("! ")
		}
		b.WriteString("-p " + s.Proto + " ")
	}
	for _, m := range s.Modules {
		b.WriteString("-m " + m.Name)
		writeOpts(&b, canonicalModule(m))
		b.WriteByte(' ')
	}
	if s.Target != "" {
		if s.Goto {
			b.WriteString("-g ")
		} else {
			b.WriteString("-j ")
		}
		b.WriteString(s.Target)
		writeOpts(&b, canonicalTarget(s.Target, s.TargetOpts))
	}
	return strings.TrimSpace(b.String())
}

func writeOpts(b *strings.Builder, opts []Opt) {
	for _, o := range opts {
		if o.Not {
			b.WriteString(" !")
		}
		b.WriteString(" --" + o.Name)
		for _, v := range o.Values {
			b.WriteString(" " + strconv.Quote(v))
		}
	}
}

// canonicalModule rewrites a module's options to one spelling.
func canonicalModule(m Module) []Opt {
	switch m.Name {
	case "mark":
		return mapOpts(m.Opts, func(o Opt) Opt {
			if o.Name == "mark" {
				o.Values = []string{markValue(o.Value(), true)}
			}
			return o
		})
	case "statistic":
		return mapOpts(m.Opts, func(o Opt) Opt {
			if o.Name == "probability" {
				o.Values = []string{strconv.FormatInt(probabilityBits(o.Value()), 10)}
			}
			return o
		})
	case "recent":
		return canonicalRecent(m.Opts)
	case "conntrack", "state":
		return mapOpts(m.Opts, func(o Opt) Opt {
			if o.Name == "ctstate" || o.Name == "state" {
				states := strings.Split(strings.ToUpper(o.Value()), ",")
				sort.Strings(states)
				o.Name, o.Values = "ctstate", []string{strings.Join(states, ",")}
			}
			return o
		})
	case "ipvs":
		return canonicalIPVS(m.Opts)
	case "tcp", "udp", "sctp":
		return mapOpts(m.Opts, func(o Opt) Opt {
			switch o.Name {
			case "destination-port":
				o.Name = "dport"
			case "source-port":
				o.Name = "sport"
			}
			return o
		})
	}
	return m.Opts
}

// ipvsOptions are xt_ipvs's options in the order iptables-save prints them.
var ipvsOptions = []string{"ipvs", "vproto", "vaddr", "vport", "vdir", "vmethod", "vportctl"}

// canonicalIPVS puts "-m ipvs" options in iptables-save's order, with the protocol
// by name and a one-address --vaddr without its /32 or /128, as iptables-save prints
// it: "--vproto 6 --vaddr 10.0.0.1" for kube-proxy's "--vaddr 10.0.0.1 --vproto tcp".
func canonicalIPVS(opts []Opt) []Opt {
	out := mapOpts(opts, func(o Opt) Opt {
		switch o.Name {
		case "vproto":
			o.Values = []string{ProtocolName(o.Value())}
		case "vaddr":
			if p, err := parseAddrMatch(o.Value()); err == nil {
				o.Values = []string{p.String()}
				if p.IsSingleIP() {
					o.Values = []string{p.Addr().String()}
				}
			}
		}
		return o
	})
	rank := func(o Opt) int {
		if i := slices.Index(ipvsOptions, o.Name); i >= 0 {
			return i
		}
		return len(ipvsOptions)
	}
	slices.SortStableFunc(out, func(a, b Opt) int { return rank(a) - rank(b) })
	return out
}

func mapOpts(opts []Opt, fn func(Opt) Opt) []Opt {
	out := make([]Opt, len(opts))
	for i, o := range opts {
		out[i] = fn(o)
	}
	return out
}

// probabilityBits is the probability as the kernel stores it (xt_statistic keeps
// lround(p * 2^31)), so 0.3333333333 and iptables-save's 0.33333333321 agree.
func probabilityBits(v string) int64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return -1
	}
	return int64(math.Round(f * (1 << 31)))
}

// markValue prints "value[/mask]" as "0xVALUE/0xMASK" (mask all ones when absent).
func markValue(v string, withMask bool) string {
	val, mask, hasMask := strings.Cut(v, "/")
	n, _ := strconv.ParseUint(val, 0, 32)
	m := uint64(0xffffffff)
	if hasMask {
		m, _ = strconv.ParseUint(mask, 0, 32)
	}
	if !withMask {
		return fmt.Sprintf("%#x", n)
	}
	return fmt.Sprintf("%#x/%#x", n, m)
}

func canonicalRecent(opts []Opt) []Opt {
	out := []Opt{}
	name := "DEFAULT"
	var rest []Opt
	for _, o := range opts {
		switch o.Name {
		case "name":
			name = o.Value()
		case "rsource", "mask":
			// defaults (iptables-save prints them: --mask 255.255.255.255 --rsource)
			if o.Name == "mask" && o.Value() != "255.255.255.255" && o.Value() != "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" {
				rest = append(rest, o)
			}
		default:
			rest = append(rest, o)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	out = append(out, Opt{Name: "name", Values: []string{name}})
	return append(out, rest...)
}

// canonicalTarget rewrites target options to one spelling.
func canonicalTarget(target string, opts []Opt) []Opt {
	switch target {
	case "MARK":
		return canonicalMark(opts)
	case "REJECT":
		with := "port-unreachable"
		if o, ok := findOpt(opts, "reject-with"); ok {
			with = strings.TrimPrefix(strings.TrimPrefix(o.Value(), "icmp6-"), "icmp-")
		}
		return []Opt{{Name: "reject-with", Values: []string{with}}}
	}
	return opts
}

func findOpt(opts []Opt, name string) (Opt, bool) {
	for _, o := range opts {
		if o.Name == name {
			return o, true
		}
	}
	return Opt{}, false
}

// canonicalMark turns every MARK spelling into --set-xmark value/mask, as the kernel
// holds it: --or-mark v is v/v, --xor-mark v is v/0, --and-mark v is 0/^v,
// --set-mark v/m is v/(v|m).
func canonicalMark(opts []Opt) []Opt {
	if len(opts) != 1 {
		return opts
	}
	o := opts[0]
	val, mask, hasMask := strings.Cut(o.Value(), "/")
	v, _ := strconv.ParseUint(val, 0, 32)
	m := uint64(0xffffffff)
	if hasMask {
		m, _ = strconv.ParseUint(mask, 0, 32)
	}
	switch o.Name {
	case "or-mark":
		m = v
	case "xor-mark":
		m = 0
	case "and-mark":
		v, m = 0, ^v&0xffffffff
	case "set-mark":
		m |= v
	case "set-xmark":
	default:
		return opts
	}
	return []Opt{{Name: "set-xmark", Values: []string{fmt.Sprintf("%#x/%#x", v, m)}}}
}

// RuleKey is the canonical text of a rule's words, or the words themselves when they
// cannot be understood (so that they still compare).
func RuleKey(args []string) string {
	s, err := ParseSpec(args)
	if err != nil {
		return strings.Join(args, " ")
	}
	return s.Key()
}
