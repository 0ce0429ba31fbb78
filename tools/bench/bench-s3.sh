#!/usr/bin/env bash
# What the object store costs per object against per byte: one object per chunk at several
# parallelisms against packs of chunks, on a throwaway single-node Ceph RGW (release build).
#   tools/bench/bench-s3.sh [--total SIZE] [--chunk SIZE] [--repeat N] [--json]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/env.sh
(cd Benchmarks && swift build -c release --product xfer-s3-perf >/dev/null)
perf="$(cd Benchmarks && swift build -c release --show-bin-path)/xfer-s3-perf"
port() { python3 -c 'import sys; sys.path.insert(0, "tools/lib"); from xferlab import free_port; print(free_port())'; }
CEPH_DIR="$(mktemp -d /tmp/xfer-ceph.XXXXXX)"
trap 'CEPH_DIR="$CEPH_DIR" bash tools/ops/ceph-down.sh || true' EXIT
eval "$(CEPH_DIR="$CEPH_DIR" RGW_PORT="$(port)" MON_PORT="$(port)" bash tools/ops/ceph-up.sh | grep '^export')"
"$perf" "$@"
