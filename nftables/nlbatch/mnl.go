package nlbatch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// What nft sends, read back from "nft --debug=mnl" (libmnl's dump of each message it
// sends), so that tests can hold Encode's messages to nft's.

// Sent is one message nft sent: its type (subsystem << 8 | message) and its payload
// after the netlink header (the nfgenmsg and the attributes).
type Sent struct {
	Type uint16
	Data []byte
}

var (
	mnlType = regexp.MustCompile(`^\| (\d{5}) \| [A-Z-]{4} \|\t\|  type \| flags  \|$`)
	mnlAttr = regexp.MustCompile(`^\|(\d{5})\|([N-])([B-])\|(\d{5})\|\t\|len \|flags\| type\|$`)
	mnlData = regexp.MustCompile(`^\| ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2})  \|\t\|\s+(?:data|extra header)\s+\|`)
)

// ParseMNL reads the messages of nft --debug=mnl output (its escape sequences for
// colour removed), in the order nft sent them.
func ParseMNL(out []byte) ([]Sent, error) {
	out = regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAll(out, nil)
	var msgs []Sent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := mnlType.FindStringSubmatch(l); m != nil {
			t, _ := strconv.Atoi(m[1])
			msgs = append(msgs, Sent{Type: uint16(t)})
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		cur := &msgs[len(msgs)-1]
		if m := mnlAttr.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			t, _ := strconv.Atoi(m[4])
			if m[2] == "N" {
				t |= unix.NLA_F_NESTED
			}
			if m[3] == "B" {
				t |= unix.NLA_F_NET_BYTEORDER
			}
			cur.Data = binary.LittleEndian.AppendUint16(cur.Data, uint16(n))
			cur.Data = binary.LittleEndian.AppendUint16(cur.Data, uint16(t))
		} else if m := mnlData.FindStringSubmatch(l); m != nil {
			b, err := hex.DecodeString(m[1] + m[2] + m[3] + m[4])
			if err != nil {
				return nil, err
			}
			cur.Data = append(cur.Data, b...)
		}
	}
	return msgs, sc.Err()
}

// Batch is the messages between a batch's begin and end (exclusive) of nft's dump.
func Batch(sent []Sent) []Sent {
	for i, s := range sent {
		if s.Type == unix.NFNL_MSG_BATCH_BEGIN {
			sent = sent[i+1:]
			for j, s := range sent {
				if s.Type == unix.NFNL_MSG_BATCH_END {
					return sent[:j]
				}
			}
			return sent
		}
	}
	return nil
}

// Tree writes a message's payload as a tree of attributes, one a line, the
// attributes of each level in order of type (the kernel reads them by type; nft and
// google/nftables order some differently), nested ones opened. What it cannot read as
// attributes it writes as bytes.
func Tree(t uint16, data []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "message %d/%d", t>>8, t&0xff)
	if len(data) >= 4 {
		fmt.Fprintf(&b, " family %d", data[0])
		tree(&b, data[4:], 1)
	}
	return b.String()
}

func tree(b *strings.Builder, data []byte, depth int) {
	attrs, err := netlink.UnmarshalAttributes(data)
	if err != nil {
		fmt.Fprintf(b, "\n%s%x", strings.Repeat("  ", depth), data)
		return
	}
	slices.SortStableFunc(attrs, func(x, y netlink.Attribute) int { return int(x.Type&^0xc000) - int(y.Type&^0xc000) })
	for _, a := range attrs {
		fmt.Fprintf(b, "\n%s%d", strings.Repeat("  ", depth), a.Type&^0xc000)
		if a.Type&unix.NLA_F_NESTED != 0 {
			tree(b, a.Data, depth+1)
		} else {
			fmt.Fprintf(b, " %x", a.Data)
		}
	}
}

// WithoutCacheIDs is a message's payload without the set ids nft adds when it names a
// set that is in the kernel already (in an element message, a lookup or a dynset
// expression): nft numbers the sets of its cache and sends the number beside the
// name, but the kernel looks a set up by name and reads the id only for a set added
// in the same batch (nft_set_lookup_global), so Encode, which has no cache, leaves it
// out. Ids of anonymous sets ("__set%d", "__map%d", added in the batch) stay.
func WithoutCacheIDs(t uint16, data []byte) []byte { return withoutCacheIDs(t, data, nil) }

