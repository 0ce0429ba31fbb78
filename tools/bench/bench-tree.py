#!/usr/bin/env python3
"""A real source tree through xfer, side by side with a local `rsync -a` of the same tree in the
same run (these machines are noisy; only ratios measured together mean anything).

  first sync   `xfer sync A --once` of a fresh copy of TREE (every document new), against
               `rsync -a TREE COPY` into an empty directory          (target: within 5x)
  first pull   `xfer sync B --once` on a second, empty device (reported beside the same rsync)
  edit         two `xfer sync --watch` daemons over a tree of --files files (TREE copied as
               often as it takes); a few files edited on device A, timed from the save until
               their new bytes are on device B                       (target: under 1 s)

TREE defaults to a package checkout under .build/checkouts (swift-collections: ~840 files,
16 MB of real Swift sources, close in size to the swift-syntax checkout).

    python3 tools/bench/bench-tree.py [--tree DIR] [--runs 3] [--files 10000] [--edits 5] [--json FILE]

docs/PERFORMANCE.md, "A real source tree", reports its figures.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def copy_tree(source, destination):
    """A plain copy of TREE without its .git (what a user's folder holds)."""
    shutil.copytree(source, destination, symlinks=True, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)


def count_files(root):
    return sum(len(files) for _, _, files in os.walk(root))


def timed(command, env=None):
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return elapsed


def drop_written(path):
    """Writes the new files out so one run's dirty pages do not slow the next run's writes."""
    subprocess.run(["sync"], check=False)
    shutil.rmtree(path, ignore_errors=True)


def first_sync(binary, tree, work, run):
    """One fresh server and two fresh devices: A's first sync, then B's; returns seconds."""
    base = os.path.join(work, f"run{run}")
    data = os.path.join(base, "data")
    token = xferlab.create_account(binary, data, "bench")
    server = xferlab.Server(binary, data).start()
    try:
        a, b = os.path.join(base, "a"), os.path.join(base, "b")
        copy_tree(tree, a)
        os.makedirs(b)
        subprocess.run(["sync"], check=False)
        env = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_CONFIG=os.path.join(base, "none.json"))
        push = timed([binary, "sync", a, "--once", "--quiet"], dict(env, XFER_STATE_DIR=os.path.join(base, "state-a")))
        pull = timed([binary, "sync", b, "--once", "--quiet"], dict(env, XFER_STATE_DIR=os.path.join(base, "state-b")))
        check = subprocess.run(["diff", "-r", "--no-dereference", "-x", ".xfer-folder", "-x", ".xfer-staging", a, b], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"device B differs from device A:\n{check.stdout[:2000]}")
        return push, pull
    finally:
        server.stop()
        drop_written(base)


def rsync_copy(tree, work, run):
    source = os.path.join(work, f"rsync-source{run}")
    copy_tree(tree, source)
    target = os.path.join(work, f"rsync-copy{run}")
    subprocess.run(["sync"], check=False)
    seconds = timed(["rsync", "-a", source + "/", target + "/"])
    drop_written(source)
    drop_written(target)
    return seconds


