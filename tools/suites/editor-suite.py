#!/usr/bin/env python3
"""How real programs save, under two `xfer sync --watch` daemons (docs/RELIABILITY.md,
"Editors and other writers").

Device A's folder is written the way real programs write; device B only syncs. After each
scenario both folders must hold the same files, modes and links (what the built-in ignore
rules leave out aside: vim's swap and backup files), no daemon may have exited, and no version
the server keeps of the edited file may be torn (each must be one of the contents the writer
meant to save). Reports, per scenario, the seconds from the last write to convergence and the
passes each daemon ran.

  vim            swap file and `4913` probe, original renamed to `file~`, new file written, backup removed
  atomic-rename  a temporary file written, fsynced and renamed over the original (most GUI editors)
  libreoffice    a `.~lock.NAME#` file for the editing session, the document saved by rename, lock removed
  in-place       truncate and rewrite in pieces, 100 ms apart (a program saving without a temporary)
  append-growing a 40 MiB file appended to for 3 s while the daemon pushes it
  rename-500     a directory of 500 files renamed
  root-removed   the synced folder moved away for 3 s and put back (nothing may be deleted anywhere)

    python3 tools/suites/editor-suite.py [--configuration release] [--rounds 3] [--json FILE]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402

IGNORED_SUFFIXES = (".swp", ".swx", "~")


def ignored(name):
    """What xfer's built-in ignore rules leave out, for the comparison (IgnoreRules.defaultPatterns)."""
    return name.endswith(IGNORED_SUFFIXES) or name == "4913" or name.startswith(".#") or name.startswith("._")


def write(path, data, mode=None):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if mode is not None:
        os.chmod(path, mode)