// Comparable is the messages of a batch as Trees, without nft's cache ids (see
// WithoutCacheIDs), the ids of the sets the batch adds renumbered 1, 2, ... in the
// order they are first named: nft numbers the named sets it adds and the anonymous
// ones from two counters; what matters is that each message names the same set.
func Comparable(msgs []Sent) []string {
	ids := map[uint32]uint32{}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = Tree(m.Type, withoutCacheIDs(m.Type, m.Data, ids))
	}
	return out
}

// renumber gives a batch's set id its number in order of first appearance.
func renumber(ids map[uint32]uint32, a *netlink.Attribute) {
	if ids == nil || len(a.Data) != 4 {
		return
	}
	v := binary.BigEndian.Uint32(a.Data)
	n, ok := ids[v]
	if !ok {
		n = uint32(len(ids) + 1)
		ids[v] = n
	}
	a.Data = binary.BigEndian.AppendUint32(nil, n)
}

func withoutCacheIDs(t uint16, data []byte, ids map[uint32]uint32) []byte {
	if len(data) < 4 {
		return data
	}
	attrs, err := netlink.UnmarshalAttributes(data[4:])
	if err != nil {
		return data
	}
	switch t & 0xff {
	case unix.NFT_MSG_NEWSET:
		for i := range attrs {
			if attrs[i].Type&^0xc000 == unix.NFTA_SET_ID {
				renumber(ids, &attrs[i])
			}
		}
	case unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_DELSETELEM:
		attrs = dropNamedID(attrs, unix.NFTA_SET_ELEM_LIST_SET, unix.NFTA_SET_ELEM_LIST_SET_ID, ids)
	case unix.NFT_MSG_NEWRULE:
		for i, a := range attrs {
			if a.Type&^0xc000 == unix.NFTA_RULE_EXPRESSIONS {
				attrs[i].Data, attrs[i].Length = rewrite(a.Data, func(e []netlink.Attribute) []netlink.Attribute { return exprWithoutCacheID(e, ids) }), 0
			}
		}
	}
	out, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return data
	}
	return append(data[:4:4], out...)
}

// exprWithoutCacheID drops a named set's id from a lookup or dynset expression.
func exprWithoutCacheID(expr []netlink.Attribute, ids map[uint32]uint32) []netlink.Attribute {
	var name string
	for _, a := range expr {
		if a.Type&^0xc000 == unix.NFTA_EXPR_NAME {
			name = strings.TrimRight(string(a.Data), "\x00")
		}
	}
	for i, a := range expr {
		if a.Type&^0xc000 != unix.NFTA_EXPR_DATA {
			continue
		}
		kinds := map[string][2]uint16{"lookup": {unix.NFTA_LOOKUP_SET, unix.NFTA_LOOKUP_SET_ID}, "dynset": {unix.NFTA_DYNSET_SET_NAME, unix.NFTA_DYNSET_SET_ID}}
		if id, ok := kinds[name]; ok {
			data, err := netlink.UnmarshalAttributes(a.Data)
			if err != nil {
				continue
			}
			if b, err := netlink.MarshalAttributes(dropNamedID(data, id[0], id[1], ids)); err == nil {
				expr[i].Data, expr[i].Length = b, 0
			}
		}
	}
	return expr
}

// rewrite applies fn to each nested attribute list of a list of them.
func rewrite(data []byte, fn func([]netlink.Attribute) []netlink.Attribute) []byte {
	list, err := netlink.UnmarshalAttributes(data)
	if err != nil {
		return data
	}
	for i, a := range list {
		inner, err := netlink.UnmarshalAttributes(a.Data)
		if err != nil {
			continue
		}
		if b, err := netlink.MarshalAttributes(fn(inner)); err == nil {
			list[i].Data, list[i].Length = b, 0
		}
	}
	b, err := netlink.MarshalAttributes(list)
	if err != nil {
		return data
	}
	return b
}

// dropNamedID drops the id attribute when it is 0 or the name attribute names a set
// that is not anonymous, and renumbers it otherwise. (An id of a named set the batch
// adds is dropped too: nft sends the id of a set it adds, Encode does as well, but
// which the kernel reads by name.)
func dropNamedID(attrs []netlink.Attribute, nameType, idType uint16, ids map[uint32]uint32) []netlink.Attribute {
	for i, a := range attrs {
		if a.Type&^0xc000 == nameType && strings.HasPrefix(string(a.Data), "__") {
			for j := range attrs {
				if attrs[j].Type&^0xc000 == idType {
					renumber(ids, &attrs[j])
				}
			}
			return attrs
		}
		_ = i
	}
	return slices.DeleteFunc(attrs, func(a netlink.Attribute) bool { return a.Type&^0xc000 == idType })
}
