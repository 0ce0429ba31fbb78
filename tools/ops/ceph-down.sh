#!/usr/bin/env bash
# Stops what tools/ops/ceph-up.sh started (radosgw, then the OSD, then the mon, each by its pid
# file; SIGKILL after 5 s) and removes its directory. Usage: CEPH_DIR=... tools/ops/ceph-down.sh
D=${CEPH_DIR:?set CEPH_DIR to the directory ceph-up.sh printed}
running() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
for name in client.rgw osd.0 mon.a; do
  file="$D/run/$name.pid"
  [ -f "$file" ] || continue
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || continue
  for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
  running "$pid" && kill -9 "$pid"
done
rm -rf "$D"
