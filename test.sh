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
  [ip]=iproute2 [conntrack]=conntrack
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

exec go test -timeout 80m "$@" ./...
