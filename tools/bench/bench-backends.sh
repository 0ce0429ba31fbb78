#!/usr/bin/env bash
# Benchmarks push/pull through PostgreSQL + Ceph RGW against the embedded stores in one run
# (release build). Starts and stops a throwaway PostgreSQL and Ceph. Usage: tools/bench/bench-backends.sh [SIZE_MIB] [RUNS] [FILES]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/env.sh
swift build -c release --product xfer
port() { python3 -c 'import sys; sys.path.insert(0, "tools/lib"); from xferlab import free_port; print(free_port())'; }
CEPH_DIR="$(mktemp -d /tmp/xfer-ceph.XXXXXX)"
PG_VARS=""
cleanup() { [ -n "$PG_VARS" ] && (eval "$PG_VARS"; bash tools/ops/pg-down.sh) || true; CEPH_DIR="$CEPH_DIR" bash tools/ops/ceph-down.sh || true; }
trap cleanup EXIT
PG_VARS="$(PGPORT="$(port)" bash tools/ops/pg-up.sh | grep '^export')"
eval "$PG_VARS"
eval "$(CEPH_DIR="$CEPH_DIR" RGW_PORT="$(port)" MON_PORT="$(port)" bash tools/ops/ceph-up.sh | grep '^export')"
python3 tools/bench/bench-backends.py "${1:-256}" "${2:-3}" "${3:-700}"
