#!/usr/bin/env bash
# Runs the backend suite against real services: a throwaway PostgreSQL (tools/ops/pg-up.sh) and a
# single-node Ceph RGW (tools/ops/ceph-up.sh), both on loopback, installed from Debian's packages
# if missing. The library-level client suite runs on PostgreSQL + S3 (each test in its own
# schema and bucket), then the S3 store tests and the two-server test, then the client suite
# again on an end-to-end encrypted container over servers that seal their data at rest
# (XFER_TEST_E2E=1 XFER_TEST_SEALING=1; a test of what only a plain container does says so
# and is skipped: LiveServer.plainOnly). Stops both at the end.
# Expects a debug build with tests (swift build --build-tests).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/env.sh
CEPH_DIR="$(mktemp -d /tmp/xfer-ceph.XXXXXX)"
export CEPH_DIR
PG_VARS="" CEPH_VARS=""
cleanup() {
  [ -n "$PG_VARS" ] && (eval "$PG_VARS"; bash tools/ops/pg-down.sh) || true
  CEPH_DIR="$CEPH_DIR" bash tools/ops/ceph-down.sh || true
}
trap cleanup EXIT
port() { python3 -c 'import sys; sys.path.insert(0, "tools/lib"); from xferlab import free_port; print(free_port())'; }
PG_VARS="$(PGPORT="$(port)" bash tools/ops/pg-up.sh | grep '^export')"
eval "$PG_VARS"
CEPH_VARS="$(RGW_PORT="$(port)" MON_PORT="$(port)" bash tools/ops/ceph-up.sh | grep '^export')"
eval "$CEPH_VARS"
echo "backends: $XFER_POSTGRES_URL and $XFER_S3_ENDPOINT"
swift test --skip-build --filter 'XferClientTests|ManyServersTests|S3Tests|PackedChunkStoreTests|SealedStoreTests|MetadataStoreTests|MemberStoreTests|RecordStoreTests|ContainerKeyStoreTests|IndexKeyTests|S3ServeTests|MetadataBudgetTests|DeadPropertyStoreTests|DavLockTests|WebStoreTests|QueryStoreTests|PostgresServiceTests|ChunkIndexMigrationTests'
# The client suite on an end-to-end encrypted container, over servers sealing at rest, on the same backends.
XFER_TEST_E2E=1 XFER_TEST_SEALING=1 swift test --skip-build --filter XferClientTests
