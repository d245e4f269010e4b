package nlbatch

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// The rules of the Services' chains, as nftables/rules writes them (all releases), are
// sequences of these terms, each encoded as nft encodes it:
//
//	ip saddr|daddr [!=] ADDR|PREFIX|@SET      ip6 likewise
//	meta l4proto tcp|udp|sctp
//	fib saddr type local
//	mark set mark or 0xN
//	update @SET { ip saddr }
//	dnat to ADDR:PORT                          (ip6: dnat to [ADDR]:PORT)
//	dnat ip addr . port to numgen random mod N map { K : ADDR . PORT , ... }
//	numgen random mod N vmap { K : goto CHAIN , ... }
//	jump|goto CHAIN, accept, drop, return
//
// Any other word (iifname, reject, an anonymous set of addresses, ...) is not encoded.

// rule is a rule under encoding: its expressions, and the anonymous maps it adds first.
type rule struct {
	e      *Encoder
	f      byte
	family knftables.Family
	exprs  [][]byte
	pre    []netlink.Message
}

func (e *Encoder) ruleMsgs(f byte, family knftables.Family, r *knftables.Rule) ([]netlink.Message, error) {
	if r.Index != nil || r.Handle != nil {
		return nil, notEncodable("rule with index or handle")
	}
	b := &rule{e: e, f: f, family: family}
	w := &words{w: strings.Fields(r.Rule)}
	for len(w.w) > 0 {
		if err := b.term(w); err != nil {
			return nil, err
		}
	}
	list := make([]netlink.Attribute, len(b.exprs))
	for i, x := range b.exprs {
		list[i] = netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: x}
	}
	attrs := []netlink.Attribute{
		table,
		{Type: unix.NFTA_RULE_CHAIN, Data: str(r.Chain)},
		{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: mustMarshal(list)},
	}
	if r.Comment != nil {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_RULE_USERDATA, Data: udataString(0, *r.Comment)})
	}
	m, err := msg(unix.NFT_MSG_NEWRULE, flagsAppend, f, attrs)
	return append(b.pre, m), err
}

func mustMarshal(attrs []netlink.Attribute) []byte {
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		panic(err)
	}
	return b
}

func (b *rule) add(es ...expr.Any) {
	for _, e := range es {
		x, err := expr.Marshal(b.f, e)
		if err != nil {
			panic(err) // expressions of known shapes
		}
		b.exprs = append(b.exprs, x)
	}
}

// raw adds an expression google/nftables does not write as nft does.
func (b *rule) raw(name string, data []netlink.Attribute) {
	b.exprs = append(b.exprs, mustMarshal([]netlink.Attribute{
		{Type: unix.NFTA_EXPR_NAME, Data: str(name)},
		{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: mustMarshal(data)},
	}))
}

// bitwise is "reg 1 = (reg 1 & mask) ^ xor" as nft sends it for "mark set mark or X":
// with the operation (NFT_BITWISE_BOOL), which google/nftables' Bitwise leaves out
// (as nft does for a prefix's mask).
func (b *rule) bitwise(mask, xor []byte) {
	b.raw("bitwise", []netlink.Attribute{
		{Type: unix.NFTA_BITWISE_SREG, Data: be32(1)},
		{Type: unix.NFTA_BITWISE_DREG, Data: be32(1)},
		{Type: unix.NFTA_BITWISE_LEN, Data: be32(uint32(len(mask)))},
		nested(unix.NFTA_BITWISE_MASK, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: mask}),
		nested(unix.NFTA_BITWISE_XOR, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: xor}),
		{Type: 6, Data: be32(0)}, // NFTA_BITWISE_OP: NFT_BITWISE_BOOL (x/sys/unix has neither)
	})
}

func (b *rule) v6() bool { return b.family == knftables.IPv6Family }

