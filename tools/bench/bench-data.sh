# Sourced by tools/bench/perf.sh and tools/bench/bench-e2e.sh: sets $dir, $data (1 GiB of real binary
# data: a tar of the Swift toolchain's lib/) and $big (4 GiB: that file four times, each copy
# with a different first byte), making them once under ${XFER_BENCH_DIR:-bench-data} (in the
# checkout, so on the file system the project lives on; git ignores it).
dir="${XFER_BENCH_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bench-data}"
mkdir -p "$dir"
data="${data:-$dir/real-1g.bin}"
if [ ! -s "$data" ]; then
  lib="$(dirname "$(dirname "$(command -v swift)")")/lib"
  echo "bench: making $data from a tar of $lib" >&2
  tar cf - -C "$(dirname "$lib")" "$(basename "$lib")" 2>/dev/null | head -c 1073741824 > "$data"
fi
big="$dir/real-4g.bin"
if [ ! -s "$big" ]; then
  echo "bench: making $big (4 GiB: the 1 GiB file four times, each copy with a different first byte)" >&2
  for i in 1 2 3 4; do printf "$i"; tail -c +2 "$data"; done > "$big"
fi
