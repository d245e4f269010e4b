#!/usr/bin/env bash
# Runs svcgen end to end on generated clusters and prints one table: input size,
# compile time (wall and CPU), peak memory, output size, the --previous partial for
# one moved endpoint (its size, CPU and peak memory), and, as root, how long the
# kernel takes to load the result (iptables-restore in a scratch network namespace,
# which is deleted after). Every mode: iptables from YAML and JSON, ipvs, nftables.
#
#   scripts/bench.sh                  # 1,000, 10,000 and 50,000 Services x 10 endpoints
#   scripts/bench.sh 2000 20000       # other sizes (Services; 10 endpoints each)
#   RUNS=5 scripts/bench.sh           # best of 5 (default 3) for the compile figures
#   NFT_LOAD=1 scripts/bench.sh       # also load the nftables table (staged, slow) and
#                                     # time nft -f of its partials
#
# Files go to .cache/bench (git-ignored). Needs GNU time (/usr/bin/time, Debian
# package "time") for peak memory; without it that column is empty.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000 10000 50000)
runs=${RUNS:-3}
dir=.cache/bench
mkdir -p "$dir"
go build -o "$dir/svcgen" ./cmd/svcgen
svcgen="$dir/svcgen"

have_time=false
[ -x /usr/bin/time ] && have_time=true
kernel=false
if [ "$(id -u)" = 0 ] && command -v iptables-restore >/dev/null && command -v ip >/dev/null; then
  kernel=true
fi
ns="svcgen-bench-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT

# measure CMD...: runs the command $runs times; prints "wall cpu maxrss_kb" of the
# run with the least CPU time.
measure() {
  local best="" best_cpu=0
  for _ in $(seq "$runs"); do
    local line
    if $have_time; then
      line=$(/usr/bin/time -f '%e %U %S %M' "$@" 2>&1 >/dev/null | tail -1)
    else
      local t0 t1
      t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
      line="$(calc "$t1 - $t0") 0 0 -"
    fi
    read -r wall user sys rss <<<"$line"
    local cpu
    cpu=$(calc "$user + $sys")
    if [ -z "$best" ] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
      best="$wall $cpu $rss"
      best_cpu=$cpu
    fi
  done
  echo "$best"
}

# kernel_load FILE [NOFLUSH_PARTIAL]: seconds iptables-restore takes in a fresh
# namespace for FILE, and then for the partial (0 without one).
kernel_load() {
  cleanup
  ip netns add "$ns"
  local t0 t1 t2
  t0=$(date +%s.%N)
  ip netns exec "$ns" iptables-restore <"$1"
  t1=$(date +%s.%N)
  if [ -n "${2:-}" ]; then
    ip netns exec "$ns" iptables-restore --noflush <"$2"
  fi
  t2=$(date +%s.%N)
  cleanup
  printf '%.2f %.3f' "$(calc "$t1 - $t0")" "$(calc "$t2 - $t1")"
}

calc() { awk "BEGIN { print $* }"; }

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

# rsscol KB: peak memory in MB ("-" without GNU time).
rsscol() { if [ "$1" = "-" ]; then echo "-"; else echo "$(($1 / 1024)) MB"; fi; }

