#!/usr/bin/env bash
# End-to-end benchmark: release build, a real server on loopback, push and pull of real
# binary data, against ceilings measured in the same run (docs/PERFORMANCE.md).
#   tools/bench-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
dir="${XFER_BENCH_DIR:-/tmp/xfer-bench}"
mkdir -p "$dir"
data="$dir/real-1g.bin"
if [ ! -s "$data" ]; then
  lib="$(dirname "$(dirname "$(command -v swift)")")/lib"
  tar cf - -C "$(dirname "$lib")" "$(basename "$lib")" 2>/dev/null | head -c 1073741824 > "$data"
fi
big="$dir/real-4g.bin"
if [ ! -s "$big" ]; then
  for i in 1 2 3 4; do printf "$i"; tail -c +2 "$data"; done > "$big"
fi
swift build -c release --product xfer >/dev/null
xfer="$(swift build -c release --show-bin-path)/xfer"
exec python3 tools/bench-e2e.py "$xfer" "$data" "$big" "$dir/e2e"
