// Package nfacct creates the kernel's extended accounting objects (nfnetlink_acct),
// the named counters that iptables' "-m nfacct --nfacct-name NAME" match adds to. A
// rule naming a counter that does not exist is refused by iptables-restore, so the
// counters are made before the rules, as kube-proxy's iptables proxier does on every
// sync.
package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The nfnetlink message of nfnetlink_acct that creates a counter, and its name
// attribute (linux/netfilter/nfnetlink_acct.h).
const (
	subsysAcct = 7 // NFNL_SUBSYS_ACCT
	msgAcctNew = 0 // NFNL_MSG_ACCT_NEW
	attrName   = 1 // NFACCT_NAME
	// MaxNameLen is NFACCT_NAME_MAX less the terminating NUL.
	MaxNameLen = 31
)

// Ensure makes each named counter in the network namespace of the calling thread;
// a counter that exists already is left as it is, its counts kept.
func Ensure(names ...string) error {
	if len(names) == 0 {
		return nil
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return fmt.Errorf("nfacct: %w", err)
	}
	defer c.Close()
	for _, name := range names {
		if err := ensure(c, name); err != nil {
			return fmt.Errorf("nfacct: counter %q: %w", name, err)
		}
	}
	return nil
}

func ensure(c *netlink.Conn, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("a name of 1 to %d bytes is needed", MaxNameLen)
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(attrName, name) // NUL-terminated, as NLA_NUL_STRING wants
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	// struct nfgenmsg: family AF_UNSPEC, version NFNETLINK_V0, res_id 0 (big endian).
	data := make([]byte, 4, 4+len(attrs))
	binary.BigEndian.PutUint16(data[2:], 0)
	data = append(data, attrs...)
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(subsysAcct<<8 | msgAcctNew),
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create,
		},
		Data: data,
	})
	// Without NLM_F_REPLACE the kernel answers EBUSY for a counter that exists,
	// and resets nothing.
	if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}
