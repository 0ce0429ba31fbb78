#!/usr/bin/env python3
"""WebDAV throughput, measured: xfer serve's WebDAV beside a peer WebDAV server in the same run
(`rclone serve webdav` over a plain directory, the Debian package the test suite installs
anyway), both driven by the same clients: curl for one large file up (PUT) and down (GET), and
`rclone copy` for a tree of small files up. `xfer push` and `xfer pull` of the same file show
what xfer's own protocol does with it. Reports wall seconds (median, alternating order), MB/s
and each server's peak resident memory while the step ran.

Every upload is of bytes no server has seen (a new random file or tree per round), so xfer's
deduplication gets nothing for free; xfer cuts, hashes, compresses and stores as for any
version, and makes every upload durable before it answers.

    python3 tools/bench/bench-webdav.py .build/release/xfer [--size-mib 256] [--files 500] [--runs 3] [--work DIR]

Use a release build (`swift build -c release --product xfer`); DIR should be on a real disk.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
import benchlib  # noqa: E402


def random_file(path, mib):
    with open(path, "wb") as f:
        text = b"".join(f"line {i} of a log-like text that compresses\n".encode() for i in range(30000))[: 1 << 20]
        for i in range(mib):
            f.write(os.urandom(1 << 20) if i % 2 == 0 else os.urandom(16) + text[16:])


def random_tree(root, files):
    for i in range(files):
        directory = os.path.join(root, f"d{i % 20}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{i}.txt"), "wb") as f:
            f.write(os.urandom(2000 + (i * 7919) % 60000))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xfer")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work")
    args = parser.parse_args()
    if not shutil.which("rclone"):
        sys.exit("rclone is not installed (apt-get install rclone)")
    xfer = os.path.abspath(args.xfer)
    work = tempfile.mkdtemp(prefix="xfer-bench-webdav-", dir=args.work)
    server, processes = None, []
    try:
        data, peer_root, source = os.path.join(work, "data"), os.path.join(work, "peer"), os.path.join(work, "source")
        for directory in (peer_root, source):
            os.makedirs(directory)
        server = xferlab.Server(xfer, data, extra=["--rate-limit", "0", "--uploads-per-token", "0"], log_level="warning")
        peer_port = xferlab.free_port()
        url, peer = server.url, f"http://127.0.0.1:{peer_port}"
        server.start(timeout=30)
        with open(os.path.join(data, "admin-token")) as f:
            admin = f.read().strip()
        token = json.loads(subprocess.run([xfer, "account", "create", "bench", "--quota", "100G", "--server", url, "--token", admin,
                                           "--json"], capture_output=True, text=True, check=True).stdout)["token"]
        rclone_peer = subprocess.Popen(["rclone", "serve", "webdav", peer_root, "--addr", f"127.0.0.1:{peer_port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(rclone_peer)
        benchlib.wait_healthy(peer + "/")
        env = dict(os.environ, XFER_SERVER=url, XFER_TOKEN=token, XFER_STATE_DIR=os.path.join(work, "state"))
        obscured = subprocess.run(["rclone", "obscure", token], capture_output=True, text=True, check=True).stdout.strip()
        remotes = {"xfer": f":webdav,url='{url}/dav/box',vendor=other,user=bench,pass='{obscured}':",
                   "rclone": f":webdav,url='{peer}',vendor=other:"}
        auth = ["-u", f"bench:{token}"]
        out = os.path.join(work, "out")
        results = {}

        def record(name, seconds, peak):
            results.setdefault(name, []).append((seconds, peak))

        for run in range(args.runs):
            big, pushed = os.path.join(source, f"big{run}.bin"), os.path.join(source, f"pushed{run}.bin")
            random_file(big, args.size_mib)
            random_file(pushed, args.size_mib)
            tree = os.path.join(source, f"tree{run}")
            random_tree(tree, args.files)
            steps = [
                ("file PUT: xfer WebDAV (curl)", ["curl", "-sf", *auth, "-T", big, f"{url}/dav/box/big{run}.bin"], server.process.pid, env),
                ("file PUT: rclone serve webdav (curl)", ["curl", "-sf", "-T", big, f"{peer}/big{run}.bin"], rclone_peer.pid, None),
                ("file: xfer push", [xfer, "push", "--container", "pushed", pushed, f"big{run}.bin"], server.process.pid, env),
                ("tree in: rclone copy → xfer WebDAV", ["rclone", "copy", tree, remotes["xfer"] + f"tree{run}", "--transfers", "4"], server.process.pid, None),
                ("tree in: rclone copy → rclone serve webdav", ["rclone", "copy", tree, remotes["rclone"] + f"tree{run}", "--transfers", "4"],
                 rclone_peer.pid, None),
            ]
            for name, command, pid, environment in (steps if run % 2 == 0 else list(reversed(steps))):
                record(name, *(benchlib.timed_env(command, environment, pid) if environment else benchlib.timed(command, pid)))
            downs = [
                ("file GET: xfer WebDAV (curl)", ["curl", "-sf", *auth, "-o", out, f"{url}/dav/box/big{run}.bin"], server.process.pid, None),
                ("file GET: rclone serve webdav (curl)", ["curl", "-sf", "-o", out, f"{peer}/big{run}.bin"], rclone_peer.pid, None),
                ("file: xfer pull", [xfer, "pull", "--container", "pushed", f"big{run}.bin", out, "--force"], server.process.pid, env),
            ]
            for name, command, pid, environment in (downs if run % 2 == 0 else list(reversed(downs))):
                if os.path.exists(out):
                    os.remove(out)
                record(name, *(benchlib.timed_env(command, environment, pid) if environment else benchlib.timed(command, pid)))
                if xferlab.sha256(out) != xferlab.sha256(pushed if "xfer pull" in name else big):
                    raise RuntimeError(f"{name}: the bytes differ")
            check = subprocess.run(["rclone", "check", tree, remotes["xfer"] + f"tree{run}", "--size-only"], capture_output=True, text=True)
            if check.returncode != 0:
                raise RuntimeError(f"rclone check of the tree in xfer failed: {check.stderr[-500:]}")
        size = args.size_mib << 20
        tree_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(source, "tree0")) for f in fs)
        print(f"file {size / 1e6:.0f} MB (half random, half text), tree {args.files} files {tree_bytes / 1e6:.1f} MB; median of {args.runs}; "
              f"the server's resident memory when each step began and its peak while it ran\n")
        benchlib.print_table("step", results, lambda name: tree_bytes if name.startswith("tree") else size)
    finally:
        if server:
            server.stop()
        benchlib.stop(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
