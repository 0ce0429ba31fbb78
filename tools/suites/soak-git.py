#!/usr/bin/env python3
"""Soak test: two devices run `xfer sync --watch` while device A's folder holds a real git
repository that is checked out back and forth between two revisions (docs/RELIABILITY.md,
"A git checkout under two daemons").

The repository is built from real sources: revision `one` is a package checkout's Sources and
Tests (from .build/checkouts), revision `two` the same tree as a developer would change it:
files edited, removed and added, a directory renamed, modes changed, a symlink added. Device
B's daemon starts before the storm; device A's starts before it and is stopped and started
again in the middle of it. Afterwards:

  - no daemon exited (a vanished file, a lock file or a half-written object is never fatal);
  - within --timeout seconds of the last checkout both folders hold the same directories
    (empty ones such as .git/refs/tags included), files, modes and symlinks, .git included.

    python3 tools/suites/soak-git.py [--switches 12] [--timeout 180] [--seed 1] [--configuration debug]
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git(repo, *args):
    done = subprocess.run(["git", "-C", repo, "-c", "user.name=soak", "-c", "user.email=soak@localhost", *args],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"soak-git: FAIL: git {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")


def build_repository(repo, source, rng):
    """Revision `one`: real sources; revision `two`: the same, changed as a developer would."""
    os.makedirs(repo)
    for part in ("Sources", "Tests"):
        if os.path.isdir(os.path.join(source, part)):
            shutil.copytree(os.path.join(source, part), os.path.join(repo, part), symlinks=True)
    git(repo, "init", "-q", "-b", "one")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    git(repo, "checkout", "-q", "-b", "two")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(repo) if "/.git" not in d + "/" for f in fs)
    for path in rng.sample(files, len(files) // 5):  # edits
        with open(path, "ab") as f:
            f.write(f"\n// changed on branch two ({rng.random()})\n".encode())
    for path in rng.sample(files, len(files) // 10):  # removals
        if os.path.exists(path):
            os.remove(path)
    for path in rng.sample(files, 5):  # modes
        if os.path.exists(path):
            os.chmod(path, 0o755)
    os.makedirs(os.path.join(repo, "Sources", "Added"), exist_ok=True)
    for index in range(30):  # additions
        with open(os.path.join(repo, "Sources", "Added", f"New{index}.swift"), "w") as f:
            f.write(f"// added on branch two\nlet value{index} = {rng.randrange(1 << 30)}\n" * (1 + index))
    directories = sorted({os.path.dirname(p) for p in files if os.path.exists(p) and os.path.dirname(p) != repo})
    moved = rng.choice(directories)
    if os.path.isdir(moved):
        os.rename(moved, moved + "Renamed")
    os.symlink("Sources/Added/New0.swift", os.path.join(repo, "link-to-new"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    git(repo, "checkout", "-q", "one")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--switches", type=int, default=12, help="checkouts in the storm")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to converge after the storm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--source", default=os.path.join(ROOT, ".build", "checkouts", "swift-argument-parser"),
                        help="a source tree whose Sources and Tests become the repository")
    parser.add_argument("--configuration", default="debug")
    parser.add_argument("--binary")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not shutil.which("git"):
        raise SystemExit("git is missing (apt-get install git)")
    if not os.path.isdir(args.source):
        raise SystemExit(f"{args.source} is missing; build first (swift build) or give --source")
    binary = args.binary or xferlab.xfer_binary(args.configuration)
    rng = random.Random(args.seed)
    with xferlab.Workspace("soak-git", keep=args.keep) as ws:
        data = ws.join("data")
        token = xferlab.create_account(binary, data, "soak")
        server = xferlab.Server(binary, data).start()
        daemons = []
        try:
            a, b = ws.join("a"), ws.join("b")
            os.makedirs(b)
            repo = os.path.join(a, "repo")
            build_repository(repo, args.source, rng)
            # Device B's daemon starts before the storm; device A's too, and again in its middle.
            daemons, _ = xferlab.start_daemons(binary, server.url, token, ws.path, [a, b])
            daemon_a = daemons[0]
            seconds, files = xferlab.converge(a, b, daemons, args.timeout)
            print(f"soak-git: {files} files ({repo}) on both devices after {seconds:.1f} s", flush=True)

            branch = "one"
            storm = time.time()
            for switch in range(args.switches):
                branch = "two" if branch == "one" else "one"
                git(repo, "checkout", "-q", branch)
                if switch == args.switches // 2:
                    daemon_a.stop()  # a daemon started in the middle of the storm
                    daemon_a.start()
                time.sleep(rng.uniform(0, 0.6))
                for daemon in daemons:
                    daemon.check()
            print(f"soak-git: {args.switches} checkouts in {time.time() - storm:.1f} s; device A's daemon restarted mid-storm", flush=True)
            seconds, files = xferlab.converge(a, b, daemons, args.timeout)
            print(f"soak-git: PASS: both folders identical ({files} files, branch {branch}) {seconds:.1f} s after the last checkout; "
                  f"no daemon exited", flush=True)
        finally:
            xferlab.stop_daemons(daemons)
            server.stop()


if __name__ == "__main__":
    main()
