#!/usr/bin/env bash
# Runs every svcgen test. The real-kernel tests need root and the Debian packages
# below; when one is missing and we are root, it is installed first.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

# command -> Debian package
declare -A need=(
  [iptables]=iptables [nft]=nftables [ipset]=ipset [ipvsadm]=ipvsadm
  [ip]=iproute2 [conntrack]=conntrack [dot]=graphviz [nfacct]=nfacct
  [qemu-system-x86_64]=qemu-system-x86 [busybox]=busybox-static [depmod]=kmod [dash]=dash
  [sysctl]=procps [ip6tables]=iptables
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "test.sh: not root, so the real-kernel tests will skip (missing: ${missing[*]})" >&2
  fi
fi
export PATH="$PATH:/usr/sbin:/sbin"

# e2e/ipvsvm downloads Debian's cloud kernel with apt-get download: the package lists
# must know it (a fresh machine may have none yet).
if ! apt-cache depends linux-image-cloud-amd64 2>/dev/null | grep -q 'Depends: linux-image-[0-9]'; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
  else
    echo "test.sh: not root, and apt does not know linux-image-cloud-amd64: the qemu IPVS test will skip" >&2
  fi
fi

# Everything but the kube-proxy oracle, then the oracle (conformance/: each release's
# own proxier against svcgen, in network namespaces; it builds one program per
# release, a few minutes each when the build cache is cold). SVCGEN_ORACLE_* variables
# (see conformance/oracle_test.go) choose releases, modes and how many random clusters.
status=0
go test -timeout 80m "$@" $(go list ./... | grep -v '/conformance$') || status=$?
report=$(mktemp)
SVCGEN_ORACLE_REPORT=$report go test -timeout 80m "$@" ./conformance || status=$?
cat "$report"
rm -f "$report"
exit $status
