#!/usr/bin/env bash
# Sets up the machine and runs the whole test suite (debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
python3 tools/check-format.py   # docs/FORMAT.md, implemented independently, against the pinned vectors
swift build --build-tests
swift test --skip-build "$@"