// term encodes the term at the start of w.
func (b *rule) term(w *words) error {
	ipX := string(b.family)
	switch {
	case w.peek(0) == ipX && (w.peek(1) == "saddr" || w.peek(1) == "daddr"):
		w.next()
		return b.addrMatch(w.next() == "saddr", w)
	case w.take("meta", "l4proto"):
		p, ok := protocols[w.next()]
		if !ok {
			return notEncodable("meta l4proto")
		}
		b.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}})
	case w.take("fib", "saddr", "type", "local"):
		b.add(&expr.Fib{Register: 1, FlagSADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)})
	case w.take("mark", "set", "mark", "or"):
		v, err := strconv.ParseUint(w.next(), 0, 32)
		if err != nil {
			return notEncodable("mark")
		}
		b.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1})
		b.bitwise(binary.NativeEndian.AppendUint32(nil, ^uint32(v)), binary.NativeEndian.AppendUint32(nil, uint32(v)))
		b.add(&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	case w.peek(0) == "update":
		return b.update(w)
	case w.peek(0) == "dnat":
		return b.dnat(w)
	case w.take("numgen", "random", "mod"):
		return b.numgenVmap(w)
	default:
		return b.verdict(w)
	}
	return nil
}

// addrMatch: [!=] ADDR|PREFIX|@SET after "ip saddr" or "ip daddr".
func (b *rule) addrMatch(src bool, w *words) error {
	off, size := uint32(16), uint32(4)
	if src {
		off = 12
	}
	if b.v6() {
		off, size = 24, 16
		if src {
			off = 8
		}
	}
	op := expr.CmpOpEq
	if w.take("!=") {
		op = expr.CmpOpNeq
	}
	v := w.next()
	if set, ok := strings.CutPrefix(v, "@"); ok {
		b.add(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
			&expr.Lookup{SourceRegister: 1, SetName: set, SetID: b.e.named[set], Invert: op == expr.CmpOpNeq})
		return nil
	}
	p, err := parsePrefix(v)
	if err != nil || p.Addr().Is6() != b.v6() {
		return notEncodable("address %q", v)
	}
	bits := p.Bits()
	switch {
	case bits == int(size)*8:
		b.add(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
			&expr.Cmp{Op: op, Register: 1, Data: p.Addr().AsSlice()})
	case bits%8 == 0:
		// nft reads only the bytes a prefix of whole bytes covers
		n := uint32(bits / 8)
		b.add(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Cmp{Op: op, Register: 1, Data: p.Addr().AsSlice()[:n]})
	default:
		mask := netip.PrefixFrom(netip.IPv6Unspecified(), bits)
		if !b.v6() {
			mask = netip.PrefixFrom(netip.IPv4Unspecified(), bits)
		}
		b.add(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size})
		// a prefix's mask: nft sends no operation here (google/nftables' Bitwise)
		b.add(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: maskBytes(mask), Xor: make([]byte, size)})
		b.add(&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()})
	}
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// maskBytes is the netmask of a prefix's length.
func maskBytes(p netip.Prefix) []byte {
	out := make([]byte, p.Addr().BitLen()/8)
	for i := 0; i < p.Bits(); i++ {
		out[i/8] |= 0x80 >> (i % 8)
	}
	return out
}

// update: "update @SET { ip saddr }".
func (b *rule) update(w *words) error {
	ipX := string(b.family)
	w.next()
	set, ok := strings.CutPrefix(w.next(), "@")
	if !ok || !w.take("{", ipX, "saddr", "}") {
		return notEncodable("update")
	}
	off, size := uint32(12), uint32(4)
	if b.v6() {
		off, size = 8, 16
	}
	b.add(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size})
	// google/nftables' Dynset always sends flags (0), which nft leaves out: written here
	// as nft writes it, with the set's id (0 for a set that is in the kernel already).
	b.raw("dynset", []netlink.Attribute{
		{Type: unix.NFTA_DYNSET_SREG_KEY, Data: be32(1)},
		{Type: unix.NFTA_DYNSET_OP, Data: be32(unix.NFT_DYNSET_OP_UPDATE)},
		{Type: unix.NFTA_DYNSET_SET_NAME, Data: str(set)},
		{Type: unix.NFTA_DYNSET_SET_ID, Data: be32(b.e.named[set])},
	})
	return nil
}

