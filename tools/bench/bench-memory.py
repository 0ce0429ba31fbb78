#!/usr/bin/env python3
"""Peak memory of a push, a no-op push and a pull of one large package, against a real server.

For each build given, in turn, on a fresh server and state directory: `xfer push SRC bench.data`
(first push), the same push again (no-op), and `xfer pull bench.data OUT` into an empty
directory. Each is timed by /usr/bin/time (wall, user, system seconds and peak resident KiB);
the client's resident memory is also sampled every 20 ms and its largest sample shown split
into anonymous memory and mapped files (the program's own pages and spilled arrays).

    tools/bench/bench-memory.py .build/release/xfer --source DIR [--binary before=OLD/xfer] [--work W]
    tools/bench/bench-memory.py --make-files 1000000 DIR     # 1,000 directories of 1,000 small text files

The work directory (server data, state, the pulled copy) needs as many free inodes as the
source has files.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def make_files(count, root):
    """`count` small text files of 20-150 words, 1,000 a directory, each unlike the others."""
    rng = random.Random(7)
    words = [b"w%d" % i for i in range(5000)]
    for n in range(count):
        directory = os.path.join(root, "d%04d" % (n // 1000))
        if n % 1000 == 0:
            os.makedirs(directory, exist_ok=True)
        data = b" ".join(rng.choice(words) for _ in range(rng.randint(20, 150))) + b"\n%d\n" % n
        fd = os.open(os.path.join(directory, "f%04d.txt" % (n % 1000)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.close(fd)


def timed(binary, args, env):
    """Runs xfer under /usr/bin/time; returns (wall, user, system, peak KiB, largest sample)."""
    process = subprocess.Popen(["/usr/bin/time", "-f", "%e %U %S %M", binary] + args, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child, largest = None, (0, 0, 0)
    while process.poll() is None:
        try:
            if child is None:
                child = int(open(f"/proc/{process.pid}/task/{process.pid}/children").read().split()[0])
            fields = {}
            for line in open(f"/proc/{child}/status"):
                name = line.split(":")[0]
                if name in ("VmRSS", "RssAnon", "RssFile"):
                    fields[name] = int(line.split()[1]) // 1024
            sample = (fields.get("VmRSS", 0), fields.get("RssAnon", 0), fields.get("RssFile", 0))
            largest = max(largest, sample)
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.02)
    out, err = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"xfer {' '.join(args)} failed:\n{out[-2000:]}\n{err[-2000:]}")
    wall, user, system, peak = err.strip().splitlines()[-1].split()
    return float(wall), float(user), float(system), int(peak), largest


def measure(name, binary, source, work):
    server, env = xferlab.fresh_server(binary, work)
    env["XFER_STATE_DIR"] = os.path.join(work, "state")
    rows = []
    try:
        for step, args in (("first push", ["push", source, "bench.data", "--json"]),
                           ("no-op push", ["push", source, "bench.data", "--json"]),
                           ("pull", ["pull", "bench.data", os.path.join(work, "out"), "--json"])):
            wall, user, system, peak, (rss, anon, mapped) = timed(binary, args, env)
            rows.append((name, step, wall, user, system, peak / 1024, rss, anon, mapped))
            print(f"{name:>10} {step:>10}: {wall:6.2f} s wall, {user:6.2f} user, {system:6.2f} sys, "
                  f"peak {peak / 1024:6.1f} MiB (largest sample {rss} MiB: {anon} anonymous, {mapped} mapped)", flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?")
    parser.add_argument("--source", help="the package to push")
    parser.add_argument("--binary", dest="others", action="append", default=[], metavar="NAME=PATH",
                        help="another build, measured after this one")
    parser.add_argument("--work", default="/var/tmp/xfer-bench-memory", help="work directory (removed after)")
    parser.add_argument("--make-files", type=int, metavar="N", help="make N small files under the directory given, and stop")
    options, rest = parser.parse_known_args()
    if options.make_files:
        target = options.binary or (rest[0] if rest else None)
        if not target:
            parser.error("--make-files N DIR")
        make_files(options.make_files, target)
        return
    if not options.binary or not options.source:
        parser.error("give a build and --source DIR")
    builds = [("xfer", options.binary)] + [tuple(other.split("=", 1)) for other in options.others]
    rows = []
    for name, binary in builds:
        rows += measure(name, os.path.abspath(binary), os.path.abspath(options.source), options.work)
    print("\n| build | step | wall s | user s | sys s | peak MiB |\n|---|---|---|---|---|---|")
    for name, step, wall, user, system, peak, *_ in rows:
        print(f"| {name} | {step} | {wall:.2f} | {user:.2f} | {system:.2f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
