#!/usr/bin/env python3
"""The fixed cost of an `xfer` process: start, parse the command line, run an offline command
(`xfer chunk` of a 6-byte file, and `xfer --help`), build against build, alternated, median of
--runs each. Release builds; nothing here needs a server.

    python3 tools/bench/bench-start.py NEW/xfer [--before OLD/xfer] [--runs 40]

docs/PERFORMANCE.md, "The fixed cost of a process", reports its figures.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--before", help="another build, timed in turn with the first")
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    builds = {"xfer": os.path.abspath(args.binary)}
    if args.before:
        builds["before"] = os.path.abspath(args.before)
    with tempfile.TemporaryDirectory(prefix="xfer-start-") as work:
        small = os.path.join(work, "small.txt")
        with open(small, "w") as f:
            f.write("hello\n")
        commands = {"chunk FILE": ["chunk", small], "--help": ["--help"]}
        print("| command, ms (median of %d) | %s |" % (args.runs, " | ".join(builds)))
        print("|---|" + "---|" * len(builds))
        for label, command in commands.items():
            times = {name: [] for name in builds}
            for _ in range(args.runs):
                for name, path in builds.items():
                    started = time.perf_counter()
                    subprocess.run([path] + command, capture_output=True, check=True)
                    times[name].append(time.perf_counter() - started)
            print("| %s | %s |" % (label, " | ".join("%.1f" % (1000 * statistics.median(times[n])) for n in builds)))


if __name__ == "__main__":
    main()