// natFamily is the NAT expression's family.
func (b *rule) natFamily() uint32 {
	if b.v6() {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// dnat: "dnat to ADDR:PORT" or "dnat ip addr . port to numgen random mod N map { ... }".
func (b *rule) dnat(w *words) error {
	w.next()
	if w.take("to") {
		ap, err := parseAddrPort(w.next())
		if err != nil || ap.Addr().Is6() != b.v6() {
			return notEncodable("dnat to")
		}
		b.add(&expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, ap.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: b.natFamily(), RegAddrMin: 1, RegProtoMin: 2, Specified: true})
		return nil
	}
	if !w.take(string(b.family), "addr", ".", "port", "to", "numgen", "random", "mod") {
		return notEncodable("dnat")
	}
	n, err := strconv.ParseUint(w.next(), 10, 32)
	if err != nil || !w.take("map", "{") {
		return notEncodable("dnat map")
	}
	var elems []anonElem
	for {
		k, err := strconv.ParseUint(w.next(), 10, 32)
		if err != nil || !w.take(":") {
			return notEncodable("dnat map element")
		}
		addr, err := netip.ParseAddr(w.next())
		if err != nil || addr.Is6() != b.v6() || !w.take(".") {
			return notEncodable("dnat map element")
		}
		port, err := strconv.ParseUint(w.next(), 10, 16)
		if err != nil {
			return notEncodable("dnat map element")
		}
		elems = append(elems, anonElem{key: uint32(k), data: append(addr.AsSlice(), byte(port>>8), byte(port), 0, 0)})
		if w.take("}") {
			break
		}
		if !w.take(",") {
			return notEncodable("dnat map")
		}
	}
	dataType := datatype{magic: 7<<6 | 13, len: 8} // ipv4_addr . inet_service
	udata := udataDnatMap4
	if b.v6() {
		dataType, udata = datatype{magic: 8<<6 | 13, len: 20}, udataDnatMap6
	}
	name, id := b.anonMap(dataType, udata, elems)
	// The port follows the address: in the second 32-bit register (NFT_REG32_01) after
	// an IPv4 address, in NFT_REG_2 after an IPv6 one, which fills NFT_REG_1 (as nft).
	protoReg := uint32(unix.NFT_REG32_01)
	if b.v6() {
		protoReg = unix.NFT_REG_2
	}
	b.add(&expr.Numgen{Register: 1, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: name, SetID: id},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: b.natFamily(), RegAddrMin: 1, RegProtoMin: protoReg})
	return nil
}

func parseAddrPort(s string) (netip.AddrPort, error) {
	return netip.ParseAddrPort(s)
}

// numgenVmap: after "numgen random mod": "N vmap { K : goto CHAIN , ... }".
func (b *rule) numgenVmap(w *words) error {
	n, err := strconv.ParseUint(w.next(), 10, 32)
	if err != nil || !w.take("vmap", "{") {
		return notEncodable("numgen vmap")
	}
	var elems []anonElem
	for {
		k, err := strconv.ParseUint(w.next(), 10, 32)
		verb := w.peek(1)
		if err != nil || !w.take(":") || (verb != "goto" && verb != "jump") {
			return notEncodable("numgen vmap element")
		}
		w.next()
		elems = append(elems, anonElem{key: uint32(k), verdict: verb, chain: w.next()})
		if w.take("}") {
			break
		}
		if !w.take(",") {
			return notEncodable("numgen vmap")
		}
	}
	name, id := b.anonMap(datatype{magic: 0xffffff00, len: 0}, udataNumgenVmap, elems)
	b.add(&expr.Numgen{Register: 1, Modulus: uint32(n), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: name, SetID: id})
	return nil
}

