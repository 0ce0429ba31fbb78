#!/usr/bin/env bash
# Measures the chunking core against this machine's own ceilings and prints the ratios
# reported in docs/PERFORMANCE.md, "The chunking core". Release builds; data in the page cache.
#
#   tools/bench/perf.sh [DATA_FILE]
#
# DATA_FILE defaults to the first 1 GiB of a tar of the Swift toolchain's lib directory
# (real binary data), made once under ${XFER_BENCH_DIR:-bench-data} in the checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup.sh
. tools/env.sh
data="${1:-}"
. tools/bench/bench-data.sh

swift build -c release --product xfer >/dev/null
(cd Benchmarks && swift build -c release --product xfer-perf >/dev/null)
xfer="$(swift build -c release --show-bin-path)/xfer"
perf="$(cd Benchmarks && swift build -c release --show-bin-path)/xfer-perf"

cat "$data" "$big" > /dev/null   # into the page cache
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
sha=$(openssl speed -evp sha256 -bytes 65536 -seconds 3 2>/dev/null | awk '/^sha256/ {sub("k","",$2); print $2 * 1000}')
echo "== openssl speed -evp sha256 (64 KiB blocks, one core): $(awk -v s="$sha" 'BEGIN {printf "%.2f GB/s", s / 1e9}')"
echo "== xfer-perf $(basename "$data")"
"$perf" "$data" --sha-ceiling "$sha" --repeat 3

# The whole command against single-core openssl on the same file, interleaved, best of 5 each.
best() { sort -n | head -1; }
walls_xfer="" walls_ssl="" walls_zstd=""
for _ in 1 2 3 4 5; do
  /usr/bin/time -f %e -o "$dir/t" "$xfer" chunk --summary "$data" > /dev/null; walls_xfer+="$(cat "$dir/t")"$'\n'
  /usr/bin/time -f %e -o "$dir/t" openssl dgst -sha256 "$data" > /dev/null; walls_ssl+="$(cat "$dir/t")"$'\n'
  /usr/bin/time -f %e -o "$dir/t" "$xfer" chunk --summary --compress "$data" > /dev/null; walls_zstd+="$(cat "$dir/t")"$'\n'
done
x=$(printf "%s" "$walls_xfer" | best); o=$(printf "%s" "$walls_ssl" | best); z=$(printf "%s" "$walls_zstd" | best)
echo "== xfer chunk --summary (cut + SHA-256): $x s; openssl dgst -sha256: $o s; ratio $(awk -v a="$o" -v b="$x" 'BEGIN {printf "%.2f", a / b}') [target >= 1.5]"
echo "== xfer chunk --summary --compress (cut + SHA-256 + zstd-1): $z s"

echo "== peak resident memory, 4 GiB file"
for mode in "" "--compress"; do
  /usr/bin/time -f "%M" -o "$dir/rss" "$xfer" chunk --summary $mode "$big" > "$dir/out"
  rss_kib=$(cat "$dir/rss")
  verdict=$([ "$rss_kib" -le $((128 * 1024)) ] && echo PASS || echo MISS)
  echo "$verdict  xfer chunk --summary $mode: $((rss_kib / 1024)) MiB peak RSS [target <= 128 MiB]; $(cat "$dir/out")"
done
