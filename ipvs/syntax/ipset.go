package syntax

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// TempSet is the scratch set the ipset part fills and swaps in, so each set changes
// in one step: a set that is flushed and refilled in place is empty for a moment, and
// KUBE-IPVS-FILTER would then reject new connections to the VIPs.
const TempSet = "svcgen-tmp"

// CreateLine is "create NAME TYPE options" as kube-proxy creates the set s under name.
func CreateLine(name string, s *Set) string {
	line := "create " + name + " " + s.Type
	if s.Type == BitmapPort {
		return line + " range " + s.Range
	}
	return line + " family " + s.Family + " hashsize " + strconv.Itoa(s.HashSize) + " maxelem " + strconv.Itoa(s.MaxElem)
}

// SetLine is any other ipset restore command: "add NAME ENTRY", "del NAME ENTRY",
// "swap NAME OTHER", "destroy NAME". With CreateLine it writes every ipset line svcgen
// writes: the script's sets, apply's changes, the views of diff and audit.
func SetLine(cmd, name string, args ...string) string {
	return string(appendSetLine(nil, cmd, name, args...))
}

// appendSetLine appends SetLine's line, without a newline.
func appendSetLine(b []byte, cmd, name string, args ...string) []byte {
	b = append(append(append(b, cmd...), ' '), name...)
	for _, a := range args {
		b = append(append(b, ' '), a...)
	}
	return b
}

// WriteSave writes the sets as "ipset save" prints them: each create line, then its
// entries.
func WriteSave(w io.Writer, sets []*Set) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, s := range sets {
		bw.WriteString(CreateLine(s.Name, s) + "\n")
		for _, e := range s.Entries {
			line = append(appendSetLine(line[:0], "add", s.Name, e), '\n')
			bw.Write(line)
		}
	}
	return bw.Flush()
}

// WriteSets writes "ipset restore -exist" input that leaves exactly these sets with
// exactly these entries: each set is created if missing, then a scratch set of the
// same type is filled and swapped with it, and the scratch set destroyed. It expects
// TempSet not to exist (the script destroys a leftover one first).
func WriteSets(w io.Writer, sets []*Set) error {
	bw := bufio.NewWriter(w)
	var line []byte
	for _, s := range sets {
		bw.WriteString(CreateLine(s.Name, s) + "\n")
		bw.WriteString(CreateLine(TempSet, s) + "\n")
		for _, e := range s.Entries {
			line = append(appendSetLine(line[:0], "add", TempSet, e), '\n')
			bw.Write(line)
		}
		bw.WriteString(SetLine("swap", TempSet, s.Name) + "\n")
		bw.WriteString(SetLine("destroy", TempSet) + "\n")
	}
	return bw.Flush()
}

// ParseSets reads "ipset save" output, or "ipset restore" input (WriteSets' among
// them), into the sets it leaves behind: RestoreSets run over no sets.
func ParseSets(name string, r io.Reader) ([]*Set, error) {
	sets, err := RestoreSets(name, nil, r)
	if err != nil {
		return nil, err
	}
	return sets, nil
}

// RestoreSets runs "ipset restore -exist" input over the sets, as the kernel would:
// create, add, del, flush, swap, destroy, each checked (an entry must fit its set's
// type, a set must exist before it is used, a set created again must have the same
// options). Like ipset, it stops at the first command that fails and returns the sets
// as the commands before it left them, with the error naming the line. Entries are
// normalised (addresses as Go prints them, a hash:ip,port,net host net with its /32 or
// /128, which ipset save leaves out) and sorted; sets come in upstream's order, others
// after by name. The sets given are not changed.
func RestoreSets(name string, sets []*Set, r io.Reader) ([]*Set, error) {
	st := map[string]*Set{}
	for _, s := range sets {
		c := *s
		c.Entries = slices.Clone(s.Entries)
		st[s.Name] = &c
	}
	err := runSetCommands(name, st, r)
	return sortedSets(st), err
}

