#!/usr/bin/env python3
"""`xfer mount` measured where users are, side by side in one run: `ls -lR` of a container of
many documents; the first byte of a 1 MiB read at a random offset of a large document, and the
bytes that moved for it; a sequential read of the whole document through the mount (its cache
empty, then warm) against `xfer pull` of it (durable, as a pull always is) and against
`rclone mount` over xfer's own WebDAV (`--vfs-cache-mode full`, its cache empty); and the
on-disk cache holding its limit under a read of more than it.

    python3 tools/bench/bench-mount.py .build/release/xfer [--size-mib 4096] [--documents 100000] [--runs 3] [--work DIR]

Use a release build (`swift build -c release --product xfer`). The work directory defaults to
the checkout's bench-data/ (ignored by git), on the file system the checkout lives on.
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

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def large_file(path, mib):
    """Half random, half log-like text, so compression has something to do on half of it."""
    text = b"".join(f"line {i} of a log-like text that compresses\n".encode() for i in range(30000))[: 1 << 20]
    with open(path, "wb") as f:
        for i in range(mib):
            f.write(os.urandom(1 << 20) if i % 2 == 0 else os.urandom(16) + text[16:])


def many_documents(root, count):
    """`count` small files, 1,000 a directory, synced as as many documents."""
    for n in range(count):
        directory = os.path.join(root, "Documents", "d%03d" % (n // 1000))
        if n % 1000 == 0:
            os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "f%04d.txt" % (n % 1000)), "wb") as f:
            f.write(b"document %d\n" % n)


def timed(command):
    started = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def drop_cache(path):
    """Drops the kernel's page cache of one file, so a read goes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


