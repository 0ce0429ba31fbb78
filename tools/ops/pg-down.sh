#!/usr/bin/env bash
# Stops what tools/ops/pg-up.sh started and removes its directory. Usage: PGTMP=... tools/ops/pg-down.sh
DIR=${PGTMP:?set PGTMP to the directory pg-up.sh printed}
[ -d "$DIR/data" ] || exit 0
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null || true
else "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null || true; fi
rm -rf "$DIR"
