#!/usr/bin/env bash
# The full reliability run of docs/RELIABILITY.md (release build): a million fuzzed decoder
# inputs, 5 minutes of libFuzzer on each of the 7 decoder harnesses, 2,000 seeds through the
# fault proxy, 1,000 server and 30 client kill -9 iterations, 50 clients for 60 s, 10 seeds x
# 1,000 steps of the randomized sync check, and schemathesis with 100 examples per operation.
# Each suite's JSON report goes to ${OUT:-/tmp/xfer-reliability}. Takes about three hours on
# 2 cores (the fault proxy's 2,000 seeds about 50 minutes, the kills and the sync check about
# 40 each, libFuzzer 20).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
OUT="${OUT:-/tmp/xfer-reliability}"
mkdir -p "$OUT"
swift build -c release --product xfer
bash tools/suites/fuzz.sh 200000 | tee "$OUT/fuzz.log" | tail -3
bash tools/suites/fuzz-libfuzzer.sh 300 | tee "$OUT/libfuzzer.log" | tail -8   # libFuzzer, 5 min on each of 7 decoders, 2 at a time
python3 tools/suites/fault-suite.py --seeds 2000 --configuration release --json "$OUT/faults.json" | tail -1
python3 tools/suites/crash-suite.py --server-kills 1000 --client-kills 30 --seed 1 --configuration release --json "$OUT/crash.json" | tail -1
python3 tools/suites/sync-check.py --seed 101 --seeds 10 --steps 1000 --configuration release --keep-going --json "$OUT/sync-check.json" | tail -1   # 10,000 steps
python3 tools/suites/soak-git.py --switches 100 --seed 7 --configuration release | tail -1   # the git-checkout soak, long
python3 tools/suites/editor-suite.py --rounds 5 --configuration release --json "$OUT/editors.json" | tail -1   # how real editors save
python3 tools/suites/load-test.py --clients 50 --seconds 60 --configuration release --json "$OUT/load.json" | tail -1
bash tools/suites/schemathesis.sh 100 | tail -1
echo "reports in $OUT"
