#!/bin/sh
# nft-netlink-times.sh: where the time of an nftables partial sync goes at 10,000
# Services x 10 endpoints (as root; only scratch network namespaces are touched).
# For each kube-proxy layout (v1.35, v1.37) it loads the generated table (staged,
# about a minute), then, ROUNDS times by turns, loads the one-endpoint partial and
# its undo with nft -f and as one netlink batch (tools/nftload), and the commit mark
# alone as a batch (the kernel's cost of any transaction); then one nft -f under
# strace, whose batch sendmsg is the kernel's part (the rest is nft reading the table
# into its cache); then perf, if installed, on netlink loads (the kernel's part).
#
#   ROUNDS=5 scripts/nft-netlink-times.sh
set -eu
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
rounds=${ROUNDS:-3}
work=$(mktemp -d)
ns="svcgen-nltimes-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
go build -o "$work/svcgen" ./cmd/svcgen
go build -o "$work/nftload" ./tools/nftload
cd "$work"
./svcgen gen --services 10000 --endpoints 10 -o gen.yaml
sed 's/^\( *- \)10\.128\.1\.1$/\110.99.0.1/' gen.yaml >moved.yaml
printf 'add chain ip kube-proxy svcgen-commit\ndelete chain ip kube-proxy svcgen-commit\n' >mark.nft
echo "nft $(nft --version | awk '{print $2}'), kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for v in 1.35 1.37; do
  ./svcgen compile -q -m nftables --kube-proxy-version $v -f gen.yaml -o full.nft
  ./svcgen compile -q -m nftables --kube-proxy-version $v -f gen.yaml --stages -o staged.sh
  ./svcgen compile -q -m nftables --kube-proxy-version $v -f moved.yaml -o moved.nft
  ./svcgen compile -q -m nftables --kube-proxy-version $v -f moved.yaml --previous full.nft --minimal -o partial.nft
  ./svcgen compile -q -m nftables --kube-proxy-version $v -f gen.yaml --previous moved.nft --minimal -o undo.nft
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$ns"
  ip netns exec "$ns" sh staged.sh
  echo "v$v: partial $(grep -vc '^#' partial.nft) lines"
  for _ in $(seq "$rounds"); do
    ip netns exec "$ns" ./nftload -nft partial.nft undo.nft
    ip netns exec "$ns" ./nftload partial.nft undo.nft mark.nft
  done
  ip netns exec "$ns" strace -f -T -e trace=sendmsg -o strace.txt nft -f partial.nft
  echo "nft -f under strace: batch sendmsg $(grep -o '<[0-9.]*>' strace.txt | tail -1)"
  ip netns exec "$ns" nft -f undo.nft
  if command -v perf >/dev/null; then
    perf record -q -g -o perf.data -- ip netns exec "$ns" ./nftload partial.nft undo.nft partial.nft undo.nft >/dev/null 2>&1
    perf report -i perf.data --no-children --percent-limit 4 --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' || true
  fi
done
