#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of every decoder a network peer can reach
# (docs/RELIABILITY.md, "Coverage-guided fuzzing"). Builds the Fuzz/ package instrumented, then
# runs each harness for SECONDS over a copy of its seed corpus (Fuzz/corpus/NAME stays as it
# is), and prints each one's executions, coverage and corpus from libFuzzer's final stats.
# A crash, a broken property, a timeout (10 s on one input) or a memory blow-up is saved under
# Fuzz/crashes/NAME/ (replay: Fuzz/.build/release/fuzz-NAME FILE) and the script exits 1 once
# every harness has run. XFER_FUZZ_JOBS harnesses run at once (the number of cores by default).
# Usage: tools/suites/fuzz-libfuzzer.sh [SECONDS_PER_TARGET] [NAME...]
#        tools/suites/fuzz-libfuzzer.sh --write-corpus   re-makes Fuzz/corpus from the real encoders
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/env.sh

targets=(manifest delta frames davxml davif names json)
# Inputs libFuzzer may grow to, per harness: well past every seed, small enough to stay fast.
declare -A max_len=([manifest]=16384 [delta]=16384 [frames]=65536 [davxml]=16384 [davif]=4096 [names]=4096 [json]=16384)

build() {
  nice -n 10 swift build --package-path Fuzz -c release --sanitize=fuzzer "$@"
}
build
bin=$(build --show-bin-path)
# libFuzzer's own handler saves the input of a trap; Swift's backtracer would take the signal first.
export SWIFT_BACKTRACE=enable=no

if [ "${1:-}" = --write-corpus ]; then
  for t in "${targets[@]}"; do
    rm -rf "Fuzz/corpus/$t"
    XFER_FUZZ_WRITE_SEEDS="Fuzz/corpus/$t" "$bin/fuzz-$t"
  done
  exit 0
fi

seconds="${1:-20}"
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && targets=("$@")
jobs="${XFER_FUZZ_JOBS:-$(nproc)}"   # harnesses at once (each one process, one core)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs harness $1 and writes its row of the table to $work/$1/row.
fuzz_one() {
  local t=$1 status=0
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  cp Fuzz/corpus/"$t"/* "$work/$t/corpus/"
  nice -n 10 "$bin/fuzz-$t" "$work/$t/corpus" -max_total_time="$seconds" -max_len="${max_len[$t]}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" \
    >"$work/$t/log" 2>&1 || status=$?
  local execs rate last cov ft corpus result=ok
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t/log")
  last=$(grep -E '^#[0-9]+.*cov: ' "$work/$t/log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  if [ "$status" -ne 0 ] || compgen -G "$work/$t/artifacts/*" >/dev/null; then
    result="FAILED (exit $status)"
    mkdir -p "Fuzz/crashes/$t"
    cp "$work/$t/artifacts/"* "Fuzz/crashes/$t/" 2>/dev/null || true
    cp "$work/$t/log" "Fuzz/crashes/$t/log.txt"
  fi
  printf '%-9s %12s %9s %6s %7s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corpus:-?}" "$result" >"$work/$t/row"
}

for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
printf '%-9s %12s %9s %6s %7s %8s  %s\n' target execs "exec/s" cov ft corpus result
failed=0
for t in "${targets[@]}"; do
  cat "$work/$t/row"
  if grep -q FAILED "$work/$t/row"; then
    failed=1
    echo "--- fuzz-$t (inputs and log in Fuzz/crashes/$t/)" >&2
    grep -E 'Fatal error|ERROR: libFuzzer|SUMMARY|Test unit written' "Fuzz/crashes/$t/log.txt" >&2 || tail -20 "Fuzz/crashes/$t/log.txt" >&2
  fi
done
exit "$failed"
