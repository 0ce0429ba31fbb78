#!/usr/bin/env bash
# Starts a throwaway PostgreSQL (Debian's postgresql package, installed if missing) on
# 127.0.0.1:$PGPORT (default 55432) in a new directory, trusting local connections, and
# creates the database `xfer`. Prints the variables to export (XFER_POSTGRES_URL, PGTMP).
# Stop with: PGTMP=... tools/ops/pg-down.sh
set -euo pipefail
if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PORT=${PGPORT:-55432}
DIR=$(mktemp -d /tmp/xfer-pg.XXXXXX)
run() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$DIR"
run "$BIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$DIR/initdb.log"
run "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c max_connections=200" start >/dev/null
run "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres xfer
echo "export PGTMP=$DIR XFER_POSTGRES_URL=postgres://postgres@127.0.0.1:$PORT/xfer"
