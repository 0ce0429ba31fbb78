#!/usr/bin/env bash
# Sets up the machine, builds xfer (release) and runs its main job on real data:
# chunking, hashing and compressing a real file, with the summary.
# Usage: tools/demo.sh [PATH]   (default: a tar of the Swift toolchain's libraries)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
swift build -c release --product xfer
target="${1:-}"
if [ -z "$target" ]; then
  target="${TMPDIR:-/tmp}/xfer-demo.tar"
  if [ ! -s "$target" ]; then
    lib="$(dirname "$(dirname "$(command -v swift)")")/lib"
    echo "demo: making $target from $lib" >&2
    tar cf "$target" -C "$(dirname "$lib")" "$(basename "$lib")/swift" 2>/dev/null || true
  fi
fi
bin="$(swift build -c release --show-bin-path)/xfer"
echo "\$ xfer chunk --summary $target"
"$bin" chunk --summary "$target"
echo "\$ xfer chunk --summary --compress $target"
"$bin" chunk --summary --compress "$target"
