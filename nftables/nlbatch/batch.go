// Package nlbatch turns an nft script of svcgen's (a partial sync's transaction) into
// the nf_tables netlink messages nft 1.0.6 sends for it, so that apply can load the
// transaction as one netlink batch (one nf_tables transaction, like "nft -f") without
// running nft, which reads the whole table into its cache before it sends anything:
// 1 to 2 s at 10,000 Services, where the kernel's part is a few hundredths (see
// BENCHMARKS.md, "nftables at kernel speed").
//
// It knows the operations a partial sync writes: add, flush and delete of regular
// chains; add of the rules of the Services' chains (the forms nftables/rules writes
// there); add and delete of elements of kube-proxy's sets and maps; add and delete of
// affinity sets; the commit mark. Anything else (a table, a base chain, a rule of
// another form, a set of another kind) makes Encode return ErrNotEncodable, and the
// caller loads the whole transaction with nft -f instead: a transaction is never
// split. The messages are what nft sends, attribute for attribute (TestAsNft holds
// them to nft --debug=mnl), so the kernel holds the same table whichever loaded it.
//
// It does no I/O: the expressions are google/nftables' (expr.Marshal), the messages
// mdlayher/netlink's, and apply sends them.
package nlbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/mdlayher/netlink"
	nftsyntax "github.com/svcgen/svcgen/nftables/syntax"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// ErrNotEncodable: the script holds an operation this package does not encode.
var ErrNotEncodable = errors.New("not encodable as a netlink batch")

// Message flags as nft sends them: no acknowledgement is asked for (the kernel
// reports what it refuses, and the end of the batch is acknowledged by the caller).
const (
	flagsAdd    = netlink.Request | netlink.Create
	flagsAppend = netlink.Request | netlink.Create | netlink.Append
	flagsOther  = netlink.Request
)

// Encoder turns scripts into messages. The zero value starts anonymous sets' ids at 1.
type Encoder struct {
	// SetID is the id of the last anonymous (or new) set: each set a batch adds gets
	// the next, as nft numbers them, so that rules and elements can name a set of the
	// same batch.
	SetID uint32
	// named are the ids of the named sets added so far, by name: a rule naming one
	// sends its id too, as nft does.
	named map[string]uint32
}

// Message is one message of a batch and the script line it comes from.
type Message struct {
	netlink.Message
	Line int
}

// Encode returns the messages of a script's operations, in order (without the batch's
// begin and end). An error wrapping ErrNotEncodable names the first line it cannot
// encode.
func (e *Encoder) Encode(script []byte) ([]Message, error) {
	ops, err := nftsyntax.ReadScript(string(script))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotEncodable, err)
	}
	var out []Message
	for _, op := range ops {
		msgs, err := e.op(op)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", op.Line, err)
		}
		for _, m := range msgs {
			out = append(out, Message{Message: m, Line: op.Line})
		}
	}
	return out, nil
}

func notEncodable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotEncodable, fmt.Sprintf(format, args...))
}

// fam is the nfgenmsg family of a table family.
func fam(f knftables.Family) (byte, error) {
	switch f {
	case knftables.IPv4Family:
		return unix.NFPROTO_IPV4, nil
	case knftables.IPv6Family:
		return unix.NFPROTO_IPV6, nil
	}
	return 0, notEncodable("family %q", f)
}

func (e *Encoder) op(op nftsyntax.ScriptOp) ([]netlink.Message, error) {
	f, err := fam(op.Family)
	if err != nil {
		return nil, err
	}
	if op.Elems != nil {
		return elementsMsg(f, op.Verb, op.Elems)
	}
	switch o := op.Obj.(type) {
	case *knftables.Chain:
		return chainMsg(f, op.Verb, o)
	case *knftables.Rule:
		if op.Verb != nftsyntax.Add {
			return nil, notEncodable("%s rule", op.Verb)
		}
		return e.ruleMsgs(f, op.Family, o)
	case *knftables.Set:
		return e.setMsg(f, op.Verb, o)
	}
	return nil, notEncodable("%s %T", op.Verb, op.Obj)
}

// msg is one message of type t (NFT_MSG_*) for family f with attributes.
func msg(t int, flags netlink.HeaderFlags, f byte, attrs []netlink.Attribute) (netlink.Message, error) {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | t), Flags: flags},
		Data:   append([]byte{f, unix.NFNETLINK_V0, 0, 0}, data...),
	}, nil
}

func str(s string) []byte { return append([]byte(s), 0) }

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func nested(t uint16, attrs ...netlink.Attribute) netlink.Attribute {
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		panic(err) // attributes of known sizes
	}
	return netlink.Attribute{Type: unix.NLA_F_NESTED | t, Data: b}
}

