#!/usr/bin/env bash
# Installs what building and testing xfer needs on Debian/Ubuntu: the C libraries
# (libzstd, OpenSSL libcrypto, SQLite, libfuse 3 with fusermount3 for `xfer mount`) and pkg-config; git and rsync for the soak test and the
# benchmarks that compare with rsync; python3-cryptography for tools/suites/check-format.py's sealed-value
# vector; litmus and rclone, WebDAV clients nobody here wrote (tools/suites/webdav-test.py). Swift itself is expected at
# /opt/swift or on PATH, with its clang runtime's libFuzzer (lib/swift/clang/lib/linux/
# libclang_rt.fuzzer-*.a, in every Linux toolchain from swift.org) for tools/suites/fuzz-libfuzzer.sh.
# Idempotent: does nothing when everything is present.
set -euo pipefail

packages=(pkg-config libzstd-dev libssl-dev libsqlite3-dev libfuse3-dev fuse3 sqlite3 zstd time openssl curl git rsync python3-cryptography litmus rclone fio)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  if [ -x /opt/swift/usr/bin/swift ]; then
    echo "setup: add /opt/swift/usr/bin to PATH (the scripts in tools/ do this themselves)" >&2
  else
    echo "setup: no Swift toolchain found; install Swift 6.1 or later" >&2
    exit 1
  fi
fi
swift_bin=$(command -v swift || echo /opt/swift/usr/bin/swift)
if ! compgen -G "$(dirname "$(readlink -f "$swift_bin")")/../lib/swift/clang/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null; then
  echo "setup: this Swift toolchain has no libFuzzer runtime (libclang_rt.fuzzer); tools/suites/fuzz-libfuzzer.sh needs a swift.org Linux toolchain" >&2
fi
