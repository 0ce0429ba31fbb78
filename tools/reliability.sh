#!/usr/bin/env bash
# The full reliability run of docs/RELIABILITY.md (release build): a million fuzzed decoder
# inputs, 5 minutes of libFuzzer on each of the 7 decoder harnesses, 200 seeds through the
# fault proxy, 100 server and 30 client kill -9 iterations, 50 clients for 60 s, 8 seeds x 1000
# steps of the randomized sync check, and schemathesis with 100 examples per operation. Each
# suite's JSON report goes to ${OUT:-/tmp/xfer-reliability}. Takes about 30 minutes on 2 cores,
# and 20 more for libFuzzer (two harnesses at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
OUT="${OUT:-/tmp/xfer-reliability}"
mkdir -p "$OUT"
swift build -c release --product xfer
bash tools/fuzz.sh 200000 | tee "$OUT/fuzz.log" | tail -3
bash tools/fuzz-libfuzzer.sh 300 | tee "$OUT/libfuzzer.log" | tail -8   # libFuzzer, 5 min on each of 7 decoders, 2 at a time
python3 tools/fault-suite.py --seeds 200 --configuration release --json "$OUT/faults.json" | tail -1
python3 tools/crash-suite.py --server-kills 100 --client-kills 30 --configuration release --json "$OUT/crash.json" | tail -1
python3 tools/sync-check.py --seed 101 --seeds 8 --steps 1000 --configuration release --keep-going --json "$OUT/sync-check.json" | tail -1
python3 tools/soak-git.py --switches 100 --seed 7 --configuration release | tail -1   # the git-checkout soak, long
python3 tools/editor-suite.py --rounds 5 --configuration release --json "$OUT/editors.json" | tail -1   # how real editors save
python3 tools/load-test.py --clients 50 --seconds 60 --configuration release --json "$OUT/load.json" | tail -1
bash tools/schemathesis.sh 100 | tail -1
echo "reports in $OUT"