var table = netlink.Attribute{Type: unix.NFTA_TABLE_NAME, Data: str(nftsyntax.TableName)} // type 1 in every message

// chainMsg: add (a regular chain, nothing else), flush, delete.
func chainMsg(f byte, verb string, c *knftables.Chain) ([]netlink.Message, error) {
	if c.Type != nil || c.Hook != nil || c.Priority != nil || c.Device != nil || c.Comment != nil || c.Handle != nil || c.Policy != nil {
		return nil, notEncodable("chain %q with properties", c.Name)
	}
	name := str(c.Name)
	var m netlink.Message
	var err error
	switch verb {
	case nftsyntax.Add:
		m, err = msg(unix.NFT_MSG_NEWCHAIN, flagsAdd, f, []netlink.Attribute{table, {Type: unix.NFTA_CHAIN_NAME, Data: name}})
	case nftsyntax.Flush:
		m, err = msg(unix.NFT_MSG_DELRULE, flagsOther, f, []netlink.Attribute{table, {Type: unix.NFTA_RULE_CHAIN, Data: name}})
	case nftsyntax.Delete:
		m, err = msg(unix.NFT_MSG_DELCHAIN, flagsOther, f, []netlink.Attribute{table, {Type: unix.NFTA_CHAIN_NAME, Data: name}})
	default:
		return nil, notEncodable("%s chain", verb)
	}
	return []netlink.Message{m}, err
}

// setMsg: add an affinity set (type ipv4_addr or ipv6_addr; flags dynamic,timeout;
// a timeout), delete a set.
func (e *Encoder) setMsg(f byte, verb string, s *knftables.Set) ([]netlink.Message, error) {
	if verb == nftsyntax.Delete {
		m, err := msg(unix.NFT_MSG_DELSET, flagsOther, f, []netlink.Attribute{table, {Type: unix.NFTA_SET_NAME, Data: str(s.Name)}})
		return []netlink.Message{m}, err
	}
	if verb != nftsyntax.Add {
		return nil, notEncodable("%s set", verb)
	}
	key, ok := addrTypes[s.Type]
	if !ok || s.TypeOf != "" || s.Timeout == nil || len(s.Flags) != 2 || s.Flags[0] != knftables.DynamicFlag || s.Flags[1] != knftables.TimeoutFlag ||
		s.GCInterval != nil || s.Size != nil || s.Policy != nil || s.AutoMerge != nil || s.Comment != nil || s.Handle != nil {
		return nil, notEncodable("set %q of a kind svcgen's partial syncs do not add", s.Name)
	}
	e.SetID++
	if e.named == nil {
		e.named = map[string]uint32{}
	}
	e.named[s.Name] = e.SetID
	m, err := msg(unix.NFT_MSG_NEWSET, flagsAdd, f, []netlink.Attribute{
		table,
		{Type: unix.NFTA_SET_NAME, Data: str(s.Name)},
		{Type: unix.NFTA_SET_FLAGS, Data: be32(unix.NFT_SET_TIMEOUT | unix.NFT_SET_EVAL)},
		{Type: unix.NFTA_SET_KEY_TYPE, Data: be32(key.magic)},
		{Type: unix.NFTA_SET_KEY_LEN, Data: be32(key.len)},
		{Type: unix.NFTA_SET_ID, Data: be32(e.SetID)},
		{Type: unix.NFTA_SET_TIMEOUT, Data: binary.BigEndian.AppendUint64(nil, uint64(*s.Timeout/time.Millisecond))},
		{Type: unix.NFTA_SET_USERDATA, Data: udataKeyBigEndian},
	})
	return []netlink.Message{m}, err
}

// A datatype: nft's number for it and the bytes of a value.
type datatype struct{ magic, len uint32 }

var addrTypes = map[string]datatype{"ipv4_addr": {7, 4}, "ipv6_addr": {8, 16}}

// udataKeyBigEndian is a set's user data as nft writes it for a key of addresses:
// NFTNL_UDATA_SET_KEYBYTEORDER, BYTEORDER_BIG_ENDIAN (host order u32).
var udataKeyBigEndian = []byte{0, 4, 2, 0, 0, 0}

