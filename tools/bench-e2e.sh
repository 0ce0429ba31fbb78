#!/usr/bin/env bash
# End-to-end benchmark: release build, a real server on loopback, push and pull of real
# binary data, against ceilings measured in the same run (docs/PERFORMANCE.md).
#   tools/bench-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
. tools/bench-data.sh
swift build -c release --product xfer >/dev/null
xfer="$(swift build -c release --show-bin-path)/xfer"
exec python3 tools/bench-e2e.py "$xfer" "$data" "$big" "$dir/e2e"
