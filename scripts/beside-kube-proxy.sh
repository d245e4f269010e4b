#!/usr/bin/env bash
# svcgen beside kube-proxy: for each size and mode, the newest release's real proxier
# (the oracle program of conformance/: upstream's NewProxier, fed as its informers
# would feed it) and `svcgen apply --watch`, each in a fresh, empty network namespace
# of its own, alternating which goes first, ROUNDS times; each side is one long-running
# process that goes through the same four steps:
#
#   cold start       empty node to programmed: from the process's launch to the end
#                    of its first sync (kube-proxy: its first full sync and, iptables,
#                    its canary chains; svcgen: the watch's "start" sync)
#   endpoint moved   one endpoint of one Service changes address (10.128.1.1 becomes
#                    10.99.0.1): kube-proxy gets one EndpointSlice update and runs one
#                    sync (partial); svcgen's input file of that namespace is replaced
#   Service added    one Service with its endpoints is added (gen --services N+1)
#   nothing changed  the periodic resync: kube-proxy's sync loop's run when nothing
#                    changed (v1.37: hourly; a full sync in nftables mode, a partial
#                    one in iptables' large-cluster mode: see conformance/oracle/
#                    steps.go), svcgen's --watch interval (the median of three)
#
# The step times are each side's own measure of that one sync: the oracle's wall time
# of syncProxyRules, svcgen's logged "took" (compile, read, plan, load). Peak memory
# is /usr/bin/time's of the whole process (its largest child included). It prints one
# table: per size, mode and step, the runs and medians of each side and the ratio of
# the medians (svcgen / kube-proxy), and for context one-shot `svcgen apply` of the
# same steps (ONESHOT=1: a process per step, each reading the kernel's rules first).
#
# Both sides read the same clusters: kube-proxy the cluster `svcgen resolve` prints
# (svcgen's control plane applied to the generated manifests), svcgen the manifests,
# split one file per namespace (and one for the cluster-scoped objects), so a change
# rewrites the file of the namespace it is in, as one object changes for kube-proxy.
#
# Needs root (network namespaces), iptables and nft, and the module proxy (or a warm
# module cache) to build the oracle. Nothing is sent: rules are only loaded. A process
# that runs more than LIMIT seconds (default 900) is stopped: a kube-proxy cold start
# that does not end within LIMIT shows as ">LIMIT" and its steps as not measured.
#
#   SIZES="1000 10000" MODES="iptables nftables" ROUNDS=3 LIMIT=900 ONESHOT=1 LOGS=DIR scripts/beside-kube-proxy.sh
#
# (LOGS keeps each run's oracle output and svcgen log; INTERVAL is the watch's
# --interval, 2s by default; RELEASE the oracle module, the newest by default.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

sizes=${SIZES:-"1000 10000"}
modes=${MODES:-"iptables nftables"}
rounds=${ROUNDS:-3}
limit=${LIMIT:-900}
oneshot=${ONESHOT:-1}
interval=${INTERVAL:-2s}
release=${RELEASE:-$(ls -d conformance/v1.* | sort -V | tail -1 | xargs basename)}
work=$(mktemp -d /var/tmp/svcgen-beside.XXXXXX)
prefix="svcgen-beside-$$"
steps="cold moved added resync"

watcher="" # the pid of a running svcgen --watch's timeout, for cleanup
cleanup() {
  if [ -n "$watcher" ]; then kill $(pgrep -P "$watcher") "$watcher" 2>/dev/null || true; fi
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do ip netns del "$ns"; done
  rm -rf "$work"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "beside-kube-proxy.sh: needs root for network namespaces" >&2; exit 2; }
die() {
  echo "beside-kube-proxy.sh: $*" >&2
  if [ -f "$work/sg.log" ]; then keep "$work/sg.log" "failed-sg-$(date +%H%M%S).log"; fi
  exit 1
}

