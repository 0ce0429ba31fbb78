#!/usr/bin/env python3
"""xfer's WebDAV (`/dav/CONTAINER/`) driven by clients nobody here wrote: the litmus compliance
suite (Debian package `litmus`) and rclone's webdav backend (Debian package `rclone`).

Starts `xfer serve` and then:
  1. litmus, the groups given by --groups (default: basic copymove props locks); every one must pass
     with no failure; its summary lines are printed (docs/RELIABILITY.md records them);
  2. rclone copies a real tree in (this repository's Sources/ and docs/ and some odd names: spaces,
     accents, `#`, `%`, an empty file, a 3 MB file of several chunks), `rclone check --download`
     compares every byte, and `xfer sync --once` of the container into an empty folder holds
     the same tree (diff -r);
  3. the other way: a file pushed with `xfer push` is fetched with `rclone copy` and compared;
  4. a rename and a deletion made with rclone reach `xfer sync`.

    python3 tools/suites/webdav-test.py [--xfer .build/debug/xfer] [--groups basic,copymove,props,locks]
"""
import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def run(command, env=None, cwd=None, check=True):
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"webdav-test: {' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def make_tree(root, repository):
    tree = os.path.join(root, "tree")
    shutil.copytree(os.path.join(repository, "Sources"), os.path.join(tree, "Sources"))
    shutil.copytree(os.path.join(repository, "docs"), os.path.join(tree, "docs"))
    odd = os.path.join(tree, "odd names")
    os.makedirs(odd)
    for name in ["naïve café.txt", "100% done.md", "hash #1.txt", "plus+and&amp.txt", "Ünïcödé ✓.txt"]:
        with open(os.path.join(odd, name), "w") as f:
            f.write(f"the file called {name}\n")
    open(os.path.join(odd, "empty"), "w").close()
    with open(os.path.join(tree, "big.bin"), "wb") as f:
        f.write(os.urandom(3 << 20))
    return tree


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xfer", default=".build/debug/xfer")
    parser.add_argument("--groups", default="basic,copymove,props,locks")
    args = parser.parse_args()
    repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    xfer = os.path.abspath(args.xfer)
    work = tempfile.mkdtemp(prefix="xfer-webdav-")
    data = os.path.join(work, "data")
    token = run([xfer, "account", "create", "dav", "--data", data]).stdout.strip()
    server = xferlab.Server(xfer, data)
    url = server.url
    failures = []

    def expect(what, ok):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    try:
        server.start()

        # 1. litmus
        litmus_dir = os.path.join(work, "litmus")
        os.makedirs(litmus_dir)
        env = dict(os.environ, TESTS=" ".join(args.groups.split(",")))
        done = run(["litmus", f"{url}/dav/litmus/", "dav", token], env=env, cwd=litmus_dir, check=False)
        summaries = re.findall(r"<- summary for `(\w+)': of (\d+) tests run: (\d+) passed, (\d+) failed", done.stdout)
        for group, ran, passed, failed in summaries:
            print(f"litmus {group}: {passed} of {ran} passed, {failed} failed")
        for group in args.groups.split(","):
            row = next((s for s in summaries if s[0] == group), None)
            expect(f"litmus {group} passes every test", row is not None and row[3] == "0")
        if failures:
            print(done.stdout[-6000:])

        # 2. rclone copies a real tree in; rclone check and xfer sync see the same bytes
        tree = make_tree(work, repository)
        obscured = run(["rclone", "obscure", token]).stdout.strip()
        rclone_env = dict(os.environ, RCLONE_CONFIG_XFER_TYPE="webdav", RCLONE_CONFIG_XFER_URL=f"{url}/dav/box",
                          RCLONE_CONFIG_XFER_VENDOR="other", RCLONE_CONFIG_XFER_USER="dav", RCLONE_CONFIG_XFER_PASS=obscured,
                          RCLONE_CONFIG=os.path.join(work, "rclone.conf"))
        run(["rclone", "copy", tree, "xfer:tree"], env=rclone_env)
        checked = run(["rclone", "check", "--download", tree, "xfer:tree"], env=rclone_env, check=False)
        expect("rclone check --download matches every file", checked.returncode == 0)
        if checked.returncode != 0:
            print(checked.stderr[-3000:])
        listed = run(["rclone", "lsf", "-R", "xfer:tree"], env=rclone_env).stdout.split("\n")
        expect("rclone lists the odd names", "odd names/naïve café.txt" in listed and "odd names/hash #1.txt" in listed)

        xfer_env = dict(os.environ, XFER_SERVER=url, XFER_TOKEN=token, XFER_CONTAINER="box",
                        XFER_STATE_DIR=os.path.join(work, "state"), XFER_CONFIG=os.path.join(work, "none.json"))
        synced = os.path.join(work, "synced")
        os.makedirs(synced)
        run([xfer, "sync", synced, "--once"], env=xfer_env)
        same = run(["diff", "-r", tree, os.path.join(synced, "Documents", "tree")], check=False)
        expect("xfer sync of the container holds the tree rclone copied, byte for byte", same.returncode == 0)
        if same.returncode != 0:
            print(same.stdout[-3000:])
        pulled = os.path.join(work, "big.pulled")
        run([xfer, "pull", "Documents/tree/big.bin", pulled], env=xfer_env)
        expect("xfer pull of one document is byte-identical", filecmp.cmp(pulled, os.path.join(tree, "big.bin"), shallow=False))

        # 3. the other way: pushed with xfer, fetched with rclone
        pushed = os.path.join(work, "pushed.bin")
        with open(pushed, "wb") as f:
            f.write(os.urandom(700_000))
        run([xfer, "push", pushed, "Documents/pushed.bin"], env=xfer_env)
        fetched = os.path.join(work, "fetched")
        run(["rclone", "copy", "xfer:pushed.bin", fetched], env=rclone_env)
        expect("a file pushed with xfer is fetched whole with rclone",
               filecmp.cmp(pushed, os.path.join(fetched, "pushed.bin"), shallow=False))

        # 4. a rename and a deletion made with rclone reach xfer sync
        run(["rclone", "moveto", "xfer:tree/docs/CLI.md", "xfer:tree/docs/CLI renamed.md"], env=rclone_env)
        run(["rclone", "delete", "xfer:tree/odd names/empty"], env=rclone_env)
        run([xfer, "sync", synced, "--once"], env=xfer_env)
        docs = os.path.join(synced, "Documents", "tree", "docs")
        expect("the rename reached xfer sync", os.path.exists(os.path.join(docs, "CLI renamed.md"))
               and not os.path.exists(os.path.join(docs, "CLI.md"))
               and filecmp.cmp(os.path.join(docs, "CLI renamed.md"), os.path.join(tree, "docs", "CLI.md"), shallow=False))
        expect("the deletion reached xfer sync", not os.path.exists(os.path.join(synced, "Documents", "tree", "odd names", "empty")))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        sys.exit(f"webdav-test: {len(failures)} check(s) failed: {failures}")
    print("webdav-test: every check passed")


if __name__ == "__main__":
    main()
