#!/usr/bin/env python3
"""The server's embedded chunk store under load: push and gc of one large file and of many
small files, files (inodes) per GiB stored, and a push while another process writes heavily
to the same file system. Each binary given runs the same steps on the same data in the same
run (release builds; these machines are noisy, so compare within one run).

    python3 tools/bench/bench-store.py [--size-mib 1024] [--small 100000] [--writer-mib 2048]
                                 [--binary LABEL=PATH ...] [--json FILE]

Without --binary it measures the release build (`swift build -c release --product xfer`).
Give an older build as a second --binary to compare (for example the one-file-per-chunk store
this replaced, docs/PERFORMANCE.md, "The embedded chunk store").

Steps, each against a fresh server (`--keep-versions 0 --keep-days 0`, so a deleted
document's chunks are garbage at once):
- big: push a SIZE file of random bytes; count the data directory's files; pull it into an
  empty place; `rm` it; `gc --grace 0`.
- small: the same with a directory of SMALL files of 1–4 KiB (a package: each file at least
  one chunk).
- writer: push a 256 MiB file alone, then again (new bytes) while another process writes
  WRITER MiB to a file on the same file system without syncing (the dirty pages a `syncfs`
  would have to flush before the push could finish).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402

MiB = 1 << 20


def tree_counts(root):
    files = directories = size = 0
    for base, dirs, names in os.walk(root):
        directories += len(dirs)
        for name in names:
            files += 1
            size += os.lstat(os.path.join(base, name)).st_size
    return files, directories, size


class Bench:
    def __init__(self, binary, ws, label):
        self.binary, self.ws, self.label = binary, ws, label
        self.count = 0

    def server(self):
        self.count += 1
        data = self.ws.join(f"{self.label}-{self.count}", "data")
        os.makedirs(os.path.dirname(data), exist_ok=True)
        server = xferlab.Server(self.binary, data, extra=["--keep-versions", "0", "--keep-days", "0"]).start(timeout=120)
        self.admin = open(os.path.join(data, "admin-token")).read().strip()
        code, out, err = xferlab.run_xfer(self.binary, ["account", "create", f"b{self.count}", "--quota", "1T"],
                                          server.url, self.admin, self.ws.join(f"{self.label}-{self.count}", "admin"))
        if code != 0:
            raise SystemExit(f"FAIL account create: {err}")
        self.token = out.strip()
        self.state = self.ws.join(f"{self.label}-{self.count}", "state")
        return server, data

    def timed(self, server, args, token=None, tolerate=False):
        start = time.time()
        code, out, err = xferlab.run_xfer(self.binary, args, server.url, token or self.token, self.state, timeout=3600)
        if code != 0:
            if tolerate:  # an older build's failure is a result to report, not a reason to stop
                return "failed: " + (out.strip() or err.strip())[-200:]
            raise SystemExit(f"FAIL {self.label} {' '.join(args)}: {err[-400:]} {out[-400:]}")
        return round(time.time() - start, 3)

    def push_then_gc(self, source, name):
        server, data = self.server()
        try:
            push = self.timed(server, ["push", source, name, "--json"])
            files, directories, stored = tree_counts(data)
            out = self.ws.join(f"{self.label}-{self.count}", "out", name)
            pull = self.timed(server, ["pull", name, out, "--json"], tolerate=True)
            subprocess.run(["rm", "-rf", out], check=True)
            self.timed(server, ["rm", name, "--json"])
            gc = self.timed(server, ["gc", "--grace", "0", "--json"], token=self.admin)
            after, _, left = tree_counts(data)
            return {"push_s": push, "pull_s": pull, "gc_s": gc, "files": files, "directories": directories,
                    "stored_mib": round(stored / MiB, 1), "files_per_gib": round(files / (stored / (1 << 30)), 1),
                    "files_after_gc": after, "stored_after_gc_mib": round(left / MiB, 1)}
        finally:
            server.stop()

    def under_writer(self, sources, writer_mib):
        server, data = self.server()
        try:
            alone = self.timed(server, ["push", sources[0], "alone.bin", "--json"])
            hog = self.ws.join(f"{self.label}-hog.bin")
            writer = subprocess.Popen([sys.executable, "-c", WRITER, hog, str(writer_mib)])
            time.sleep(1.0)  # let dirty pages pile up first
            busy = self.timed(server, ["push", sources[1], "busy.bin", "--json"])
            writer.wait()
            os.unlink(hog)
            return {"push_alone_s": alone, "push_with_writer_s": busy, "slowdown": round(busy / alone, 2)}
        finally:
            server.stop()


# Writes MIB mebibytes of incompressible bytes to a file as fast as it can, never syncing.
WRITER = """
import os, sys
block = os.urandom(8 << 20)
with open(sys.argv[1], "wb") as f:
    for i in range(int(sys.argv[2]) // 8):
        f.write(block[i % 7:] + block[:i % 7])
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--writer-mib", type=int, default=2048)
    parser.add_argument("--binary", action="append", default=[], help="LABEL=PATH (repeatable)")
    parser.add_argument("--json")
    args = parser.parse_args()
    binaries = [b.split("=", 1) for b in args.binary] or [["release", xferlab.xfer_binary("release")]]
    rng = random.Random(11)
    results = {}
    with xferlab.Workspace("store") as ws:
        big = ws.join("big.bin")
        xferlab.write_random(big, args.size_mib * MiB, rng)
        small = ws.join("small")
        for index in range(args.small):
            directory = os.path.join(small, f"{index // 1000:03d}")
            if index % 1000 == 0:
                os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, f"f{index}.dat"), "wb") as f:
                f.write(rng.randbytes(rng.randrange(1024, 4096)))
        sources = [ws.join("w1.bin"), ws.join("w2.bin")]
        for source in sources:
            xferlab.write_random(source, 256 * MiB, rng)
        for label, binary in binaries:
            bench = Bench(binary, ws, label)
            results[label] = {"big": bench.push_then_gc(big, "big.bin"),
                              "small": bench.push_then_gc(small, "small"),
                              "writer": bench.under_writer(sources, args.writer_mib)}
            print(label, json.dumps(results[label]), flush=True)
    report = {"size_mib": args.size_mib, "small_files": args.small, "writer_mib": args.writer_mib, "results": results}
    xferlab.report(args.json, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