go build -o "$work/svcgen" ./cmd/svcgen
(cd "conformance/$release" && go build -o "$work/kube-proxy" .)
echo "kube-proxy $("$work/kube-proxy" version) beside svcgen ($(git rev-parse --short HEAD)), $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"

newns() { ip netns add "$prefix-$1" && ip netns exec "$prefix-$1" ip link set lo up; }
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a - b}'; }
# seconds DURATION: a Go duration as slog prints it ("1m2.5s", "850.1ms", "95µs") in seconds.
seconds() {
  awk -v d="$1" 'BEGIN {
    s = 0
    while (match(d, /^[0-9.]+(h|ms|µs|us|ns|m|s)/)) {
      t = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
      match(t, /[a-zµ]+$/); u = substr(t, RSTART); v = substr(t, 1, RSTART - 1) + 0
      s += v * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : u == "ms" ? 1e-3 : u == "ns" ? 1e-9 : 1e-6)
    }
    printf "%.6f", s
  }'
}
# keep FILE NAME: a copy of a run's output in LOGS, when set.
keep() { if [ -n "${LOGS:-}" ]; then mkdir -p "$LOGS" && cp "$1" "$LOGS/$2"; fi; }
# record SIDE STEP VALUE: one run's figure, in $work/res.
record() { echo "$3" >> "$work/res/$1.$2"; }

# split FILE DIR: one file per namespace (cluster-scoped objects in cluster.yaml).
split_ns() {
  mkdir -p "$2"
  awk -v dir="$2" '
    function flush() { if (doc != "") { f = dir "/" (ns == "" ? "cluster" : ns) ".yaml"; printf "---\n%s", doc >> f; close(f) } doc = ""; ns = "" }
    /^---$/ { flush(); next }
    /^#/ && doc == "" { next }
    /^  namespace: / && ns == "" { ns = $2 }
    { doc = doc $0 "\n" }
    END { flush() }' "$1"
}

# clusters N: the three clusters of size N: gen, one endpoint moved, one Service
# added; resolved for kube-proxy, split for svcgen.
clusters() {
  local n=$1 d="$work/c$1"
  mkdir -p "$d"
  "$work/svcgen" gen --services "$n" --endpoints 10 -o "$d/0.yaml"
  sed 's/^\( *- \)10\.128\.1\.1$/\110.99.0.1/' "$d/0.yaml" > "$d/1.yaml"
  "$work/svcgen" gen --services "$((n + 1))" --endpoints 10 | sed 's/^\( *- \)10\.128\.1\.1$/\110.99.0.1/' > "$d/2.yaml"
  cmp -s "$d/0.yaml" "$d/1.yaml" && die "no endpoint moved at $n"
  for i in 0 1 2; do
    "$work/svcgen" resolve -f "$d/$i.yaml" > "$d/r$i.yaml"
    split_ns "$d/$i.yaml" "$d/s$i"
  done
}

# kube_proxy N MODE: one run of the oracle: first sync, then the three steps.
kube_proxy() {
  local n=$1 mode=$2 d="$work/c$1" side="$1-$2-kp"
  newns kp
  local t0 status=0
  t0=$(now)
  /usr/bin/time -f '%e %M' -o "$work/kp.time" ip netns exec "$prefix-kp" timeout "$limit" \
    "$work/kube-proxy" run -cluster "$d/r0.yaml" -config "$work/config-$mode.yaml" -node node-0 \
    -step "$d/r1.yaml" -step "$d/r2.yaml" -step resync > "$work/kp.out" 2> "$work/kp.log" || status=$?
  ip netns del "$prefix-kp"
  keep "$work/kp.out" "kp-$n-$mode-$(date +%H%M%S).out"
  case $status in
  0) ;;
  124)
    for s in $steps; do record "$side" "$s" ">$limit"; done
    record "$side" mem 0
    return
    ;;
  *) tail -5 "$work/kp.log" >&2; die "kube-proxy $n $mode failed" ;;
  esac
  record "$side" cold "$(sub "$(awk '$1 == "programmed" {print $2}' "$work/kp.out")" "$t0")"
  local i=0 s
  for s in moved added resync; do
    i=$((i + 1))
    record "$side" "$s" "$(awk -v i="$i" '$1 == "step" && ++k == i {print $7}' "$work/kp.out")"
  done
  record "$side" mem "$(awk '{print $2}' "$work/kp.time")"
}

