#!/usr/bin/env bash
# Sets up the machine and runs the whole test suite (debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
swift build --build-tests
swift test --skip-build "$@"
