#!/usr/bin/env bash
# xfer side by side with rsync, casync, restic and borg: installs the peers from
# Debian, builds xfer in release, and runs tools/bench/bench-peers.py on data it builds once.
#   tools/bench/bench-peers.sh [--sets file,libs,tree] [--runs 3] [--tools ...] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup.sh
missing=()
for tool in rsync:rsync casync:casync restic:restic borg:borgbackup; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench-peers: installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
. tools/env.sh
swift build -c release --product xfer >/dev/null
exec python3 tools/bench/bench-peers.py "$(swift build -c release --show-bin-path)/xfer" "$@"
