#!/usr/bin/env bash
# The full fuzz run: 200,000 mutated inputs for each of the five decoder families
# (manifest, manifest delta, upload frames, zstd chunk, JSON messages): a million in all.
# Usage: tools/suites/fuzz.sh [ITERATIONS_PER_DECODER] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/env.sh
swift build --build-tests
XFER_FUZZ_ITERATIONS="${1:-200000}" XFER_FUZZ_SEED="${2:-24301}" swift test --skip-build --filter FuzzTests
