// Command nftload loads nft scripts into the nf_tables of its network namespace the
// way apply does, and prints how long each took: through apply's default kernel
// (NetlinkNFT: one netlink batch when nftables/nlbatch encodes the script, nft -f
// otherwise) or, with -nft, through nft -f alone. scripts/nft-netlink-times.sh uses it.
//
//	ip netns exec NS nftload [-nft] SCRIPT...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/svcgen/svcgen/apply"
)

func main() {
	viaNft := flag.Bool("nft", false, "load through nft -f")
	flag.Parse()
	how := "netlink"
	var k apply.NFTKernel = apply.NetlinkNFT{Loaded: func(nl bool, err error) {
		if !nl {
			how = "nft -f (" + err.Error() + ")"
		}
	}}
	if *viaNft {
		k = apply.ExecNFT{}
	}
	for _, f := range flag.Args() {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "nftload:", err)
			os.Exit(1)
		}
		if *viaNft {
			how = "nft -f"
		} else {
			how = "netlink"
		}
		t0 := time.Now()
		if err := k.Run(context.Background(), data); err != nil {
			fmt.Fprintf(os.Stderr, "nftload: %s: %v\n", f, err)
			os.Exit(1)
		}
		fmt.Printf("%s\t%.1f ms\t%s\n", f, time.Since(t0).Seconds()*1e3, how)
	}
}