// verdict: jump|goto CHAIN, accept, drop, return: the end of the rule.
func (b *rule) verdict(w *words) error {
	v := expr.Verdict{}
	switch w.next() {
	case "jump":
		v.Kind, v.Chain = expr.VerdictJump, w.next()
	case "goto":
		v.Kind, v.Chain = expr.VerdictGoto, w.next()
	case "accept":
		v.Kind = expr.VerdictAccept
	case "drop":
		v.Kind = expr.VerdictDrop
	case "return":
		v.Kind = expr.VerdictReturn
	default:
		return notEncodable("term")
	}
	if len(w.w) > 0 || ((v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) && v.Chain == "") {
		return notEncodable("verdict")
	}
	b.add(&v) // an immediate of the verdict
	return nil
}

// anonElem is an element of an anonymous map keyed by numgen's number: a verdict
// ("goto" CHAIN) or data.
type anonElem struct {
	key            uint32
	verdict, chain string
	data           []byte
}

// The user data nft gives an anonymous map keyed by "numgen random mod N", by its
// values (TestAsNft checks them against nft's): the key's byte order (host), the
// data's, and typeof records.
var (
	udataNumgenVmap = []byte{0, 4, 1, 0, 0, 0, 1, 4, 0, 0, 0, 0, 4, 8, 0, 4, 1, 0, 0, 0, 1, 0, 6, 4, 0, 0, 0, 0}
	udataDnatMap4   = []byte{0, 4, 1, 0, 0, 0, 1, 4, 0, 0, 0, 0, 6, 4, 0, 0, 0, 0}
	udataDnatMap6   = udataDnatMap4
)

// anonMap adds the anonymous constant map of a rule (before the rule, as nft does):
// its name and id.
func (b *rule) anonMap(data datatype, udata []byte, elems []anonElem) (string, uint32) {
	b.e.SetID++
	id := b.e.SetID
	const name = "__map%d"
	set, err := msg(unix.NFT_MSG_NEWSET, flagsAdd, b.f, []netlink.Attribute{
		table,
		{Type: unix.NFTA_SET_NAME, Data: str(name)},
		{Type: unix.NFTA_SET_FLAGS, Data: be32(unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT | unix.NFT_SET_MAP)},
		{Type: unix.NFTA_SET_KEY_TYPE, Data: be32(4)}, // integer
		{Type: unix.NFTA_SET_KEY_LEN, Data: be32(4)},
		{Type: unix.NFTA_SET_DATA_TYPE, Data: be32(data.magic)},
		{Type: unix.NFTA_SET_DATA_LEN, Data: be32(data.len)},
		{Type: unix.NFTA_SET_ID, Data: be32(id)},
		nested(unix.NFTA_SET_DESC, netlink.Attribute{Type: unix.NFTA_SET_DESC_SIZE, Data: be32(uint32(len(elems)))}),
		{Type: unix.NFTA_SET_USERDATA, Data: udata},
	})
	if err != nil {
		panic(err)
	}
	list := make([]netlink.Attribute, len(elems))
	for i, el := range elems {
		attrs := []netlink.Attribute{nested(unix.NFTA_SET_ELEM_KEY, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: binary.NativeEndian.AppendUint32(nil, el.key)})}
		if el.chain != "" {
			code := int32(unix.NFT_GOTO)
			if el.verdict == "jump" {
				code = unix.NFT_JUMP
			}
			attrs = append(attrs, nested(unix.NFTA_SET_ELEM_DATA, nested(unix.NFTA_DATA_VERDICT,
				netlink.Attribute{Type: unix.NFTA_VERDICT_CODE, Data: be32(uint32(code))},
				netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: str(el.chain)})))
		} else {
			attrs = append(attrs, nested(unix.NFTA_SET_ELEM_DATA, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: el.data}))
		}
		list[i] = nested(uint16(i+1), attrs...) // numbered from 1, as nft does
	}
	elemsMsg, err := msg(unix.NFT_MSG_NEWSETELEM, flagsAdd, b.f, []netlink.Attribute{
		table,
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: str(name)},
		{Type: unix.NFTA_SET_ELEM_LIST_SET_ID, Data: be32(id)},
		nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, list...),
	})
	if err != nil {
		panic(err)
	}
	b.pre = append(b.pre, set, elemsMsg)
	return name, id
}
