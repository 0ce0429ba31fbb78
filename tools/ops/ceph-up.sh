#!/usr/bin/env bash
# Starts a throwaway single-node Ceph (one mon, one OSD on a memstore or bluestore file, and
# radosgw serving S3 on 127.0.0.1:$RGW_PORT), with auth off inside the cluster and one S3 user
# whose keys are $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY (default xfer-test / xfer-secret).
# Installs Debian's ceph-mon, ceph-osd, radosgw if missing. Prints the variables to export.
# Usage: CEPH_DIR=/tmp/xfer-ceph [RGW_PORT=7480] [MON_PORT=3300] [OBJSTORE=memstore] tools/ops/ceph-up.sh
# Stop with: CEPH_DIR=... tools/ops/ceph-down.sh
set -euo pipefail
if ! command -v radosgw >/dev/null || ! command -v ceph-osd >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ceph-mon ceph-osd radosgw ceph-common >/dev/null
fi
D=${CEPH_DIR:-$(mktemp -d /tmp/xfer-ceph.XXXXXX)}
RGW_PORT=${RGW_PORT:-7480}
MON_PORT=${MON_PORT:-3300}
OBJSTORE=${OBJSTORE:-memstore}
ACCESS=${AWS_ACCESS_KEY_ID:-xfer-test}
SECRET=${AWS_SECRET_ACCESS_KEY:-xfer-secret}
mkdir -p "$D"/{run,log,mon,osd,rgw}
FSID=$(cat /proc/sys/kernel/random/uuid)
cat > "$D/ceph.conf" <<CONF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
run dir = $D/run
pid file = $D/run/\$name.pid
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
paxos propose interval = 0.05
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = $D/mon/\$cluster-\$id
[osd]
osd data = $D/osd/\$cluster-\$id
osd objectstore = $OBJSTORE
memstore device bytes = 4294967296
bluestore block path = $D/osd/\$cluster-\$id.block
bluestore block create = true
bluestore block size = 21474836480
osd memory target = 1073741824
[client.rgw]
rgw data = $D/rgw
ms mon client mode = crc secure
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw dns name = localhost
rgw thread pool size = 64
CONF
C=(-c "$D/ceph.conf")
monmaptool --create --addv a "[v2:127.0.0.1:$MON_PORT]" --fsid "$FSID" "$D/monmap" >/dev/null
ceph-mon "${C[@]}" --mkfs -i a --monmap "$D/monmap"
ceph-mon "${C[@]}" -i a
UUID=$(cat /proc/sys/kernel/random/uuid)
ID=$(ceph "${C[@]}" osd new "$UUID")
mkdir -p "$D/osd/ceph-$ID"
ceph-osd "${C[@]}" -i "$ID" --mkfs --osd-uuid "$UUID" 2>>"$D/log/mkfs.log"
ceph-osd "${C[@]}" -i "$ID"
for _ in $(seq 120); do ceph "${C[@]}" osd stat 2>/dev/null | grep -q '1 up' && break; sleep 0.5; done
radosgw "${C[@]}" -n client.rgw
for _ in $(seq 120); do curl -s -o /dev/null "http://127.0.0.1:$RGW_PORT/" && break; sleep 0.5; done
curl -s -o /dev/null "http://127.0.0.1:$RGW_PORT/" || { echo "ceph-up: radosgw did not start; see $D/log" >&2; exit 1; }
radosgw-admin "${C[@]}" user create --uid=xfer --display-name=xfer --access-key="$ACCESS" --secret-key="$SECRET" >/dev/null
echo "export CEPH_DIR=$D XFER_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT AWS_ACCESS_KEY_ID=$ACCESS AWS_SECRET_ACCESS_KEY=$SECRET"
