#!/usr/bin/env bash
# End-to-end benchmarks: release build, a real server on loopback, real binary data, against
# ceilings measured in the same run (docs/PERFORMANCE.md, "End to end: serve, push, pull").
#   tools/bench/bench-e2e.sh                   push and pull: speed, wire bytes, memory
#   tools/bench/bench-e2e.sh feed [N]          change-feed latency, N pushes per size (default 15)
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup.sh
. tools/env.sh
. tools/bench/bench-data.sh
swift build -c release --product xfer >/dev/null
xfer="$(swift build -c release --show-bin-path)/xfer"
if [ "${1:-}" = feed ]; then
  exec python3 tools/bench/bench-feed.py "$xfer" "$data" "$dir/feed" "${2:-15}"
fi
exec python3 tools/bench/bench-e2e.py "$xfer" "$data" "$big" "$dir/e2e"
