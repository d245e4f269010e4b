#!/usr/bin/env bash
# Cold start beside kube-proxy: for each size and mode, the newest release's real
# proxier (the oracle program of conformance/, upstream's NewProxier fed the cluster
# as its informers would, until its first full sync is done) and `svcgen apply`, each
# into a fresh, empty network namespace of its own, alternating, ROUNDS times. Prints
# the wall time and peak memory of each run and, per size and mode, the ratio of the
# medians (svcgen / kube-proxy).
#
# Needs root (network namespaces), iptables and nft. Nothing is sent: rules are only
# loaded. Both sides read the same cluster: kube-proxy the cluster `svcgen resolve`
# prints (what svcgen's control plane made of the generated manifests), svcgen the
# manifests themselves (its own compile is part of its time, as kube-proxy's
# decoding is part of its).
#
# A run that takes more than LIMIT seconds (default 900) is stopped and shows as
# LIMIT with its peak memory unknown (0): kube-proxy's iptables cold start at 10,000
# Services was still in its one --noflush restore after 1,200 s on these machines.
#
#   SIZES="1000 10000" MODES="iptables nftables" ROUNDS=3 RELEASE=v1.37 LIMIT=900 scripts/beside-kube-proxy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

sizes=${SIZES:-"1000 10000"}
modes=${MODES:-"iptables nftables"}
rounds=${ROUNDS:-3}
limit=${LIMIT:-900}
release=${RELEASE:-$(ls -d conformance/v1.* | sort -V | tail -1 | xargs basename)}
work=$(mktemp -d /var/tmp/svcgen-beside.XXXXXX)
prefix="svcgen-beside-$$"

cleanup() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do ip netns del "$ns"; done
  rm -rf "$work"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "beside-kube-proxy.sh: needs root for network namespaces" >&2; exit 2; }

go build -o "$work/svcgen" ./cmd/svcgen
(cd "conformance/$release" && go build -o "$work/kube-proxy" .)
echo "kube-proxy $("$work/kube-proxy" version) beside svcgen ($(git rev-parse --short HEAD)), $(nproc) CPUs, $(uname -r)"

# run NAME NS CMD...: one run in a fresh namespace; prints "seconds peak-KB".
run() {
  local ns="$prefix-$2"
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  local status=0
  timeout "$limit" /usr/bin/time -f '%e %M' ip netns exec "$ns" "${@:3}" >/dev/null 2>"$work/$1.log" || status=$?
  ip netns del "$ns"
  case $status in
  0) tail -1 "$work/$1.log" ;; # /usr/bin/time's line comes last on stderr
  124) echo "$limit 0" ;;
  *)
    echo "beside-kube-proxy.sh: $1 failed:" >&2
    tail -5 "$work/$1.log" >&2
    exit 1
    ;;
  esac
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '\n%-8s %-9s %-11s %12s %12s %10s %10s %8s\n' size mode side "wall s" "median s" "peak MB" "median MB" ratio
for n in $sizes; do
  "$work/svcgen" gen --services "$n" --endpoints 10 -o "$work/cluster-$n.yaml"
  "$work/svcgen" resolve -f "$work/cluster-$n.yaml" > "$work/resolved-$n.yaml"
  for mode in $modes; do
    printf 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: node-0\nclusterCIDR: 10.128.0.0/9\nmode: %s\n' "$mode" > "$work/config-$mode.yaml"
    : > "$work/kp.t"; : > "$work/kp.m"; : > "$work/sg.t"; : > "$work/sg.m"
    for r in $(seq "$rounds"); do
      read -r t m < <(run "kp-$n-$mode-$r" kp "$work/kube-proxy" run -cluster "$work/resolved-$n.yaml" -config "$work/config-$mode.yaml" -node node-0)
      echo "$t" >> "$work/kp.t"; echo "$m" >> "$work/kp.m"
      read -r t m < <(run "sg-$n-$mode-$r" sg "$work/svcgen" apply -q -m "$mode" -f "$work/cluster-$n.yaml" --apply-lock "$work/apply.lock")
      echo "$t" >> "$work/sg.t"; echo "$m" >> "$work/sg.m"
    done
    kt=$(median < "$work/kp.t"); st=$(median < "$work/sg.t")
    km=$(median < "$work/kp.m"); sm=$(median < "$work/sg.m")
    printf '%-8s %-9s %-11s %12s %12s %10s %10s %8s\n' "$n" "$mode" kube-proxy "$(paste -sd, "$work/kp.t")" "$kt" "$(awk '{printf "%s%d", (NR>1 ? "," : ""), $1/1024}' "$work/kp.m")" "$((km / 1024))" ""
    printf '%-8s %-9s %-11s %12s %12s %10s %10s %8s\n' "$n" "$mode" svcgen "$(paste -sd, "$work/sg.t")" "$st" "$(awk '{printf "%s%d", (NR>1 ? "," : ""), $1/1024}' "$work/sg.m")" "$((sm / 1024))" "$(awk -v a="$st" -v b="$kt" 'BEGIN {printf "%.2f", a/b}')"
  done
done
