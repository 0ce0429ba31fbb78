#!/usr/bin/env python3
"""The first sync of a real tree, plain and end-to-end encrypted, side by side.

For each build (BINARY, and any --binary NAME=PATH) and each container kind (a plain one, and
one made with `xfer container create --encrypted`), alternating, ROUNDS times: a fresh server,
SOURCE copied into folder A, then as whole `xfer sync DIR --once` processes

  first-a    device A's first sync (everything uploaded)
  first-b    device B's first sync into an empty folder (everything downloaded)
  noop-a     device A again: nothing to do

then A and B compared with `diff -r`. Wall seconds and peak MiB (`/usr/bin/time`) per step;
medians at the end.

    python3 tools/bench/bench-first-sync.py .build/release/xfer --source /mnt/bench/peers/tree/v1 --rounds 2 \\
        [--binary before=OLD] [--work DIR]

Put --work on the file system the data lives on (not a tmpfs), as a user's folder would be.
docs/PERFORMANCE.md, "First syncs of many documents".
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def timed(binary, args, env):
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M", binary] + args, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"xfer {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    wall, kib = result.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) // 1024


def round_once(binary, source, work, encrypted):
    server, base = xferlab.fresh_server(binary, work)
    try:
        a = dict(base, XFER_STATE_DIR=os.path.join(work, "state-a"))
        b = dict(base, XFER_STATE_DIR=os.path.join(work, "state-b"))
        if encrypted:
            for env in (a, b):
                env["XFER_CONTAINER"] = "sealed"
            subprocess.run([binary, "container", "create", "sealed", "--encrypted"], env=dict(a, XFER_PASSPHRASE="bench"),
                           check=True, capture_output=True)
            subprocess.run([binary, "key", "unlock"], env=dict(b, XFER_PASSPHRASE="bench"), check=True, capture_output=True)
        folder_a, folder_b = os.path.join(work, "A"), os.path.join(work, "B")
        shutil.copytree(source, folder_a, symlinks=True)
        os.makedirs(folder_b)
        steps = {
            "first-a": timed(binary, ["sync", folder_a, "--once", "--quiet"], a),
            "first-b": timed(binary, ["sync", folder_b, "--once", "--quiet"], b),
            "noop-a": timed(binary, ["sync", folder_a, "--once", "--quiet"], a),
        }
        diff = subprocess.run(["diff", "-r", "-x", ".xfer*", folder_a, folder_b], capture_output=True, text=True)
        if diff.returncode != 0:
            raise SystemExit(f"the two folders differ:\n{diff.stdout[:2000]}")
        return steps
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--source", required=True, help="the tree to sync (copied into folder A each round)")
    parser.add_argument("--binary", dest="others", action="append", default=[], metavar="NAME=PATH", help="another build, for A/B pairs")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", help="where folders and servers go (default: beside --source's parent, a temporary directory)")
    options = parser.parse_args()
    builds = [("xfer", options.binary)] + [tuple(other.split("=", 1)) for other in options.others]
    work = options.work or tempfile.mkdtemp(prefix="xfer-first-sync-", dir=os.path.dirname(os.path.abspath(options.source.rstrip("/"))))
    results = {}
    try:
        for round_number in range(options.rounds):
            order = [(name, path, encrypted) for name, path in builds for encrypted in (False, True)]
            if round_number % 2:
                order.reverse()
            for name, path, encrypted in order:
                label = f"{name}{' e2e' if encrypted else ''}"
                steps = round_once(path, options.source, os.path.join(work, "run"), encrypted)
                print(f"round {round_number + 1} {label}: " + ", ".join(f"{step} {wall:.2f} s {mib} MiB" for step, (wall, mib) in steps.items()),
                      flush=True)
                for step, figures in steps.items():
                    results.setdefault((label, step), []).append(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nmedians (wall s / peak MiB):")
    for (label, step), figures in results.items():
        print(f"  {label:16} {step:8} {statistics.median(f[0] for f in figures):7.2f} s {statistics.median(f[1] for f in figures):5.0f} MiB")


if __name__ == "__main__":
    main()
