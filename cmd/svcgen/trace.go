package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	"github.com/svcgen/svcgen/internal/pipeline"
	"github.com/svcgen/svcgen/ir"
	"github.com/svcgen/svcgen/model"
	"github.com/svcgen/svcgen/trace"
	"github.com/svcgen/svcgen/verify"
)

type traceFlags struct {
	inputFlags
	rules    []string
	src, dst string
	proto    string
	fromNode bool
	toLocal  bool
	inIface  string
	output   string
}

func newTrace(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	f := &traceFlags{}
	cmd := &cobra.Command{
		Use:   "trace (-f PATH... | --rules FILE) --src IP --dst IP:PORT [flags]",
		Short: "Follow a packet through a node's rules",
		Long: `trace follows the first packet of a connection through one node's rules and shows
where it can go: every rule that matched, table by table and chain by chain (each
hashed chain with its Service), a branch wherever the rules pick an endpoint at
random, and the outcomes: the endpoints it can reach with their probabilities as exact
fractions, whether it is masqueraded, whether session affinity records the client,
or the verdict (REJECT, DROP, ACCEPT, or no rule decided).

The rules come from manifests (-f, compiled on the fly for the mode of -m or the
configuration) or from ruleset files (--rules, the format detected): svcgen's iptables
output or iptables-save; svcgen's nftables script or nft list ruleset; svcgen's ipvs
script; or a node's ipvsadm -Sn, ipset save and iptables-save output, each with its
own --rules. In ipvs mode the packet goes through the companion chains, IPVS (each
real server takes its weight's share of new connections), filter OUTPUT (IPVS sends
what it schedules out through it, whatever the source) and POSTROUTING.

With manifests, svcgen knows the node's addresses and places the source: the node
itself (the packet starts in nat OUTPUT), a pod on this node (it arrives on a pod
interface, named to match an interface-based local-traffic detector), a pod on another
node, or another host. With --rules it knows only what the flags say: --from-node
(the source is the node's own address), --to-local (the destination is one of the
node's addresses, as a NodePort's is) and --in-iface.`,
		Example: `  # A pod on node1 to HelloService's ClusterIP (allocated from the example ServiceCIDR):
  svcgen trace -f examples/ --src 198.18.1.250 --dst 198.19.43.152:12345
  svcgen trace -f examples/ -m ipvs --src 198.18.0.100 --dst 198.18.0.1:32266 -o json
  svcgen compile -f examples/ > rules.txt && svcgen trace --rules rules.txt --src 198.18.1.250 --dst 198.19.43.152:12345
  iptables-save | svcgen trace --rules - --src 203.0.113.9 --dst 192.168.0.2:30080 --to-local
  nft list ruleset | svcgen trace --rules - --src 10.0.0.9 --dst 10.96.0.10:80
  svcgen trace --rules vs.txt --rules sets.txt --rules ipt.txt --src 10.0.0.9 --dst 10.96.0.10:80
      # vs.txt, sets.txt, ipt.txt: ipvsadm -Sn, ipset save and iptables-save of the node`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTrace(f, stdin, stdout, stderr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringArrayVar(&f.rules, "rules", nil, "trace this ruleset instead of compiling manifests (iptables-save, nft list ruleset, svcgen output; for ipvs, ipvsadm -Sn, ipset save and iptables-save as three --rules; - for stdin)")
	fl.StringVar(&f.src, "src", "", "source address of the packet")
	fl.StringVar(&f.dst, "dst", "", "destination address and port of the packet (IP:PORT, [IPv6]:PORT)")
	fl.StringVar(&f.proto, "proto", "tcp", "protocol: tcp, udp or sctp")
	fl.BoolVar(&f.fromNode, "from-node", false, "the packet comes from the node itself (its source is one of the node's addresses)")
	fl.BoolVar(&f.toLocal, "to-local", false, "the destination is one of the node's addresses")
	fl.StringVar(&f.inIface, "in-iface", "", "interface the packet arrives on (for interface-based local-traffic detection)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text (a tree) or json")
	return cmd
}

// packetFlags checks --src, --dst and --proto.
func (f *traceFlags) packet() (netip.Addr, netip.AddrPort, string, error) {
	if f.src == "" || f.dst == "" {
		return netip.Addr{}, netip.AddrPort{}, "", usagef("trace needs --src IP and --dst IP:PORT")
	}
	src, err := netip.ParseAddr(f.src)
	if err != nil {
		return netip.Addr{}, netip.AddrPort{}, "", usagef("--src: %v", err)
	}
	dst, err := netip.ParseAddrPort(f.dst)
	if err != nil {
		return netip.Addr{}, netip.AddrPort{}, "", usagef("--dst: want IP:PORT ([IPv6]:PORT for IPv6): %v", err)
	}
	if src.Is4() != dst.Addr().Is4() {
		return netip.Addr{}, netip.AddrPort{}, "", usagef("--src %s and --dst %s are of different IP families", src, dst)
	}
	proto := strings.ToLower(f.proto)
	switch proto {
	case "tcp", "udp", "sctp":
	default:
		return netip.Addr{}, netip.AddrPort{}, "", usagef("--proto: unknown protocol %q (want tcp, udp or sctp)", f.proto)
	}
	return src.Unmap(), dst, proto, nil
}

func runTrace(f *traceFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	src, dst, proto, err := f.packet()
	if err != nil {
		return err
	}
	if f.output != "text" && f.output != "json" {
		return usagef("--output: unknown format %q (want text or json)", f.output)
	}
	var res *trace.Result
	if len(f.rules) > 0 {
		if len(f.files) > 0 || f.config != "" {
			return usagef("give manifests (-f) or a ruleset (--rules), not both")
		}
		res, err = f.traceRules(src, dst, proto, stdin)
	} else {
		res, err = f.traceManifests(src, dst, proto, stdin, stderr)
	}
	if err != nil {
		return err
	}
	if f.output == "json" {
		return trace.WriteJSON(stdout, res)
	}
	return trace.WriteText(stdout, res)
}

// traceManifests compiles the manifests for the mode asked and traces through the rules
// it writes.
func (f *traceFlags) traceManifests(src netip.Addr, dst netip.AddrPort, proto string, stdin io.Reader, stderr io.Writer) (*trace.Result, error) {
	res, err := f.compileInputs(stdin, stderr, nil)
	if err != nil {
		return nil, err
	}
	// The packet's family picks the rules: on a dual-stack node each family has its
	// own (ip6tables, the ip6 table, IPv6 virtual servers).
	sm := res.MapOf(model.FamilyOf(dst.Addr()))
	if sm == nil {
		return nil, &pipeline.InputError{Err: fmt.Errorf("--dst %s: this run writes %s rules only (see --ip-family)", dst, ir.FamilyNames(res.Maps))}
	}
	l := verify.NewLocator(sm, res.Resolved.Cluster)
	host := l.Host()
	p, source := l.Packet(src, dst, proto)
	f.adjust(&host, &p, &source)
	mode, err := lookupMode(res.Mode)
	if err != nil {
		return nil, err
	}
	tr, err := mode.Tracer(sm, host)
	if err != nil {
		return nil, &pipeline.InputError{Err: err}
	}
	r, err := tr.Trace(p)
	if err != nil {
		return nil, err
	}
	r.Source = source
	return r, nil
}

// traceRules traces through ruleset files.
func (f *traceFlags) traceRules(src netip.Addr, dst netip.AddrPort, proto string, stdin io.Reader) (*trace.Result, error) {
	var files []trace.File
	stdins := 0
	for _, path := range f.rules {
		if path == "-" {
			stdins++
			if stdins > 1 {
				return nil, errStdinTwice()
			}
		}
		name, data, err := readInput(path, stdin)
		if err != nil {
			return nil, &pipeline.InputError{Err: err}
		}
		files = append(files, trace.File{Name: name, Data: data})
	}
	host := trace.Host{}
	p := trace.Packet{Src: src, Dst: dst.Addr(), DPort: dst.Port(), Proto: proto}
	var source trace.Source
	f.adjust(&host, &p, &source)
	tr, err := trace.Open(files, host)
	if err != nil {
		return nil, &pipeline.InputError{Err: err}
	}
	r, err := tr.Trace(p)
	if err != nil {
		return nil, &pipeline.InputError{Err: fmt.Errorf("tracing: %w", err)}
	}
	r.Source = source
	return r, nil
}

// adjust applies --from-node, --to-local and --in-iface.
func (f *traceFlags) adjust(host *trace.Host, p *trace.Packet, source *trace.Source) {
	if f.fromNode && !host.IsLocal(p.Src) {
		host.Local = append(host.Local, p.Src)
	}
	if f.fromNode || (source.Locality == trace.Unknown && host.IsLocal(p.Src)) {
		*source = trace.Source{Locality: trace.FromNode, Name: source.Name}
		p.InIface = ""
	}
	if f.toLocal && !host.IsLocal(p.Dst) {
		host.Local = append(host.Local, p.Dst)
	}
	if f.inIface != "" {
		p.InIface = f.inIface
	}
}
