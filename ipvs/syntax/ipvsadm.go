package syntax

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
)

// protocolSwitch is ipvsadm's option for a protocol's service address.
func protocolSwitch(p model.Protocol) string {
	switch p {
	case model.UDP:
		return "-u"
	case model.SCTP:
		return "--sctp-service"
	}
	return "-t"
}

// ServiceLine is a virtual server as "ipvsadm -Sn" prints it, the "-A" line
// ("-A -t 10.0.0.1:80 -s rr -p 10800"): the form the script compares with the node.
func ServiceLine(vs *VirtualServer) string { return ServiceCommand("-A", vs) }

// ServiceCommand is an "ipvsadm -R" command on a virtual server: "-A" adds it (the
// line "ipvsadm -Sn" prints), "-E" edits it in place with the same options, "-D"
// deletes it (the key alone). It is the one writer of these lines, for the script's
// rules, apply's operations and the views of diff and audit alike.
func ServiceCommand(cmd string, vs *VirtualServer) string {
	var b strings.Builder
	b.WriteString(cmd + " " + vs.Key())
	if cmd == "-D" {
		return b.String()
	}
	b.WriteString(" -s " + vs.Scheduler)
	if vs.Flags&FlagPersistent != 0 {
		b.WriteString(" -p " + strconv.FormatUint(uint64(vs.Timeout), 10))
		if vs.Netmask != "" {
			b.WriteString(" -M " + vs.Netmask)
		}
	}
	if vs.Flags&FlagOnePacket != 0 {
		b.WriteString(" -o")
	}
	if f := schedFlags(vs); f != "" {
		b.WriteString(" -b " + f)
	}
	return b.String()
}

// RealLine is a real server as "ipvsadm -Sn" prints it ("-a -t VIP:80 -r IP:80 -m -w 1").
func RealLine(vs *VirtualServer, rs RealServer) string { return RealCommand("-a", vs, rs) }

// RealCommand is an "ipvsadm -R" command on a real server of vs: "-a" adds it (the
// line "ipvsadm -Sn" prints), "-e" edits it (forwarding method and weight: at weight
// 0 it drains), "-d" deletes it ("-d -t VIP:80 -r IP:80").
func RealCommand(cmd string, vs *VirtualServer, rs RealServer) string {
	if cmd == "-d" {
		return "-d " + vs.Key() + " -r " + rs.Address.String()
	}
	return string(appendRealLine(nil, cmd, vs.Key(), rs))
}

// appendRealLine appends the -a (or -e) line of a real server of the service named
// key, without a newline.
func appendRealLine(b []byte, cmd, key string, rs RealServer) []byte {
	b = append(b, cmd...)
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, " -r "...)
	b = rs.Address.AppendTo(b)
	b = append(b, ' ')
	b = append(b, rs.Forward...)
	b = append(b, " -w "...)
	return strconv.AppendInt(b, int64(rs.Weight), 10)
}

// schedFlags names the scheduler flag bits as ipvsadm does: sh-port, mh-port...
func schedFlags(vs *VirtualServer) string {
	names, ok := schedFlagNames[vs.Scheduler]
	if !ok {
		names = genericFlagNames
	}
	var out []string
	for i, bit := range []uint32{FlagSched1, FlagSched2, FlagSched3} {
		if vs.Flags&bit != 0 {
			out = append(out, names[i])
		}
	}
	return strings.Join(out, ",")
}

// WriteRules writes the virtual servers as "ipvsadm -R" input, which is also exactly
// what "ipvsadm -Sn" prints for them: every service, then its real servers.
func WriteRules(w io.Writer, vss []*VirtualServer) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, vs := range vss {
		bw.WriteString(ServiceLine(vs))
		bw.WriteByte('\n')
		key := vs.Key()
		for _, rs := range vs.Reals {
			line = append(appendRealLine(line[:0], "-a", key, rs), '\n')
			bw.Write(line)
		}
	}
	return bw.Flush()
}