func runSetCommands(name string, st map[string]*Set, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		w := strings.Fields(sc.Text())
		if len(w) == 0 || strings.HasPrefix(w[0], "#") {
			continue
		}
		if err := setCommand(st, w); err != nil {
			return fmt.Errorf("%s: line %d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// sortedSets are the sets in the package's order, entries sorted and unique.
func sortedSets(st map[string]*Set) []*Set {
	var out []*Set
	for _, s := range st {
		slices.Sort(s.Entries)
		s.Entries = slices.Compact(s.Entries)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Set) int {
		ia, ib := setOrder(a.Name), setOrder(b.Name)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// ParseSetsBytes is ParseSets over a byte slice.
func ParseSetsBytes(name string, data []byte) ([]*Set, error) {
	return ParseSets(name, bytes.NewReader(data))
}

func setOrder(name string) int {
	for i, si := range SetInfos {
		if name == si.Name || name == SetName(si.Name, true) {
			return i
		}
	}
	return len(SetInfos)
}

// setCommands are the "ipset restore" commands, by every name ipset takes for them,
// with the number of words each needs.
var setCommands = map[string]struct {
	words int
	run   func(st map[string]*Set, w []string) error
}{
	"create": {3, createSet}, "-N": {3, createSet}, "n": {3, createSet},
	"add": {3, addEntry}, "-A": {3, addEntry}, "a": {3, addEntry},
	"del": {3, delEntry}, "-D": {3, delEntry}, "d": {3, delEntry},
	"flush": {2, flushSet}, "-F": {2, flushSet},
	"swap": {3, swapSets}, "-W": {3, swapSets}, "w": {3, swapSets},
	"destroy": {2, destroySet}, "-X": {2, destroySet}, "x": {2, destroySet},
}

// setCommand runs one command (its words w) over the sets st.
func setCommand(st map[string]*Set, w []string) error {
	c, ok := setCommands[w[0]]
	switch {
	case !ok:
		return fmt.Errorf("%q: not an ipset save or restore command", w[0])
	case len(w) < c.words:
		return fmt.Errorf("%s: too few words", w[0])
	}
	return c.run(st, w)
}

// getSet is the set of that name, for command cmd.
func getSet(st map[string]*Set, cmd, name string) (*Set, error) {
	if s := st[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%s %s: the set does not exist", cmd, name)
}

// createSet creates a set, or checks that the one of its name has its options (as
// ipset restore -exist does).
func createSet(st map[string]*Set, w []string) error {
	s, err := parseCreate(w[1], w[2], w[3:])
	if err != nil {
		return err
	}
	if old := st[s.Name]; old != nil {
		if CreateLine(old.Name, old) != CreateLine(s.Name, s) {
			return fmt.Errorf("create %s: exists with other options", s.Name)
		}
		return nil
	}
	st[s.Name] = s
	return nil
}

func addEntry(st map[string]*Set, w []string) error {
	return changeEntry(st, w, func(s *Set, e string) { s.Entries = append(s.Entries, e) })
}

func delEntry(st map[string]*Set, w []string) error {
	return changeEntry(st, w, func(s *Set, e string) {
		s.Entries = slices.DeleteFunc(s.Entries, func(x string) bool { return x == e })
	})
}

// changeEntry checks the entry of an add or del against its set and changes the set.
func changeEntry(st map[string]*Set, w []string, change func(s *Set, e string)) error {
	s, err := getSet(st, w[0], w[1])
	if err != nil {
		return err
	}
	e, err := normalizeEntry(s, w[2])
	if err != nil {
		return fmt.Errorf("%s %s: %w", w[0], w[1], err)
	}
	change(s, e)
	return nil
}

func flushSet(st map[string]*Set, w []string) error {
	s, err := getSet(st, w[0], w[1])
	if err != nil {
		return err
	}
	s.Entries = nil
	return nil
}

func swapSets(st map[string]*Set, w []string) error {
	a, err := getSet(st, w[0], w[1])
	if err != nil {
		return err
	}
	b, err := getSet(st, w[0], w[2])
	if err != nil {
		return err
	}
	if a.Type != b.Type || a.Family != b.Family {
		return fmt.Errorf("swap %s %s: the sets are of different types", a.Name, b.Name)
	}
	a.Entries, b.Entries = b.Entries, a.Entries
	return nil
}

func destroySet(st map[string]*Set, w []string) error {
	if _, err := getSet(st, w[0], w[1]); err != nil {
		return err
	}
	delete(st, w[1])
	return nil
}

func parseCreate(name, typ string, opts []string) (*Set, error) {
	s := &Set{Name: name, Type: typ}
	switch typ {
	case HashIP, HashIPPort, HashIPPortIP, HashIPPortNet:
		s.Family, s.HashSize, s.MaxElem = "inet", 1024, 65536
	case BitmapPort:
	default:
		return nil, fmt.Errorf("create %s: set type %q is not one kube-proxy uses", name, typ)
	}
	for i := 0; i < len(opts); i++ {
		if i+1 >= len(opts) {
			return nil, fmt.Errorf("create %s: option %q without a value", name, opts[i])
		}
		v := opts[i+1]
		var err error
		switch opts[i] {
		case "family":
			s.Family = v
		case "hashsize":
			s.HashSize, err = strconv.Atoi(v)
		case "maxelem":
			s.MaxElem, err = strconv.Atoi(v)
		case "range":
			s.Range = v
		case "bucketsize", "initval": // ipset 7 prints its own choices back
		default:
			return nil, fmt.Errorf("create %s: option %q is not one kube-proxy uses", name, opts[i])
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %s %q: not a number", name, opts[i], v)
		}
		i++
	}
	for _, si := range SetInfos {
		if name == si.Name || name == SetName(si.Name, true) {
			s.Comment = si.Comment
		}
	}
	return s, nil
}

// normalizeEntry checks an entry against its set's type and prints it the way the
// emitter does.
func normalizeEntry(s *Set, e string) (string, error) {
	bad := func() (string, error) { return "", fmt.Errorf("entry %q does not fit %s", e, s.Type) }
	addr := func(text string) (netip.Addr, bool) {
		a, err := netip.ParseAddr(text)
		return a, err == nil && (a.Is6() == (s.Family == "inet6"))
	}
	if s.Type == BitmapPort {
		if _, err := strconv.ParseUint(e, 10, 16); err != nil {
			return bad()
		}
		return e, nil
	}
	parts := strings.Split(e, ",")
	ip, ok := addr(parts[0])
	if !ok {
		return bad()
	}
	if s.Type == HashIP {
		if len(parts) != 1 {
			return bad()
		}
		return ip.String(), nil
	}
	want := map[string]int{HashIPPort: 2, HashIPPortIP: 3, HashIPPortNet: 3}[s.Type]
	if len(parts) != want {
		return bad()
	}
	proto, port, found := strings.Cut(parts[1], ":")
	if _, err := strconv.ParseUint(port, 10, 16); !found || err != nil || (proto != "tcp" && proto != "udp" && proto != "sctp") {
		return bad()
	}
	out := ip.String() + "," + proto + ":" + port
	switch s.Type {
	case HashIPPortIP:
		ip2, ok := addr(parts[2])
		if !ok {
			return bad()
		}
		out += "," + ip2.String()
	case HashIPPortNet:
		text := parts[2]
		if !strings.Contains(text, "/") {
			text += "/" + strconv.Itoa(ip.BitLen())
		}
		p, err := netip.ParsePrefix(text)
		if err != nil || p.Addr().Is6() != ip.Is6() {
			return bad()
		}
		out += "," + p.Masked().String()
	}
	return out, nil
}
