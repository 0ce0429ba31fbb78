#!/usr/bin/env python3
"""The seeded concurrent check of records (docs/RECORDS.md): several clients save the same
records with change tags through two servers sharing one PostgreSQL, and afterwards

- no acknowledged save is lost: per record, the acknowledged saves form one chain, each based on
  the tag the one before it answered, and the record the servers hold is the chain's last;
- every conflict is reported: a save from a stale tag answers CONFLICT with the server's record,
  whose tag is newer than the one the client sent;
- both servers give the same changes from the start, and each record's last change is its
  final state.

Uses $XFER_POSTGRES_URL if set, else starts a throwaway PostgreSQL (tools/ops/pg-up.sh).

    python3 tools/suites/records-check.py [--seed N] [--clients 6] [--rounds 60] [--records 8]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import xferlab  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def call(url, token, route, body):
    request = urllib.request.Request(f"{url}/v1/containers/check/{route}", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


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
            metadata = ["--metadata", f"{url}?schema=records_{args.seed}_{os.getpid()}"]
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
            names = [f"item-{i}" for i in range(args.records)]
            log, lock = [], threading.Lock()
            threads = [threading.Thread(target=client, args=(i, args.seed, [s.url for s in servers], token, names,
                                                             args.rounds, log, lock)) for i in range(args.clients)]
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
        finally:
            for server in servers:
                server.stop()
            if pg:
                subprocess.run(["bash", os.path.join(ROOT, "tools/ops/pg-down.sh")], env=dict(os.environ, **pg),
                               capture_output=True)
    print(f"seed {args.seed}: {len(log)} saves tried by {args.clients} clients through 2 servers, "
          f"{saves} acknowledged, {conflicts} conflicts reported")
    for problem in problems[:20]:
        print("FAIL:", problem)
    if problems:
        sys.exit(1)
    print("PASS: no acknowledged save lost, every conflict reported, both servers agree")


if __name__ == "__main__":
    main()