// ParseRules reads "ipvsadm -Sn" output (or "ipvsadm -R" input of -A and -a lines)
// into virtual servers, sorted as WriteRules writes them. name is used in errors.
func ParseRules(name string, r io.Reader) ([]*VirtualServer, error) {
	p := &rulesParser{name: name, byKey: map[string]*VirtualServer{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		p.line++
		words := strings.Fields(sc.Text())
		if len(words) > 0 && words[0] == "ipvsadm" {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		if err := p.parse(words); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", name, p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	SortServices(p.out)
	return p.out, nil
}

// ParseRulesBytes is ParseRules over a byte slice.
func ParseRulesBytes(name string, data []byte) ([]*VirtualServer, error) {
	return ParseRules(name, bytes.NewReader(data))
}

type rulesParser struct {
	name  string
	line  int
	out   []*VirtualServer
	byKey map[string]*VirtualServer
}

func (p *rulesParser) parse(w []string) error {
	switch w[0] {
	case "-A", "--add-service":
		vs, err := parseService(w[1:])
		if err != nil {
			return err
		}
		if p.byKey[vs.Key()] != nil {
			return fmt.Errorf("service %s added twice", vs.Key())
		}
		p.byKey[vs.Key()] = vs
		p.out = append(p.out, vs)
		return nil
	case "-a", "--add-server":
		return p.parseReal(w[1:])
	}
	return fmt.Errorf("%q: not a -A or -a line", strings.Join(w, " "))
}

// serviceAddress reads "-t ADDR:PORT" (or -u, --sctp-service) at the start of w.
func serviceAddress(w []string) (model.Protocol, netip.AddrPort, []string, error) {
	if len(w) < 2 {
		return "", netip.AddrPort{}, nil, fmt.Errorf("missing service address")
	}
	var proto model.Protocol
	switch w[0] {
	case "-t", "--tcp-service":
		proto = model.TCP
	case "-u", "--udp-service":
		proto = model.UDP
	case "--sctp-service":
		proto = model.SCTP
	default:
		return "", netip.AddrPort{}, nil, fmt.Errorf("service %q: only -t, -u and --sctp-service services are read", strings.Join(w[:2], " "))
	}
	ap, err := netip.ParseAddrPort(w[1])
	if err != nil {
		return "", netip.AddrPort{}, nil, fmt.Errorf("service address %q: want IP:port or [IPv6]:port (numeric, as ipvsadm -Sn prints)", w[1])
	}
	return proto, ap, w[2:], nil
}

func parseService(w []string) (*VirtualServer, error) {
	proto, addr, rest, err := serviceAddress(w)
	if err != nil {
		return nil, err
	}
	vs := &VirtualServer{Protocol: proto, Address: addr, Scheduler: "wlc"}
	for i := 0; i < len(rest); i++ {
		opt := rest[i]
		arg := func() (string, error) {
			if i+1 >= len(rest) {
				return "", fmt.Errorf("%s needs a value", opt)
			}
			i++
			return rest[i], nil
		}
		var v string
		switch opt {
		case "-s", "--scheduler":
			if v, err = arg(); err == nil {
				vs.Scheduler = v
			}
		case "-p", "--persistent":
			vs.Flags |= FlagPersistent
			vs.Timeout = 300
			if i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") {
				v, _ = arg()
				t, perr := strconv.ParseUint(v, 10, 32)
				if perr != nil {
					return nil, fmt.Errorf("-p %q: not a number of seconds", v)
				}
				vs.Timeout = uint32(t)
			}
		case "-M", "--netmask":
			vs.Netmask, err = arg()
		case "-o", "--ops":
			vs.Flags |= FlagOnePacket
		case "-b", "--sched-flags":
			if v, err = arg(); err == nil {
				err = vs.setSchedFlags(v)
			}
		default:
			return nil, fmt.Errorf("service option %q is not read", opt)
		}
		if err != nil {
			return nil, err
		}
	}
	return vs, nil
}

func (vs *VirtualServer) setSchedFlags(list string) error {
	names, ok := schedFlagNames[vs.Scheduler]
	for _, f := range strings.Split(list, ",") {
		found := false
		for i, bit := range []uint32{FlagSched1, FlagSched2, FlagSched3} {
			if f == genericFlagNames[i] || (ok && f == names[i]) {
				vs.Flags |= bit
				found = true
			}
		}
		if !found {
			return fmt.Errorf("scheduler flag %q is not one of %s's", f, vs.Scheduler)
		}
	}
	return nil
}

func (p *rulesParser) parseReal(w []string) error {
	proto, addr, rest, err := serviceAddress(w)
	if err != nil {
		return err
	}
	key := (&VirtualServer{Protocol: proto, Address: addr}).Key()
	vs := p.byKey[key]
	if vs == nil {
		return fmt.Errorf("real server for %s before its service", key)
	}
	rs := RealServer{Forward: Route, Weight: 1}
	for i := 0; i < len(rest); i++ {
		switch opt := rest[i]; opt {
		case "-r", "--real-server", "-w", "--weight", "-x", "--u-threshold", "-y", "--l-threshold":
			if i+1 >= len(rest) {
				return fmt.Errorf("%s needs a value", opt)
			}
			i++
			v := rest[i]
			switch opt {
			case "-r", "--real-server":
				if rs.Address, err = netip.ParseAddrPort(v); err != nil {
					return fmt.Errorf("real server %q: want IP:port or [IPv6]:port", v)
				}
			case "-w", "--weight":
				if rs.Weight, err = strconv.Atoi(v); err != nil || rs.Weight < 0 {
					return fmt.Errorf("weight %q: not a number", v)
				}
			default:
				if v != "0" {
					return fmt.Errorf("connection thresholds (%s %s) are not read", opt, v)
				}
			}
		case "-m", "--masquerading":
			rs.Forward = Masquerade
		case "-g", "--gatewaying":
			rs.Forward = Route
		case "-i", "--ipip":
			rs.Forward = Tunnel
		default:
			return fmt.Errorf("real server option %q is not read", opt)
		}
	}
	if !rs.Address.IsValid() {
		return fmt.Errorf("real server line without -r")
	}
	vs.Reals = append(vs.Reals, rs)
	return nil
}
