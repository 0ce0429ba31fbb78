#!/usr/bin/env bash
# Sets up the machine and runs the whole test suite (debug build): the Swift tests, the web view in headless
# Chromium (tools/suites/web-test.py), then the
# short versions of the reliability suites (docs/RELIABILITY.md): faults through the proxy,
# kill -9 crash loops, the randomized sync check, a git-checkout soak under two daemons, a load test, schemathesis against the OpenAPI description,
# coverage-guided fuzzing of the decoders (libFuzzer), the backend suite on a real PostgreSQL and Ceph RGW, records saved concurrently through two servers, and the attacker's suite.
# Arguments go to `swift test` (e.g. --filter); XFER_QUICK=1 skips the reliability suites.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
. tools/env.sh
python3 tools/suites/check-format.py   # docs/FORMAT.md, implemented independently, against the pinned vectors
swift format lint --strict --configuration .swift-format -r Sources Tests Examples   # the layout (.swift-format); `swift format -i -r ...` fixes it
# A clean build compiles every file: a warning from Sources/, Tests/ or Examples/ fails the run.
build_log=$(mktemp)
swift build --build-tests 2>&1 | tee "$build_log"
# (a warning in a macro's expansion names our file on the line after it)
if grep -A1 ': warning:' "$build_log" | grep -E "(^|- )$PWD/(Sources|Tests|Examples)/"; then
  echo "test: the compiler warns about the lines above; fix them" >&2
  exit 1
fi
rm -f "$build_log"
swift test --skip-build "$@"
if [ $# -eq 0 ]; then
  # (The client suite runs again on PostgreSQL + S3, plain and on an end-to-end encrypted
  # container over servers that seal at rest, in tools/suites/backend-tests.sh below.)
  # The web view in headless Chromium (installed by the script if missing), against the CLI.
  python3 tools/suites/web-test.py --xfer .build/debug/xfer
  # /metrics scraped and parsed by prometheus-client's text parser (PyPI, installed if missing).
  python3 tools/suites/metrics-test.py --xfer .build/debug/xfer
  # The documented install (tools/install.sh): binary, a manual page a command, completions.
  prefix=$(mktemp -d)
  bash tools/install.sh --binary .build/debug/xfer --configuration debug --prefix "$prefix"
  pages=$(ls "$prefix/share/man/man1" | grep -c '^xfer')
  if [ "$pages" -lt 40 ]; then echo "test: tools/install.sh installed $pages manual pages, not one a command" >&2; exit 1; fi
  grep -q '^\.Sh NAME' "$prefix/share/man/man1/xfer.push.1"   # mdoc
  bash -c "source '$prefix/share/bash-completion/completions/xfer' && complete -p xfer" >/dev/null
  grep -q 'push' "$prefix/share/zsh/site-functions/_xfer"
  grep -q 'push' "$prefix/share/fish/vendor_completions.d/xfer.fish"
  rm -rf "$prefix"
  # WebDAV driven by litmus and rclone (Debian packages, installed by setup.sh).
  python3 tools/suites/webdav-test.py --xfer .build/debug/xfer --groups basic,copymove,props,locks
fi
if [ "${XFER_QUICK:-0}" != 1 ] && [ $# -eq 0 ]; then
  python3 tools/suites/fault-suite.py --seeds 20
  python3 tools/suites/crash-suite.py --server-kills 12 --client-kills 5
  python3 tools/suites/sync-check.py --seeds 3 --steps 150   # seeded randomized sync model check
  python3 tools/suites/soak-git.py --switches 12              # git checkouts under two --watch daemons
  python3 tools/suites/load-test.py --clients 20 --seconds 10 --configuration debug
  bash tools/suites/schemathesis.sh 25
  bash tools/suites/fuzz-libfuzzer.sh 20   # libFuzzer, 20 s on each decoder a peer reaches (Fuzz/)
  bash tools/suites/backend-tests.sh   # PostgreSQL + Ceph RGW (docs/SCALING.md)
  python3 tools/suites/records-check.py --seed 1   # records saved concurrently through two servers on PostgreSQL
  python3 tools/suites/attack-suite.py   # a hostile peer against server and client (docs/SECURITY.md)
fi