# waitlog LOG PATTERN COUNT: wait until LOG has COUNT lines matching PATTERN.
waitlog() {
  local deadline=$((SECONDS + limit))
  while [ "$(grep -c -- "$2" "$1" || true)" -lt "$3" ]; do
    grep -q "sync failed" "$1" && { tail -3 "$1" >&2; die "svcgen's sync failed"; }
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

# replace FROM DIR: put each file of FROM that differs from DIR's into DIR, by rename.
replace() {
  local f changed=0
  for f in "$1"/*.yaml; do
    cmp -s "$f" "$2/${f##*/}" && continue
    cp "$f" "$work/next.yaml" && mv "$work/next.yaml" "$2/${f##*/}"
    changed=$((changed + 1))
  done
  [ "$changed" = 1 ] || die "expected one input file to change, $changed did"
}

# took LOG PATTERN K: the "took" of LOG's K-th line matching PATTERN, in seconds.
took() { seconds "$(grep -- "$2" "$1" | sed -n "$3p" | sed 's/.* took=\([^ ]*\) .*/\1/')"; }

# svcgen_watch N MODE: one run of svcgen apply --watch through the same steps.
svcgen_watch() {
  local n=$1 mode=$2 d="$work/c$1" side="$1-$2-sg" log="$work/sg.log"
  rm -rf "$work/in" && cp -r "$d/s0" "$work/in"
  newns sg
  local t0 tpid pid
  t0=$(now)
  /usr/bin/time -f '%e %M' -o "$work/sg.time" ip netns exec "$prefix-sg" timeout "$limit" \
    "$work/svcgen" apply -q -m "$mode" -f "$work/in" --watch --interval "$interval" --settle 100ms \
    --listen "" --apply-lock "$work/apply.lock" 2> "$log" &
  tpid=$!
  sleep 0.2
  watcher=$(pgrep -P "$tpid" || true)
  if ! waitlog "$log" "reason=start" 1; then
    kill "$(pgrep -P "$tpid")"; wait "$tpid" || true; ip netns del "$prefix-sg"
    for s in $steps; do record "$side" "$s" ">$limit"; done
    record "$side" mem 0
    return
  fi
  local at
  at=$(grep -m1 "reason=start" "$log" | sed 's/^time=\([^ ]*\) .*/\1/')
  record "$side" cold "$(sub "$(date -d "$at" +%s.%N)" "$t0")"
  # Each change is loaded by the next sync that finds the file settled: mostly the
  # change's own (reason=change), sometimes an interval's that comes first.
  replace "$d/s1" "$work/in" && waitlog "$log" "changed=true" 2 || die "svcgen: no sync for the moved endpoint"
  replace "$d/s2" "$work/in" && waitlog "$log" "changed=true" 3 || die "svcgen: no sync for the added Service"
  record "$side" moved "$(took "$log" "changed=true" 2)"
  record "$side" added "$(took "$log" "changed=true" 3)"
  # Three intervals after the last change: the watch's resync with nothing changed.
  local before
  before=$(grep -c "reason=interval.*changed=false" "$log" || true)
  waitlog "$log" "reason=interval.*changed=false" "$((before + 3))" || die "svcgen: no interval syncs"
  record "$side" resync "$(for k in 1 2 3; do took "$log" "reason=interval.*changed=false" "$((before + k))"; echo; done | median)"
  pid=$(pgrep -P "$tpid")
  kill "$pid"
  wait "$tpid" || true
  watcher=""
  keep "$log" "sg-$n-$mode-$(date +%H%M%S).log"
  ip netns del "$prefix-sg"
  record "$side" mem "$(awk '{print $2}' "$work/sg.time")"
}

