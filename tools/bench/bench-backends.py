#!/usr/bin/env python3
"""Push and pull through the embedded stores (SQLite + files) and through PostgreSQL + Ceph RGW
(S3) in the same run, with the same release binary and data, and report the ratio.

Needs XFER_POSTGRES_URL, XFER_S3_ENDPOINT and the AWS_* keys (tools/bench/bench-backends.sh sets
them up). For each backend pair: a fresh server; push a SIZE file (new content), push it
again after a small edit (the incremental case), pull it into an empty directory; the best of
RUNS for each, wall time of the `xfer` process. Then a folder of FILES small files (100 to
3,000 bytes, 100 to a directory): its first `xfer sync --once` (batch commits of up to 500
documents), and a second, empty device's first sync of it (batched manifest reads).

    tools/bench/bench-backends.sh [SIZE_MIB] [RUNS] [FILES]
"""
import json
import os
import random
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def timed(binary, args, server, token, state):
    start = time.time()
    code, out, err = xferlab.run_xfer(binary, args + ["--json"], server.url, token, state, timeout=900)
    if code != 0:
        raise SystemExit(f"FAIL {' '.join(args)}: {err[-500:]} {out[-500:]}")
    # `sync --json` prints an object per event; push and pull print one.
    return time.time() - start, json.loads(out.strip().splitlines()[-1])


def small_files(folder, count, rng):
    for index in range(count):
        directory = os.path.join(folder, f"d{index // 100}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{index}.txt"), "wb") as f:
            f.write(rng.randbytes(rng.randint(100, 3000)))


def snapshot(folder):
    return {os.path.relpath(os.path.join(d, n), folder): xferlab.sha256(os.path.join(d, n))
            for d, _, names in os.walk(folder) for n in names if not n.startswith(".xfer")}


def run(binary, ws, name, extra, size, runs, files=0):
    data = ws.join(name, "data")
    os.makedirs(data, exist_ok=True)
    server = xferlab.Server(binary, data, extra=extra).start()
    try:
        admin = open(os.path.join(data, "admin-token")).read().strip()
        code, token, err = xferlab.run_xfer(binary, ["account", "create", f"bench{uuid.uuid4().hex[:6]}", "--quota", "1T"],
                                            server.url, admin, ws.join(name, "admin-state"))
        token = token.strip()
        rng = random.Random(5)
        results = {"push": [], "edit": [], "pull": []}
        for attempt in range(runs):
            source = ws.join(name, f"src{attempt}.bin")
            xferlab.write_random(source, size, rng)
            state = ws.join(name, f"state{attempt}")
            seconds, _ = timed(binary, ["push", source, f"doc{attempt}.bin"], server, token, state)
            results["push"].append(seconds)
            xferlab.edit_file(source, rng, edits=3)
            seconds, report = timed(binary, ["push", source, f"doc{attempt}.bin"], server, token, state)
            results["edit"].append(seconds)
            seconds, _ = timed(binary, ["pull", f"doc{attempt}.bin", ws.join(name, f"out{attempt}", "doc.bin")], server, token,
                               ws.join(name, f"pull-state{attempt}"))
            results["pull"].append(seconds)
            if xferlab.sha256(ws.join(name, f"out{attempt}", "doc.bin")) != xferlab.sha256(source):
                raise SystemExit(f"FAIL: {name} pulled different bytes")
            if files:
                # Each attempt in a container of its own, so each first sync finds it empty.
                first, second = ws.join(name, f"tree{attempt}"), ws.join(name, f"tree{attempt}-b")
                small_files(first, files, rng)
                os.makedirs(second)
                container = ["--container", f"tree{attempt}"]
                seconds, _ = timed(binary, ["sync", first, "--once"] + container, server, token, ws.join(name, f"sync-a{attempt}"))
                results.setdefault("sync_push", []).append(seconds)
                seconds, _ = timed(binary, ["sync", second, "--once"] + container, server, token, ws.join(name, f"sync-b{attempt}"))
                results.setdefault("sync_pull", []).append(seconds)
                if snapshot(first) != snapshot(second):
                    raise SystemExit(f"FAIL: {name}: the second device's folder differs")
        return {k: round(min(v), 3) for k, v in results.items()}
    finally:
        server.stop()


def main():
    size = int(sys.argv[1]) << 20 if len(sys.argv) > 1 else 256 << 20
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    files = int(sys.argv[3]) if len(sys.argv) > 3 else 700
    binary = xferlab.xfer_binary("release")
    env = os.environ
    unique = uuid.uuid4().hex[:8]
    shared = ["--metadata", f"{env['XFER_POSTGRES_URL']}?schema=bench_{unique}",
              "--chunks", f"s3://xfer-bench-{unique}/c", "--s3-endpoint", env["XFER_S3_ENDPOINT"]]
    with xferlab.Workspace("backends") as ws:
        embedded = run(binary, ws, "embedded", [], size, runs, files)
        distributed = run(binary, ws, "postgres-s3", shared, size, runs, files)
    mib = size / (1 << 20)
    report = {"size_mib": mib, "runs": runs, "files": files, "embedded_s": embedded, "postgres_s3_s": distributed,
              "ratio": {k: round(distributed[k] / embedded[k], 2) for k in embedded}}
    print(json.dumps(report, indent=2, sort_keys=True))
    for k in ("push", "edit", "pull"):
        print(f"{k:5}  embedded {embedded[k]:7.3f} s ({mib / embedded[k]:7.1f} MiB/s)   "
              f"postgres+s3 {distributed[k]:7.3f} s ({mib / distributed[k]:7.1f} MiB/s)   ratio {report['ratio'][k]:.2f}x")
    for k in ("sync_push", "sync_pull") if files else ():
        print(f"{k:9}  {files} files: embedded {embedded[k]:7.3f} s   postgres+s3 {distributed[k]:7.3f} s   ratio {report['ratio'][k]:.2f}x")


if __name__ == "__main__":
    main()
