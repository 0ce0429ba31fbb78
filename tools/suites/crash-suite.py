#!/usr/bin/env python3
"""Crash tests with real processes.

Server crashes: each iteration starts a push (a new document or an edit of an earlier one),
kills the server with SIGKILL at a random moment (during uploads, commits or between them),
restarts it and checks that
  - `xfer verify --data` is clean: no committed version lost or corrupt, every chunk a
    committed manifest references present and intact, reference counts and quota exact;
  - every document still pulls as one of the contents it was committed with (the old one if
    the killed push had not committed, the new one if it had);
  - re-running the push completes and sends exactly the chunks the server lacks (asked of
    the server just before the re-run; what the killed push stored is not sent again).

Client crashes: a pull that replaces an older version is killed with SIGKILL at a random
moment; the target must then be byte-identical to the old version or the new one, never a
mix; a re-run brings the new one.

    python3 tools/suites/crash-suite.py --server-kills 10 --client-kills 5      # CI
    python3 tools/suites/crash-suite.py --server-kills 100 --client-kills 30 --configuration release
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def missing_chunks(binary, source, server, token):
    """How many distinct chunks of `source` the account lacks, asked of the server directly."""
    out = subprocess.run([binary, "chunk", "--json", source], check=True, capture_output=True, text=True).stdout
    ids = sorted({chunk["id"] for f in json.loads(out)["files"] for chunk in f["chunks"]})
    missing = 0
    for start in range(0, len(ids), 4096):
        request = urllib.request.Request(server.url + "/v1/chunks/missing", method="POST",
                                         data=json.dumps({"ids": ids[start:start + 4096]}).encode(),
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        missing += len(json.loads(urllib.request.urlopen(request, timeout=30).read())["ids"])
    return missing


def push_json(binary, source, name, server, token, state):
    code, out, err = xferlab.run_xfer(binary, ["push", source, name, "--json"], server.url, token, state, timeout=300)
    if code != 0:
        raise SystemExit(f"FAIL: push of {name} after restart exited {code}: {err[-1000:]}")
    return json.loads(out)


def server_kills(binary, ws, iterations, seed, stats):
    data = ws.join("data")
    os.makedirs(data, exist_ok=True)
    token = xferlab.create_account(binary, data, "crash")
    server = xferlab.Server(binary, data).start()
    rng = random.Random(seed)
    committed = {}  # name -> set of acceptable digests (what a pull may show)
    try:
        for i in range(iterations):
            name = f"doc{rng.randrange(6)}"
            source = ws.join("src", name)
            if name in committed and rng.random() < 0.6:
                xferlab.edit_file(source, rng, edits=rng.randrange(1, 20))
            else:
                xferlab.write_random(source, rng.randrange(1_000_000, 24_000_000), rng)
            new_digest = xferlab.sha256(source)
            env = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_STATE_DIR=ws.join("state-a"), XFER_CONFIG="/nonexistent")
            push = subprocess.Popen([binary, "push", source, name, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            time.sleep(rng.random() * 0.2)
            server.kill9()
            out, err = push.communicate(timeout=120)
            if push.returncode == 0:
                stats["pushes_finished_before_kill"] += 1
                committed[name] = {new_digest}
            else:
                if not xferlab.clear_error(push.returncode, err, out):
                    raise SystemExit(f"FAIL iteration {i}: the push died without a clear error ({push.returncode}): {err[-1000:]}")
                # It may or may not have committed; a first version may not exist at all.
                committed.setdefault(name, {None}).add(new_digest)
            server.start()
            stats["server_kills"] += 1
            code, out, err = xferlab.run_xfer(binary, ["verify", "--data", data, "--json"], server.url, token, ws.join("state-a"))
            verify = json.loads(out)
            if code != 0 or not verify["ok"]:
                raise SystemExit(f"FAIL iteration {i}: verify after a kill: {verify['problems']}")
            stats["chunks_verified"] += verify["chunks_checked"]
            # Every document pulls as something it was committed as.
            probe = rng.choice(sorted(committed))
            target = ws.join("probe", probe)
            code, out, err = xferlab.run_xfer(binary, ["pull", probe, target, "--quiet"], server.url, token, ws.join("state-probe"))
            absent_ok = code == 5 and None in committed[probe]
            if not absent_ok and (code != 0 or xferlab.sha256(target) not in committed[probe]):
                raise SystemExit(f"FAIL iteration {i}: {probe} pulls as something never committed (exit {code}) {err[-500:]}")
            # The re-run completes and sends exactly the chunks the server lacks.
            lacking = missing_chunks(binary, source, server, token)
            report = push_json(binary, source, name, server, token, ws.join("state-a"))
            if report["chunks_sent"] != lacking:
                raise SystemExit(f"FAIL iteration {i}: the re-run sent {report['chunks_sent']} chunks, the server lacked {lacking}")
            stats["rerun_chunks_lacking"] += lacking
            committed[name] = {new_digest}
            stats["rerun_chunks_sent"] += report["chunks_sent"]
            stats["rerun_chunks_total"] += report["chunks"]
            if push.returncode != 0 and report["chunks_sent"] < report["chunks"]:
                stats["reruns_resumed"] += 1
        # Final: everything pulls exactly.
        for name, digests in sorted(committed.items()):
            target = ws.join("final", name)
            code, out, err = xferlab.run_xfer(binary, ["pull", name, target, "--quiet"], server.url, token, ws.join("state-final"))
            if code != 0 or xferlab.sha256(target) not in digests:
                raise SystemExit(f"FAIL: final pull of {name}")
            stats["bytes_verified"] += os.path.getsize(target)
    finally:
        server.stop()


def client_kills(binary, ws, iterations, seed, stats):
    data = ws.join("data-client")
    os.makedirs(data, exist_ok=True)
    token = xferlab.create_account(binary, data, "crash")
    server = xferlab.Server(binary, data).start()
    rng = random.Random(seed + 1)
    try:
        source = ws.join("csrc", "big.bin")
        xferlab.write_random(source, 48_000_000, rng)
        target = ws.join("cdst", "big.bin")
        for i in range(iterations):
            xferlab.run_xfer(binary, ["push", source, "big.bin", "--quiet"], server.url, token, ws.join("cstate-a"))
            old = xferlab.sha256(source)
            code, _, err = xferlab.run_xfer(binary, ["pull", "big.bin", target, "--quiet"], server.url, token, ws.join("cstate-b"))
            if code != 0:
                raise SystemExit(f"FAIL: pull {err}")
            # A new version that differs throughout (so a mix would show), then a pull killed midway.
            if rng.random() < 0.5:
                xferlab.edit_file(source, rng, edits=200)
            else:
                xferlab.write_random(source, rng.randrange(8_000_000, 48_000_000), rng)
            new = xferlab.sha256(source)
            code, _, err = xferlab.run_xfer(binary, ["push", source, "big.bin", "--quiet"], server.url, token, ws.join("cstate-a"))
            if code != 0:
                raise SystemExit(f"FAIL: push {err}")
            env = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_STATE_DIR=ws.join("cstate-b"), XFER_CONFIG="/nonexistent")
            pull = subprocess.Popen([binary, "pull", "big.bin", target, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            time.sleep(0.02 + rng.random() * 0.15)
            pull.send_signal(signal.SIGKILL)
            pull.wait()
            stats["client_kills"] += 1
            seen = xferlab.sha256(target)
            if seen not in (old, new):
                raise SystemExit(f"FAIL iteration {i}: after kill -9 the target is neither the old nor the new version")
            stats["targets_old" if seen == old else "targets_new"] += 1
            code, _, err = xferlab.run_xfer(binary, ["pull", "big.bin", target, "--quiet"], server.url, token, ws.join("cstate-b"))
            if code != 0 or xferlab.sha256(target) != new:
                raise SystemExit(f"FAIL iteration {i}: the re-run pull did not bring the new version: {err}")
            stats["bytes_verified"] += os.path.getsize(target)
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-kills", type=int, default=10)
    parser.add_argument("--client-kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configuration", default="debug", choices=["debug", "release"])
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    binary = xferlab.xfer_binary(args.configuration)
    stats = {"seed": args.seed, "server_kills": 0, "pushes_finished_before_kill": 0, "reruns_resumed": 0,
             "rerun_chunks_sent": 0, "rerun_chunks_total": 0, "rerun_chunks_lacking": 0, "chunks_verified": 0, "client_kills": 0,
             "targets_old": 0, "targets_new": 0, "bytes_verified": 0, "failures": 0}
    start = time.time()
    with xferlab.Workspace("crash") as ws:
        server_kills(binary, ws, args.server_kills, args.seed, stats)
        client_kills(binary, ws, args.client_kills, args.seed, stats)
    stats["pushes_killed"] = stats["server_kills"] - stats["pushes_finished_before_kill"]
    stats["seconds"] = round(time.time() - start, 1)
    print(json.dumps(stats, indent=2, sort_keys=True))
    xferlab.report(args.json, stats)
    print(f"PASS: {stats['server_kills']} server kills, {stats['client_kills']} client kills, 0 failures")


if __name__ == "__main__":
    main()