class Bench:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.xfer = os.path.abspath(args.xfer)
        self.server = xferlab.Server(self.xfer, os.path.join(work, "data"), extra=["--rate-limit", "0"])
        self.server.start(timeout=30)
        with open(os.path.join(work, "data", "admin-token")) as f:
            self.admin = f.read().strip()
        token = json.loads(subprocess.run(
            [self.xfer, "account", "create", "bench", "--quota", "1T", "--server", self.server.url, "--token", self.admin, "--json"],
            capture_output=True, text=True, check=True).stdout)["token"]
        self.token = token
        self.state = os.path.join(work, "state")
        self.env = dict(os.environ, XFER_SERVER=self.server.url, XFER_TOKEN=token, XFER_STATE_DIR=self.state,
                        XFER_CONFIG=os.path.join(work, "none.json"))
        self.results = {}
        self.checked = set()

    def downloaded(self):
        metrics = subprocess.run(["curl", "-sf", "-H", f"Authorization: Bearer {self.admin}", self.server.url + "/metrics"],
                                 capture_output=True, text=True, check=True).stdout
        line = next(line for line in metrics.splitlines() if line.startswith("xfer_download_bytes_total "))
        return float(line.split()[-1])

    def record(self, name, value):
        self.results.setdefault(name, []).append(value)

    def xfer_run(self, *arguments):
        subprocess.run([self.xfer, *arguments], env=self.env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def mount(self, name, *extra):
        return xferlab.Mount([self.xfer, "mount", os.path.join(self.work, name), "-q", *extra], os.path.join(self.work, name), self.env)

    def clear_cache(self):
        shutil.rmtree(os.path.join(self.state, "chunk-cache"), ignore_errors=True)

    def prepare(self):
        self.big = os.path.join(self.work, "big.bin")
        large_file(self.big, self.args.size_mib)
        self.xfer_run("push", "-q", self.big, "Documents/big.bin")
        folder = os.path.join(self.work, "folder")
        many_documents(folder, self.args.documents)
        self.xfer_run("sync", folder, "--once", "-q")
        shutil.rmtree(folder)

    def listing(self):
        self.clear_cache()
        mounted = self.mount("mnt")
        try:
            self.record("mount ready (listing every document)", mounted.ready)
            self.record("ls -lR of the mount", timed(["ls", "-lR", mounted.point]))
        finally:
            mounted.stop()

    def random_read(self):
        self.clear_cache()
        mounted = self.mount("mnt")
        try:
            offset = random.randrange(self.args.size_mib // 4, self.args.size_mib * 3 // 4)
            before = self.downloaded()
            started = time.monotonic()
            with open(os.path.join(mounted.point, "Documents", "big.bin"), "rb") as f:
                f.seek(offset << 20)
                first = f.read(1)
                self.record("first byte of a 1 MiB read at a random offset", time.monotonic() - started)
                f.read((1 << 20) - 1)
            if not first:
                raise RuntimeError("the read at an offset returned nothing")
            self.record("MB moved for that 1 MiB read", (self.downloaded() - before) / 1e6)
        finally:
            mounted.stop()

    def sequential(self):
        path = os.path.join(self.work, "out.bin")
        steps = [("xfer pull (durable)", self.pull), ("xfer mount, cache empty", self.read_mount),
                 ("rclone mount over xfer WebDAV, cache empty", self.read_rclone)]
        for name, step in (steps if len(self.results.get(steps[0][0], [])) % 2 == 0 else reversed(steps)):
            self.record(name, step(path))
        self.record("xfer mount, read again (cache warm)", self.read_mount(path, clear=False))

    def pull(self, path):
        if os.path.exists(path):
            os.remove(path)
        started = time.monotonic()
        self.xfer_run("pull", "-q", "Documents/big.bin", path, "--force")
        seconds = time.monotonic() - started
        if xferlab.sha256(path) != self.digest:
            raise RuntimeError("xfer pull: the bytes differ")
        os.remove(path)
        return seconds

    def read_mount(self, path, clear=True):
        """A whole read through a mount whose cache holds the file twice over (none for a start)."""
        if clear:
            self.clear_cache()
        mounted = self.mount("mnt", "--cache-size", f"{2 * self.args.size_mib}M")
        try:
            return self.read_whole(os.path.join(mounted.point, "Documents", "big.bin"))
        finally:
            mounted.stop()

    def read_rclone(self, path):
        cache = os.path.join(self.work, "rclone-cache")
        shutil.rmtree(cache, ignore_errors=True)
        obscured = subprocess.run(["rclone", "obscure", self.token], capture_output=True, text=True, check=True).stdout.strip()
        remote = f":webdav,url='{self.server.url}/dav/default',vendor=other,user=bench,pass='{obscured}':"
        mounted = xferlab.Mount(["rclone", "mount", remote, os.path.join(self.work, "rmnt"), "--vfs-cache-mode", "full",
                           "--cache-dir", cache, "--read-only"], os.path.join(self.work, "rmnt"))
        try:
            return self.read_whole(os.path.join(mounted.point, "big.bin"))  # WebDAV shows Documents/ as its root
        finally:
            mounted.stop()

    def read_whole(self, path):
        """Seconds to read `path` through (to /dev/null); the bytes are checked once per tool."""
        seconds = timed(["sh", "-c", 'cat "$0" > /dev/null', path])
        if path not in self.checked:
            if xferlab.sha256(path) != self.digest:
                raise RuntimeError(f"{path}: the bytes differ")
            self.checked.add(path)
        return seconds

    def cache_limit(self):
        self.clear_cache()
        limit = max(64, self.args.size_mib // 8)
        mounted = self.mount("mnt", "--cache-size", f"{limit}M")
        try:
            self.read_whole(os.path.join(mounted.point, "Documents", "big.bin"))
        finally:
            mounted.stop()
        cache = os.path.join(self.state, "chunk-cache")
        used = sum(os.path.getsize(os.path.join(cache, name)) for name in os.listdir(cache) if name.endswith(".seg"))
        self.record(f"cache after reading {self.args.size_mib} MiB with --cache-size {limit}M (MiB on disk)", used / (1 << 20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xfer")
    parser.add_argument("--size-mib", type=int, default=4096)
    parser.add_argument("--documents", type=int, default=100000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default=os.path.join(CHECKOUT, "bench-data"))
    args = parser.parse_args()
    for tool in ("rclone", "fusermount3"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (tools/setup.sh installs it)")
    os.makedirs(args.work, exist_ok=True)
    work = tempfile.mkdtemp(prefix="xfer-bench-mount-", dir=args.work)
    bench = None
    try:
        bench = Bench(args, work)
        bench.prepare()
        bench.digest = xferlab.sha256(bench.big)
        drop_cache(bench.big)
        fs = subprocess.run(["stat", "-f", "-c", "%T", work], capture_output=True, text=True).stdout.strip()
        print(f"{args.documents} documents and one of {args.size_mib} MiB (half random, half text) on {fs}; median of {args.runs}\n")
        for _ in range(args.runs):
            bench.listing()
            bench.random_read()
            bench.sequential()
        bench.cache_limit()
        width = max(len(name) for name in bench.results)
        pull = statistics.median(bench.results["xfer pull (durable)"])
        for name, values in bench.results.items():
            value = statistics.median(values)
            unit = "" if name.startswith("MB moved") or name.endswith("(MiB on disk)") else " s"
            speed = f"   {args.size_mib * 1.048576 / value:7.0f} MB/s  {pull / value:4.2f}× pull" if name in (
                "xfer pull (durable)", "xfer mount, cache empty", "xfer mount, read again (cache warm)",
                "rclone mount over xfer WebDAV, cache empty") else ""
            print(f"{name:<{width}}  {value:8.3f}{unit}{speed}")
    finally:
        if bench:
            bench.server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