printf '| Services | input | size | compile wall | compile CPU | peak RSS | rules | partial, kube-proxy shape (--previous) | partial, --previous --minimal | --previous CPU, peak RSS | kernel load, full | kernel load, minimal partial |\n'
printf '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for n in "${sizes[@]}"; do
  for format in yaml json; do
    in="$dir/gen-$n.$format"
    [ -s "$in" ] || "$svcgen" gen --services "$n" --endpoints 10 --format "$format" -o "$in"
    out="$dir/out-$n-$format.rules"
    read -r wall cpu rss <<<"$(measure "$svcgen" compile -f "$in" -o "$out")"
    partial="-"
    kpartial="-"
    prev="-"
    load="-"
    pload="-"
    if [ "$format" = yaml ]; then
      # One endpoint moves: pod address 10.128.1.1 (an endpoint of svc-25) becomes
      # 10.99.0.1.
      moved="$dir/moved-$n.yaml"
      sed 's/^\( *- \)10\.128\.1\.1$/\110.99.0.1/' "$in" >"$moved"
      cmp -s "$in" "$moved" && { echo "bench.sh: no endpoint moved" >&2; exit 1; }
      read -r _ pcpu prss <<<"$(measure "$svcgen" compile -f "$moved" --previous "$out" --minimal -o "$dir/partial-$n.rules")"
      prev="$(printf '%.2f s' "$pcpu"), $(rsscol "$prss")"
      "$svcgen" compile -f "$moved" --previous "$out" -o "$dir/kube-proxy-partial-$n.rules"
      partial="$(wc -c <"$dir/partial-$n.rules") bytes"
      kpartial="$(mb "$(wc -c <"$dir/kube-proxy-partial-$n.rules")")"
      if $kernel; then
        read -r load pload <<<"$(kernel_load "$out" "$dir/partial-$n.rules")"
        load="$load s"
        pload="$pload s"
      fi
    fi
    printf '| %s | %s | %s | %.2f s | %.2f s | %s | %s | %s | %s | %s | %s | %s |\n' \
      "$n" "$format" "$(mb "$(wc -c <"$in")")" "$wall" "$cpu" "$(rsscol "$rss")" "$(mb "$(wc -c <"$out")")" "$kpartial" "$partial" "$prev" "$load" "$pload"
  done
  # The other modes, from the YAML: the compile (ipvs needs a kernel with IPVS), and
  # for nftables the --previous partial of the moved endpoint, kube-proxy's shape and
  # --minimal. NFT_LOAD=1 (root) also loads the table into a scratch namespace with
  # --stages (a whole nft -f of 10k Services takes minutes) and times nft -f of the
  # minimal partial on it, then of kube-proxy's shape (after the minimal partial is
  # undone by the reverse minimal partial).
  for mode in ipvs nftables; do
    out="$dir/out-$n.$mode"
    read -r wall cpu rss <<<"$(measure "$svcgen" compile -m "$mode" -f "$dir/gen-$n.yaml" -o "$out")"
    partial="-"
    kpartial="-"
    prev="-"
    load="-"
    pload="-"
    if [ "$mode" = nftables ]; then
      read -r _ pcpu prss <<<"$(measure "$svcgen" compile -m nftables -f "$dir/moved-$n.yaml" --previous "$out" --minimal -o "$dir/partial-$n.nft")"
      prev="$(printf '%.2f s' "$pcpu"), $(rsscol "$prss")"
      partial="$(wc -c <"$dir/partial-$n.nft") bytes"
      "$svcgen" compile -m nftables -f "$dir/moved-$n.yaml" --previous "$out" -o "$dir/kube-proxy-partial-$n.nft"
      kpartial="$(wc -c <"$dir/kube-proxy-partial-$n.nft") bytes"
      if $kernel && [ "${NFT_LOAD:-}" = 1 ] && command -v nft >/dev/null; then
        "$svcgen" compile -m nftables -f "$dir/gen-$n.yaml" --stages -o "$dir/stages-$n.sh"
        "$svcgen" compile -m nftables -f "$dir/moved-$n.yaml" -o "$dir/moved-$n.nft"
        "$svcgen" compile -m nftables -f "$dir/gen-$n.yaml" --previous "$dir/moved-$n.nft" --minimal -o "$dir/undo-$n.nft"
        cleanup
        ip netns add "$ns"
        t0=$(date +%s.%N)
        ip netns exec "$ns" sh "$dir/stages-$n.sh"
        t1=$(date +%s.%N)
        ip netns exec "$ns" nft -f "$dir/partial-$n.nft"
        t2=$(date +%s.%N)
        ip netns exec "$ns" nft -f "$dir/undo-$n.nft"
        t3=$(date +%s.%N)
        ip netns exec "$ns" nft -f "$dir/kube-proxy-partial-$n.nft"
        t4=$(date +%s.%N)
        cleanup
        load="$(printf '%.2f' "$(calc "$t1 - $t0")") s (staged)"
        pload="$(printf '%.3f' "$(calc "$t2 - $t1")") s (kube-proxy shape: $(printf '%.3f' "$(calc "$t4 - $t3")") s)"
      fi
    fi
    printf '| %s | yaml, -m %s | %s | %.2f s | %.2f s | %s | %s | %s | %s | %s | %s | %s |\n' \
      "$n" "$mode" "$(mb "$(wc -c <"$dir/gen-$n.yaml")")" "$wall" "$cpu" "$(rsscol "$rss")" "$(mb "$(wc -c <"$out")")" "$kpartial" "$partial" "$prev" "$load" "$pload"
  done
done