def wait_for(predicate, timeout, step=0.005):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def edit_latency(binary, tree, work, files, edits):
    """Two watching daemons over a tree of `files` files; seconds from save on A to bytes on B."""
    base = os.path.join(work, "watch")
    data = os.path.join(base, "data")
    token = xferlab.create_account(binary, data, "bench")
    server = xferlab.Server(binary, data).start()
    daemons = []
    try:
        a, b = os.path.join(base, "a"), os.path.join(base, "b")
        copies = 0
        while not os.path.isdir(a) or count_files(a) < files:
            copy_tree(tree, os.path.join(a, f"copy{copies}"))
            copies += 1
        os.makedirs(b)
        total = count_files(a)
        daemons, _ = xferlab.start_daemons(binary, server.url, token, base, [a, b])
        started = time.perf_counter()
        if not wait_for(lambda: count_files(b) >= total, timeout=900, step=0.5):
            raise SystemExit(f"device B did not receive the {total} files in 15 minutes")
        converge = time.perf_counter() - started
        time.sleep(2)  # both daemons idle
        sources = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(a, "copy0")) for f in fs
                         if f.endswith(".swift"))
        latencies = []
        for round_ in range(edits):
            targets = sources[round_ * 3:round_ * 3 + 3]
            payloads = {}
            saved = time.perf_counter()
            for path in targets:
                with open(path, "ab") as f:
                    marker = f"\n// edit {round_} of {os.path.basename(path)}\n".encode()
                    f.write(marker)
                with open(path, "rb") as f:
                    payloads[os.path.join(b, os.path.relpath(path, a))] = f.read()

            def arrived():
                for remote, expected in payloads.items():
                    try:
                        with open(remote, "rb") as f:
                            if f.read() != expected:
                                return False
                    except OSError:
                        return False
                return True
            if not wait_for(arrived, timeout=60):
                raise SystemExit(f"edit round {round_} did not reach device B within 60 s")
            latencies.append(time.perf_counter() - saved)
            time.sleep(1)
        for daemon in daemons:
            daemon.check()
        return total, converge, latencies
    finally:
        xferlab.stop_daemons(daemons)
        server.stop()
        drop_written(base)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", default=os.path.join(ROOT, ".build", "checkouts", "swift-collections"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--files", type=int, default=10_000, help="files in the tree the edit test watches (0: skip it)")
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--configuration", default="release")
    parser.add_argument("--binary")
    parser.add_argument("--json")
    args = parser.parse_args()
    if not shutil.which("rsync"):
        raise SystemExit("rsync is missing (apt-get install rsync); it is the peer this benchmark compares with")
    if not os.path.isdir(args.tree):
        raise SystemExit(f"{args.tree} is not a directory; give a source tree with --tree (a checkout appears there after `swift build`)")
    binary = args.binary or xferlab.xfer_binary(args.configuration)
    with xferlab.Workspace("bench-tree") as ws:
        work = ws.path
        files = count_files(args.tree) - (count_files(os.path.join(args.tree, ".git")) if os.path.isdir(os.path.join(args.tree, ".git")) else 0)
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, dns, fs in os.walk(args.tree) if ".git" not in dp.split(os.sep)
                   for f in fs if not os.path.islink(os.path.join(dp, f)))
        print(f"tree: {args.tree} ({files} files, {size / 1e6:.1f} MB)", flush=True)
        pushes, pulls, rsyncs = [], [], []
        for run in range(args.runs):
            rsyncs.append(rsync_copy(args.tree, work, run))
            push, pull = first_sync(binary, args.tree, work, run)
            pushes.append(push)
            pulls.append(pull)
            print(f"run {run + 1}: rsync -a {rsyncs[-1]:.3f} s, xfer first sync {push:.3f} s, first pull {pull:.3f} s", flush=True)
        rsync, push, pull = min(rsyncs), min(pushes), min(pulls)
        results = {"tree": args.tree, "files": files, "bytes": size, "rsync_seconds": round(rsync, 3),
                   "first_sync_seconds": round(push, 3), "first_pull_seconds": round(pull, 3),
                   "first_sync_vs_rsync": round(push / rsync, 2), "first_pull_vs_rsync": round(pull / rsync, 2)}
        print(f"best of {args.runs}: rsync -a {rsync:.3f} s; first sync {push:.3f} s = {push / rsync:.1f}x rsync "
              f"({'PASS' if push <= 5 * rsync else 'MISS'} against 5x); first pull {pull:.3f} s = {pull / rsync:.1f}x", flush=True)
        if args.files > 0:
            total, converge, latencies = edit_latency(binary, args.tree, work, args.files, args.edits)
            results.update({"watch_files": total, "watch_converge_seconds": round(converge, 2),
                            "edit_seconds": [round(x, 3) for x in latencies], "edit_median_seconds": round(statistics.median(latencies), 3)})
            print(f"watch: {total} files reached device B in {converge:.1f} s; edit of 3 files, save on A to bytes on B: "
                  f"median {statistics.median(latencies):.3f} s, max {max(latencies):.3f} s "
                  f"({'PASS' if statistics.median(latencies) < 1 else 'MISS'} against 1 s)", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
