#!/usr/bin/env python3
"""The seeded concurrent check of records (docs/RECORDS.md): several clients save the same
records with change tags through two servers sharing one PostgreSQL, and afterwards

- no acknowledged save is lost: per record, the acknowledged saves form one chain, each based on
  the tag the one before it answered, and the record the servers hold is the chain's last;
- every conflict is reported: a save from a stale tag answers CONFLICT with the server's record,
  whose tag is newer than the one the client sent;
- both servers give the same changes from the start, and each record's last change is its
  final state.

A zone subscription with a webhook watches the same records: a receiver on loopback refuses a
fifth of the deliveries (503) and checks each signature with Python's own HMAC, and server a is
killed (SIGKILL) and started again half way. Every notification must reach the receiver at
least once, in order, correctly signed.

Uses $XFER_POSTGRES_URL if set, else starts a throwaway PostgreSQL (tools/ops/pg-up.sh).

    python3 tools/suites/records-check.py [--seed N] [--clients 6] [--rounds 60] [--records 8]
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import xferlab  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def call(url, token, route, body):
    request = urllib.request.Request(f"{url}/v1/containers/check/{route}", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


SECRET = "records-check-webhook-secret"


class Receiver(http.server.ThreadingHTTPServer):
    """A webhook receiver on loopback: refuses a seeded fifth of the deliveries, and keeps the
    cursors of those it took, and any whose signature does not verify."""

    def __init__(self, seed):
        self.rng, self.lock = random.Random(seed), threading.Lock()
        self.cursors, self.bad, self.refused = [], [], 0
        super().__init__(("127.0.0.1", 0), ReceiverHandler)


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        receiver = self.server
        with receiver.lock:
            if receiver.rng.random() < 0.2:
                receiver.refused += 1
                self.send_response(503)
                self.end_headers()
                return
            fields = dict(part.split("=", 1) for part in self.headers.get("X-Xfer-Signature", "").split(","))
            expected = hmac.new(SECRET.encode(), fields.get("t", "").encode() + b"." + body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, fields.get("v1", "")):
                receiver.bad.append(self.headers.get("X-Xfer-Delivery"))
            receiver.cursors += [n["cursor"] for n in json.loads(body)["notifications"]]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def webhook_problems(receiver, notified):
    """Every notification the server kept reached the receiver, in order (a repeat is allowed:
    at least once), and every signature verified."""
    problems = [f"webhook: a bad signature on delivery {d}" for d in receiver.bad]
    seen = set(receiver.cursors)
    problems += [f"webhook: notification {c} never delivered" for c in notified if c not in seen]
    firsts = [c for i, c in enumerate(receiver.cursors) if c not in receiver.cursors[:i]]
    if firsts != sorted(firsts):
        problems.append("webhook: notifications were first delivered out of order")
    return problems


def all_notifications(url, token):
    cursors, since = [], 0
    while True:
        request = urllib.request.Request(f"{url}/v1/containers/check/notifications?since={since}&limit=200",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            page = json.loads(response.read())
        cursors += [n["cursor"] for n in page["notifications"]]
        since = page["cursor"]
        if not page["moreComing"]:
            return cursors


def tag_number(tag):
    return int(tag, 36)


def client(index, seed, urls, token, names, rounds, log, lock):
    """Reads a record through one server and saves it from that tag through the other, now and
    then from a stale tag on purpose; records every acknowledged save and every answer."""
    rng = random.Random(seed * 1000 + index)
    stale = {}
    for round_ in range(rounds):
        name = rng.choice(names)
        read_url, write_url = rng.sample(urls, 2) if rng.random() < 0.5 else (urls[0], urls[0])
        looked = call(read_url, token, "records/lookup", {"records": [{"recordName": name}]})["records"][0]
        value = f"client {index} round {round_}"
        fields = {"value": {"value": value}, "client": {"value": index}}
        if looked.get("serverErrorCode") == "NOT_FOUND":
            operation, base = "create", None
        else:
            base = looked["recordChangeTag"]
            if name in stale and rng.random() < 0.3:
                base = stale[name]  # a tag known to be old, or soon to be
            stale[name] = looked["recordChangeTag"]
            operation = "update"
        record = {"recordName": name, "recordType": "Item", "fields": fields}
        if base:
            record["recordChangeTag"] = base
        answer = call(write_url, token, "records/modify",
                      {"operations": [{"operationType": operation, "record": record}]})["records"][0]
        with lock:
            log.append({"client": index, "name": name, "operation": operation, "base": base, "value": value,
                        "answer": answer})


def check(log, final, changes):
    problems = []
    acknowledged = {}
    for entry in log:
        answer = entry["answer"]
        code = answer.get("serverErrorCode")
        if code is None:
            acknowledged.setdefault(entry["name"], []).append(entry)
        elif code == "CONFLICT":
            server = answer.get("serverRecord")
            if not server or tag_number(server["recordChangeTag"]) <= tag_number(entry["base"]):
                problems.append(f"a conflict on {entry['name']} without a newer server record: {answer}")
        elif code != "EXISTS":
            problems.append(f"an unexpected answer for {entry['name']}: {answer}")
    conflicts = sum(1 for e in log if e["answer"].get("serverErrorCode") == "CONFLICT")
    for name, saves in acknowledged.items():
        saves.sort(key=lambda e: tag_number(e["answer"]["recordChangeTag"]))
        for before, after in zip(saves, saves[1:]):
            if after["operation"] == "update" and after["base"] != before["answer"]["recordChangeTag"]:
                problems.append(f"{name}: save {after['value']!r} was based on {after['base']}, "
                                f"not on {before['answer']['recordChangeTag']} (the save before it): a lost update")
        last = saves[-1]
        held = final.get(name)
        if not held or held["recordChangeTag"] != last["answer"]["recordChangeTag"] \
                or held["fields"]["value"]["value"] != last["value"]:
            problems.append(f"{name}: the servers hold {held and held['fields']['value']['value']!r}, "
                            f"not the last acknowledged save {last['value']!r}")
    if changes[0] != changes[1]:
        problems.append("the two servers give different changes")
    latest = {}
    for record in changes[0]:
        latest[record["recordName"]] = record
    for name, held in final.items():
        if latest.get(name, {}).get("recordChangeTag") != held["recordChangeTag"]:
            problems.append(f"{name}: its last change is not its final state")
    return problems, sum(len(v) for v in acknowledged.values()), conflicts


def all_changes(url, token):
    records, token_ = [], None
    while True:
        page = call(url, token, "changes/zone", {"zones": [{"zoneID": {"zoneName": "_defaultZone"}, "syncToken": token_,
                                                            "resultsLimit": 200}]})["zones"][0]
        records += page["records"]
        token_ = page["syncToken"]
        if not page["moreComing"]:
            return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--records", type=int, default=8)
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build", "debug", "xfer"))
    args = parser.parse_args()

    pg = None
    url = os.environ.get("XFER_POSTGRES_URL")
    if not url:
        out = subprocess.run(["bash", os.path.join(ROOT, "tools/ops/pg-up.sh")], check=True, capture_output=True,
                             text=True, env=dict(os.environ, PGPORT=str(xferlab.free_port()))).stdout
        pg = dict(part.split("=", 1) for part in out.split("export ", 1)[1].split())
        url = pg["XFER_POSTGRES_URL"]
    servers = []
    with xferlab.Workspace("records-check") as ws:
        try:
            metadata = ["--metadata", f"{url}?schema=records_{args.seed}_{os.getpid()}", "--webhooks", "any"]
            for name in ["a", "b"]:
                os.makedirs(ws.join(name, "data"), mode=0o700)
                servers.append(xferlab.Server(args.binary, ws.join(name, "data"), extra=metadata))
            for server in servers:
                server.start(timeout=60)
            with open(os.path.join(servers[0].data, "admin-token")) as f:
                admin = f.read().strip()
            made = urllib.request.Request(f"{servers[0].url}/v1/admin/accounts", data=b'{"name": "check"}',
                                          headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
            with urllib.request.urlopen(made, timeout=30) as response:
                token = json.loads(response.read())["token"]
            receiver = Receiver(args.seed)
            threading.Thread(target=receiver.serve_forever, daemon=True).start()
            call(servers[0].url, token, "subscriptions/modify", {"operations": [{"operationType": "create",
                "subscription": {"subscriptionID": "hook", "subscriptionType": "zone", "webhook": {
                    "url": f"http://127.0.0.1:{receiver.server_address[1]}/hook", "secret": SECRET}}}]})
            names = [f"item-{i}" for i in range(args.records)]
            log, lock = [], threading.Lock()
            threads = [threading.Thread(target=client, args=(i, args.seed, [servers[1].url] * 2, token, names,
                                                             args.rounds // 2, log, lock)) for i in range(args.clients)]
            for thread in threads:
                thread.start()
            # Server a dies while its deliverer may hold a claim, and comes back.
            time.sleep(1)
            servers[0].kill9()
            servers[0].start(timeout=60)
            for thread in threads:
                thread.join()
            threads = [threading.Thread(target=client, args=(i, args.seed + 1, [s.url for s in servers], token, names,
                                                             args.rounds - args.rounds // 2, log, lock))
                       for i in range(args.clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            final = {}
            for answer in call(servers[1].url, token, "records/lookup",
                               {"records": [{"recordName": n} for n in names]})["records"]:
                if "serverErrorCode" not in answer:
                    final[answer["recordName"]] = answer
            changes = [all_changes(s.url, token) for s in servers]
            problems, saves, conflicts = check(log, final, changes)
            notified = all_notifications(servers[1].url, token)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not set(notified) <= set(receiver.cursors):
                time.sleep(0.5)
            problems += webhook_problems(receiver, notified)
            receiver.shutdown()
        finally:
            for server in servers:
                server.stop()
            if pg:
                subprocess.run(["bash", os.path.join(ROOT, "tools/ops/pg-down.sh")], env=dict(os.environ, **pg),
                               capture_output=True)
    print(f"seed {args.seed}: {len(log)} saves tried by {args.clients} clients through 2 servers, "
          f"{saves} acknowledged, {conflicts} conflicts reported; {len(notified)} notifications, "
          f"{len(receiver.cursors)} delivered to the webhook ({receiver.refused} deliveries refused, server a killed once)")
    for problem in problems[:20]:
        print("FAIL:", problem)
    if problems:
        sys.exit(1)
    print("PASS: no acknowledged save lost, every conflict reported, both servers agree, every notification "
          "delivered to the webhook in order")


if __name__ == "__main__":
    main()
