#!/usr/bin/env bash
# The main job, end to end on the embedded default: sets up the machine, builds xfer
# (release), starts `xfer serve` on a temporary data directory, pushes a real directory,
# edits one file and pushes again (showing how few bytes moved), pulls into another
# directory, compares the two trees, and stops the server.
# Usage: tools/demo.sh [DIRECTORY]   (default: a copy of the Swift toolchain's lib/swift/linux)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
if [ ! -x .build/release/xfer ]; then
  # Measured on a 2-core machine: 598 s from a clean clone (the dependencies' C and Swift,
  # BoringSSL among them, are most of it); later builds take seconds.
  echo "demo: building xfer (release); a first build takes about 10 minutes on 2 cores" >&2
fi
swift build -c release --product xfer
bin="$(swift build -c release --show-bin-path)/xfer"

work="$(mktemp -d "${TMPDIR:-/tmp}/xfer-demo.XXXXXX")"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

source_dir="$work/source"
if [ -n "${1:-}" ]; then
  cp -a "$1" "$source_dir"
else
  lib="$(dirname "$(dirname "$(command -v swift)")")/lib/swift/linux"
  cp -a "$lib" "$source_dir"
fi
echo "demo: pushing $(du -sh "$source_dir" | cut -f1) in $(find "$source_dir" -type f | wc -l) files"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --data "$work/data" --listen "127.0.0.1:$port" --log-level warning &
server_pid=$!
for _ in $(seq 1 100); do
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/v1/health')" 2>/dev/null && break
  sleep 0.1
done

export XFER_SERVER="http://127.0.0.1:$port"
export XFER_TOKEN="$("$bin" account create demo --data "$work/data")"
export XFER_STATE_DIR="$work/state"

run() { echo "\$ $*" | sed "s#$work#\$WORK#g"; "$@"; }
run "$bin" push "$source_dir" Documents/toolchain.pkg
# Edit one file in the middle: a small insertion into the largest file.
big="$(find "$source_dir" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)"
python3 - "$big" <<'PY'
import sys
p = sys.argv[1]
data = open(p, 'rb').read()
mid = len(data) // 2
open(p, 'wb').write(data[:mid] + b'an edit of a few bytes' + data[mid:])
PY
echo "demo: inserted 22 bytes into the middle of $(basename "$big") ($(du -h "$big" | cut -f1))"
run "$bin" push "$source_dir" Documents/toolchain.pkg
run "$bin" ls
XFER_STATE_DIR="$work/state-other-device" run "$bin" pull Documents/toolchain.pkg "$work/copy"
if diff -r "$source_dir" "$work/copy" >/dev/null; then
  echo "demo: the pulled tree is identical to the pushed one"
else
  echo "demo: the pulled tree differs!" >&2
  exit 1
fi