# svcgen_oneshot N MODE: one-shot svcgen apply of each step, a process each (context).
svcgen_oneshot() {
  local n=$1 mode=$2 d="$work/c$1" side="$1-$2-os" s dir mem=0
  newns os
  for s in cold:s0 moved:s1 added:s2 resync:s2; do
    dir=$d/${s#*:}
    /usr/bin/time -f '%e %M' -o "$work/os.time" ip netns exec "$prefix-os" timeout "$limit" \
      "$work/svcgen" apply -q -m "$mode" -f "$dir" --apply-lock "$work/apply.lock" 2> "$work/os.log" ||
      { tail -3 "$work/os.log" >&2; die "svcgen apply $n $mode ${s%%:*} failed or took over $limit s"; }
    record "$side" "${s%%:*}" "$(awk '{print $1}' "$work/os.time")"
    mem=$(awk -v m="$mem" '{print ($2 > m ? $2 : m)}' "$work/os.time")
  done
  ip netns del "$prefix-os"
  record "$side" mem "$mem"
}

# median: of the numbers on stdin; a run stopped at LIMIT (">LIMIT") wins.
median() {
  sort -g | awk '/^>/ {over = $0} {a[NR] = $1} END {
    if (over != "") print over; else print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
runs() { paste -sd, "$1"; }
ratio() {
  case "$1$2" in *'>'*) echo "-" ;; *) awk -v a="$1" -v b="$2" 'BEGIN {printf (b > 0 ? "%.3f" : "-"), a / b}' ;; esac
}

mkdir -p "$work/res"
for mode in $modes; do
  printf 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: node-0\nclusterCIDR: 10.128.0.0/9\nmode: %s\n' "$mode" > "$work/config-$mode.yaml"
done
for n in $sizes; do
  clusters "$n"
  for mode in $modes; do
    for r in $(seq "$rounds"); do
      echo "$(date -u +%H:%M:%S) $n $mode round $r (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
      if [ $((r % 2)) = 1 ]; then
        kube_proxy "$n" "$mode"; svcgen_watch "$n" "$mode"
      else
        svcgen_watch "$n" "$mode"; kube_proxy "$n" "$mode"
      fi
      if [ "$oneshot" = 1 ]; then svcgen_oneshot "$n" "$mode"; fi
    done
  done
done

echo
echo "| Services | mode | step | kube-proxy runs (s) | kube-proxy median | svcgen --watch runs (s) | svcgen median | ratio svcgen / kube-proxy | one-shot svcgen apply median |"
echo "|---:|---|---|---|---:|---|---:|---:|---:|"
for n in $sizes; do
  for mode in $modes; do
    for s in $steps mem; do
      kp=$(median < "$work/res/$n-$mode-kp.$s"); sg=$(median < "$work/res/$n-$mode-sg.$s")
      os=-; [ -f "$work/res/$n-$mode-os.$s" ] && os=$(median < "$work/res/$n-$mode-os.$s")
      kr=$(runs "$work/res/$n-$mode-kp.$s"); sr=$(runs "$work/res/$n-$mode-sg.$s")
      name=$s
      case $s in
      cold) name="cold start" ;; moved) name="endpoint moved" ;; added) name="Service added" ;; resync) name="nothing changed" ;;
      mem)
        name="peak memory (MB)"
        mb() { awk '{printf "%s%s", (NR > 1 ? "," : ""), ($1 ~ /^>/ ? "-" : int($1 / 1024))}'; }
        kr=$(mb < "$work/res/$n-$mode-kp.$s"); sr=$(mb < "$work/res/$n-$mode-sg.$s")
        kp=$((kp / 1024)); sg=$((sg / 1024)); [ "$os" != - ] && os=$((os / 1024))
        [ "$kp" = 0 ] && kp='-'
        ;;
      esac
      echo "| $n | $mode | $name | $kr | $kp | $sr | $sg | $(ratio "$sg" "$kp") | $os |"
    done
  done
done
