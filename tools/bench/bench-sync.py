#!/usr/bin/env python3
"""Sync passes over a large container: the no-op pass and the pass after one remote edit.

Builds a tree of DOCUMENTS small files (100-300 bytes, 1,000 to a directory), syncs it once
from device A (the first sync; its time is reported too), then syncs device B from the
server. Then, ROUNDS times each, as whole `xfer sync DIR --once` processes (what cron or a
shell user runs; process start included):

  noop          device B, nothing changed anywhere since its last pass, which found nothing
                to do either: the pass only confirms it (target: under 1 s at 100,000)
  noop-first    device B's first pass after one that changed something: nothing to do,
                found by planning every document
  remote-edit   device A edits one file and syncs; device B's pass that brings it over
  local-edit    device B edits one file; its pass that pushes it

Beside them, in the same run, `git status --porcelain` over the same tree in a git
repository (the bar a no-op pass is held to) and `find DIR -type f | wc -l`.

    python3 tools/bench/bench-sync.py --documents 100000 --configuration release [--json FILE]

Reports medians, minimums and maximums in seconds; docs/PERFORMANCE.md, "Sync passes over a large
container".
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def make_tree(root, count, rng):
    for index in range(count):
        directory = os.path.join(root, "Documents", f"d{index // 1000:04d}")
        if index % 1000 == 0:
            os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{index:07d}.txt"), "wb") as f:
            f.write(rng.randbytes(rng.randint(100, 300)))


def timed(command, env, cwd=None):
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return elapsed, result.stdout


def summary(values):
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3),
            "runs": len(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--configuration", default="release")
    parser.add_argument("--binary")
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    binary = args.binary or xferlab.xfer_binary(args.configuration)
    rng = random.Random(7)
    work = tempfile.mkdtemp(prefix="xfer-bench-sync-")
    server = None
    try:
        data = os.path.join(work, "data")
        token = xferlab.create_account(binary, data, "bench")
        server = xferlab.Server(binary, data).start()
        a, b = os.path.join(work, "a"), os.path.join(work, "b")
        os.makedirs(b)
        make_tree(a, args.documents, rng)
        base = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_CONFIG=os.path.join(work, "none.json"))
        env_a = dict(base, XFER_STATE_DIR=os.path.join(work, "state-a"))
        env_b = dict(base, XFER_STATE_DIR=os.path.join(work, "state-b"))
        sync_a = [binary, "sync", a, "--once", "--quiet"]
        sync_b = [binary, "sync", b, "--once", "--quiet"]

        results = {"documents": args.documents, "configuration": args.configuration}
        first, _ = timed(sync_a, env_a)
        results["first_sync_a_seconds"] = round(first, 2)
        print(f"first sync of {args.documents} documents (device A): {first:.1f} s ({args.documents / first:.0f} documents/s)", flush=True)
        second, _ = timed(sync_b, env_b)
        results["first_sync_b_seconds"] = round(second, 2)
        print(f"first sync on device B (downloads all): {second:.1f} s", flush=True)
        timed(sync_b, env_b)  # the pass after the first keeps B's view: the runs below start from it

        noop, noop_first, remote_edit, local_edit, git_status, find = [], [], [], [], [], []
        files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(a, "Documents")) for f in fs)
        git = shutil.which("git")
        copy = os.path.join(work, "git-copy")  # outside the synced folders: .git would be synced
        if git:
            shutil.copytree(os.path.join(b, "Documents"), os.path.join(copy, "Documents"))
            subprocess.run([git, "init", "-q", copy], check=True)
            subprocess.run([git, "-C", copy, "add", "-A"], check=True)
            subprocess.run([git, "-C", copy, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "tree"],
                           check=True)
        for round_ in range(args.rounds):
            noop_first.append(timed(sync_b, env_b)[0])
            noop.append(timed(sync_b, env_b)[0])
            if git:
                git_status.append(timed([git, "-C", copy, "status", "--porcelain"], base)[0])
            find.append(timed(["sh", "-c", f"find {copy}/Documents -type f | wc -l"], base)[0])
            target = rng.choice(files)
            with open(target, "ab") as f:
                f.write(b" remote edit %d" % round_)
            timed(sync_a, env_a)
            remote_edit.append(timed(sync_b, env_b)[0])
            relative = os.path.relpath(target, a)
            with open(os.path.join(a, relative), "rb") as f1, open(os.path.join(b, relative), "rb") as f2:
                if f1.read() != f2.read():
                    raise SystemExit(f"{relative} did not reach device B")
            local = os.path.join(b, os.path.relpath(rng.choice(files), a))
            with open(local, "ab") as f:
                f.write(b" local edit %d" % round_)
            local_edit.append(timed(sync_b, env_b)[0])
            timed(sync_a, env_a)
        results["noop"] = summary(noop)
        results["noop_first"] = summary(noop_first)
        results["remote_edit"] = summary(remote_edit)
        results["local_edit"] = summary(local_edit)
        if git_status:
            results["git_status"] = summary(git_status)
        results["find_wc"] = summary(find)
        for name in ["noop", "noop_first", "remote_edit", "local_edit", "git_status", "find_wc"]:
            if name in results:
                r = results[name]
                print(f"{name:12} median {r['median']:.3f} s  (min {r['min']:.3f}, max {r['max']:.3f}, {r['runs']} runs)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    finally:
        if server:
            server.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