class Suite:
    def __init__(self, binary, work, rng):
        self.binary, self.work, self.rng = binary, work, rng
        data = os.path.join(work, "data")
        self.token = xferlab.create_account(binary, data, "editors")
        self.server = xferlab.Server(binary, data).start()
        self.a, self.b = os.path.join(work, "a"), os.path.join(work, "b")
        os.makedirs(os.path.join(self.a, "Documents"))
        os.makedirs(self.b)
        self.daemons, self.env = xferlab.start_daemons(binary, self.server.url, self.token, work, [self.a, self.b])
        self.results = []

    def doc(self, *parts):
        return os.path.join(self.a, "Documents", *parts)

    def settle(self, name, meant=None, path=None, prefix=False):
        """Waits for convergence; checks every kept version of `path` is one of `meant` (with
        `prefix`, a prefix of the file as it ends)."""
        passes = [d.passes() for d in self.daemons]
        seconds, files = xferlab.converge(self.a, self.b, self.daemons, timeout=120, skip=ignored)
        torn = 0
        versions = 0
        if prefix:
            with open(path, "rb") as f:
                final = f.read()
        if meant is not None or prefix:
            document = os.path.relpath(path, self.a)
            out = subprocess.run([self.binary, "versions", document, "--json"], env=dict(self.env, XFER_STATE_DIR=os.path.join(self.work, "state-x")),
                                 capture_output=True, text=True, check=True)
            for version in json.loads(out.stdout)["versions"]:
                if version["state"] == "deleted" or version["state"] == "uploading":
                    continue
                versions += 1
                target = os.path.join(self.work, "check")
                shutil.rmtree(target, ignore_errors=True)
                subprocess.run([self.binary, "pull", document, target, "--version", str(version["version"]), "--force", "--quiet"],
                               env=dict(self.env, XFER_STATE_DIR=os.path.join(self.work, "state-x")), check=True, capture_output=True)
                with open(target, "rb") as f:
                    kept = f.read()
                if (prefix and not final.startswith(kept)) or (not prefix and kept not in meant):
                    torn += 1
        if torn:
            raise SystemExit(f"{name}: {torn} of {versions} kept versions of {path} are not a content the writer saved")
        row = {"scenario": name, "converged_seconds": round(seconds, 2), "files": files,
               "passes_a": self.daemons[0].passes() - passes[0], "passes_b": self.daemons[1].passes() - passes[1],
               "versions_checked": versions}
        self.results.append(row)
        print(f"{name:15} converged {seconds:5.2f} s after the last write; passes A {row['passes_a']}, B {row['passes_b']}"
              + (f"; {versions} kept versions, none torn" if versions else ""), flush=True)

    # Scenarios -------------------------------------------------------------------------

    def vim(self, round_):
        path = self.doc("notes.txt")
        saved = self.saved.setdefault(path, set())
        if not os.path.exists(path):
            write(path, b"first line\n")
            saved.add(b"first line\n")
            self.settle("vim (create)")
        new = open(path, "rb").read() + f"vim edit {round_}\n".encode()
        saved.add(new)
        swap = self.doc(".notes.txt.swp")
        write(swap, b"swap" * 1024)
        probe = self.doc("4913")
        write(probe, b"")
        os.remove(probe)
        os.rename(path, path + "~")
        write(path, new, mode=0o644)
        os.remove(path + "~")
        time.sleep(0.3)
        os.remove(swap)
        self.settle("vim", meant=saved, path=path)

    def atomic_rename(self, round_):
        path = self.doc("report.md")
        old = open(path, "rb").read() if os.path.exists(path) else None
        new = (old or b"# Report\n") + f"paragraph {round_}\n".encode() * 50
        temporary = self.doc(f".report.md.tmp{self.rng.randrange(1 << 20)}")
        write(temporary, new, mode=0o644)
        os.rename(temporary, path)
        self.saved.setdefault(path, set()).add(new)
        self.settle("atomic-rename", meant=self.saved[path], path=path)

    def libreoffice(self, round_):
        path = self.doc("budget.ods")
        lock = self.doc(".~lock.budget.ods#")
        write(lock, b",user,host,23.11.2026 18:00,file:///home/user/.config/libreoffice/4;")
        time.sleep(0.5)
        new = bytes(self.rng.randrange(256) for _ in range(20_000))
        temporary = self.doc(f"lu{self.rng.randrange(1 << 20)}.tmp")
        write(temporary, new, mode=0o600)
        os.rename(temporary, path)
        time.sleep(0.2)
        os.remove(lock)
        self.saved.setdefault(path, set()).add(new)
        self.settle("libreoffice", meant=self.saved[path], path=path)

    def in_place(self, round_):
        path = self.doc("data.csv")
        new = "".join(f"{round_},{row},{self.rng.random()}\n" for row in range(2000)).encode()
        with open(path, "r+b" if os.path.exists(path) else "wb") as f:
            f.truncate(0)
            for start in range(0, len(new), len(new) // 4 + 1):
                f.write(new[start:start + len(new) // 4 + 1])
                f.flush()
                time.sleep(0.1)
        self.saved.setdefault(path, set()).add(new)
        # A version pushed between two writes would be torn: none may be kept.
        self.settle("in-place", meant=self.saved[path], path=path)

    def append_growing(self, round_):
        path = self.doc("growing.log")
        if not os.path.exists(path):
            write(path, self.rng.randbytes(40 << 20))
        started = time.time()
        with open(path, "ab") as f:
            while time.time() - started < 3:
                f.write(f"{time.time()} line appended while the daemon pushes\n".encode() * 100)
                f.flush()
                time.sleep(0.05)
        self.settle("append-growing", path=path, prefix=True)

    def rename_500(self, round_):
        source = self.doc(f"batch{round_}")
        if not os.path.isdir(source):
            os.makedirs(source)
            for index in range(500):
                write(os.path.join(source, f"item{index:03d}.txt"), f"item {index} of round {round_}\n".encode() * 3)
            self.settle("rename-500 (create)")
        os.rename(source, source + "-renamed")
        self.settle("rename-500")

    def root_removed(self, round_):
        before = xferlab.tree_state(self.b, ignored)
        away = self.a + ".away"
        os.rename(self.a, away)
        time.sleep(3)
        if xferlab.tree_state(self.b, ignored) != before:
            raise SystemExit("root-removed: device B changed while device A's folder was away")
        os.rename(away, self.a)
        path = self.doc(f"after-return-{round_}.txt")
        time.sleep(6)  # the daemon looks for the folder every 5 s, then watches it afresh
        write(path, b"written after the folder came back\n")
        self.settle("root-removed")

    def run(self, rounds):
        self.saved = {}
        for round_ in range(rounds):
            for scenario in (self.vim, self.atomic_rename, self.libreoffice, self.in_place, self.append_growing,
                             self.rename_500, self.root_removed):
                scenario(round_)

    def close(self):
        xferlab.stop_daemons(self.daemons)
        self.server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configuration", default="release")
    parser.add_argument("--binary")
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    binary = args.binary or xferlab.xfer_binary(args.configuration)
    with xferlab.Workspace("editors", keep=args.keep) as ws:
        suite = Suite(binary, ws.path, random.Random(args.seed))
        try:
            suite.run(args.rounds)
        finally:
            suite.close()
        print(f"editor-suite: PASS: {len(suite.results)} scenarios converged, no daemon exited, no torn version kept", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(suite.results, f, indent=2)


if __name__ == "__main__":
    main()