// elementsMsg adds or deletes elements of one of kube-proxy's sets or maps.
func elementsMsg(f byte, verb string, elems []*knftables.Element) ([]netlink.Message, error) {
	t := unix.NFT_MSG_NEWSETELEM
	flags := flagsAdd
	switch verb {
	case nftsyntax.Add:
	case nftsyntax.Delete:
		t, flags = unix.NFT_MSG_DELSETELEM, flagsOther
	default:
		return nil, notEncodable("%s element", verb)
	}
	list := make([]netlink.Attribute, 0, len(elems))
	for i, el := range elems {
		a, err := element(el, verb == nftsyntax.Add, uint16(i+1))
		if err != nil {
			return nil, err
		}
		list = append(list, a)
	}
	m, err := msg(t, flags, f, []netlink.Attribute{
		table,
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: str(elems[0].Set)},
		nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, list...),
	})
	return []netlink.Message{m}, err
}

// element is the nth element (from 1, as nft numbers them) of a named set or map: its key, and for an add its comment
// and value (a verdict: kube-proxy's maps are verdict maps).
func element(el *knftables.Element, add bool, n uint16) (netlink.Attribute, error) {
	key, err := concatKey(el.Key)
	if err != nil {
		return netlink.Attribute{}, err
	}
	attrs := []netlink.Attribute{nested(unix.NFTA_SET_ELEM_KEY, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: key})}
	if add && len(el.Value) > 0 {
		if len(el.Value) != 1 {
			return netlink.Attribute{}, notEncodable("element value %q", el.Value)
		}
		v, err := nftsyntax.ParseVerdict(el.Value[0])
		if err != nil {
			return netlink.Attribute{}, notEncodable("element value %q", el.Value[0])
		}
		d, err := verdictData(v)
		if err != nil {
			return netlink.Attribute{}, err
		}
		attrs = append(attrs, d)
	}
	if add && el.Comment != nil {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_SET_ELEM_USERDATA, Data: udataString(0, *el.Comment)})
	}
	return nested(n, attrs...), nil
}

// udataString is one user data record of a string (NUL-terminated): a rule's or an
// element's comment is record 0.
func udataString(t byte, s string) []byte {
	return append([]byte{t, byte(len(s) + 1)}, str(s)...)
}

// verdictData is NFTA_SET_ELEM_DATA holding a verdict.
func verdictData(v nftsyntax.Verdict) (netlink.Attribute, error) {
	code, err := verdictCode(v.Kind)
	if err != nil {
		return netlink.Attribute{}, err
	}
	inner := []netlink.Attribute{{Type: unix.NFTA_VERDICT_CODE, Data: be32(uint32(code))}}
	if v.Chain != "" {
		inner = append(inner, netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: str(v.Chain)})
	}
	return nested(unix.NFTA_SET_ELEM_DATA, nested(unix.NFTA_DATA_VERDICT, inner...)), nil
}

func verdictCode(k nftsyntax.VerdictKind) (int32, error) {
	switch k {
	case nftsyntax.Accept:
		return 1, nil // NF_ACCEPT
	case nftsyntax.Drop:
		return 0, nil // NF_DROP
	case nftsyntax.Return:
		return unix.NFT_RETURN, nil
	case nftsyntax.Jump:
		return unix.NFT_JUMP, nil
	case nftsyntax.Goto:
		return unix.NFT_GOTO, nil
	}
	return 0, notEncodable("verdict %q", k)
}

// concatKey is a key as nft lays it out: one address alone as it is; several fields
// (address . protocol . port, ...) each in registers of 4 bytes, padded with zeros.
func concatKey(fields []string) ([]byte, error) {
	if len(fields) == 1 {
		a, err := netip.ParseAddr(fields[0])
		if err != nil {
			return nil, notEncodable("key %q", fields[0])
		}
		return a.AsSlice(), nil
	}
	var out []byte
	for _, f := range fields {
		b, err := field(f)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// field is one field of a concatenation, padded to 4 bytes: an address, a protocol
// (tcp, udp, sctp) or a port.
func field(f string) ([]byte, error) {
	if a, err := netip.ParseAddr(f); err == nil {
		return a.AsSlice(), nil
	}
	if p, ok := protocols[f]; ok {
		return []byte{p, 0, 0, 0}, nil
	}
	if n, err := strconv.ParseUint(f, 10, 16); err == nil {
		return []byte{byte(n >> 8), byte(n), 0, 0}, nil
	}
	return nil, notEncodable("key field %q", f)
}

var protocols = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// words splits a rule's text; "" when none are left.
type words struct{ w []string }

func (w *words) peek(i int) string {
	if i < len(w.w) {
		return w.w[i]
	}
	return ""
}

func (w *words) take(want ...string) bool {
	for i, s := range want {
		if w.peek(i) != s {
			return false
		}
	}
	w.w = w.w[len(want):]
	return true
}

func (w *words) next() string {
	s := w.peek(0)
	if len(w.w) > 0 {
		w.w = w.w[1:]
	}
	return s
}
