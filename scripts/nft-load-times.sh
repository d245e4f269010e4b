#!/bin/sh
# nft-load-times.sh: how long the kernel takes to load svcgen's nftables output for
# generated clusters, as one transaction and staged (svcgen compile --stages), each
# into a fresh network namespace (as root; nothing touches the root namespace).
#
#   scripts/nft-load-times.sh            # 1000 and 10000 Services, 10 endpoints each
#   scripts/nft-load-times.sh 2000 5000  # other sizes
#
# CPU-heavy and, at 10,000 Services, minutes long: run it by hand, not in a loop.
set -eu
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
work=$(mktemp -d)
ns="svcgen-load-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
go build -o "$work/svcgen" ./cmd/svcgen

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# load NAME COMMAND...: runs COMMAND in a fresh namespace and prints the time.
load() {
  name=$1; shift
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$ns"
  t0=$(now)
  ip netns exec "$ns" "$@"
  t1=$(now)
  rules=$(ip netns exec "$ns" nft list table ip kube-proxy | grep -c .)
  printf '%-28s %8s s   (%d lines listed)\n' "$name" "$(elapsed "$t0" "$t1")" "$rules"
}

echo "nft $(nft --version | awk '{print $2}'), kernel $(uname -r), $(nproc) CPUs"
sizes=${*:-1000 10000}
for size in $sizes; do
    "$work/svcgen" gen --services "$size" --endpoints 10 > "$work/cluster.yaml"
    "$work/svcgen" compile -m nftables -f "$work/cluster.yaml" -o "$work/whole.nft"
    "$work/svcgen" compile -m nftables --stages -f "$work/cluster.yaml" -o "$work/staged.sh"
    echo "$size Services x 10 endpoints: $(grep -c . "$work/whole.nft") operations"
    load "  whole (one transaction)" nft -f "$work/whole.nft"
    load "  staged (5 transactions)" sh "$work/staged.sh"
    # The same stages one by one, to see where the time goes.
    awk -v dir="$work" '/^nft -f - <</ { n++; next } /^SVCGEN_STAGE_/ { next } n { print > (dir "/stage" n ".nft") }' "$work/staged.sh"
    ip netns del "$ns" 2>/dev/null || true
    ip netns add "$ns"
    for i in 1 2 3 4 5; do
      t0=$(now)
      ip netns exec "$ns" nft -f "$work/stage$i.nft"
      t1=$(now)
      printf '    stage %d: %6d operations %8s s\n' "$i" "$(grep -c . "$work/stage$i.nft")" "$(elapsed "$t0" "$t1")"
    done
done
