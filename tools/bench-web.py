#!/usr/bin/env python3
"""The web view's downloads, measured: a large file and a package streamed from chunks to
curl, side by side in the same run with `xfer pull` of the same documents and with curl
fetching the same file from a plain static file server (Python's http.server, the floor of
serving bytes that already sit in one file). Reports wall seconds (median), MB/s and the
server's peak resident memory while each download ran.

    python3 tools/bench-web.py .build/release/xfer [--size-mib 1024] [--files 2000] [--runs 3] [--work DIR]

Use a release build (`swift build -c release --product xfer`); DIR should be on a real disk.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xferlab  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except Exception:  # noqa: BLE001
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


class PeakMemory:
    """Samples a process's resident memory every 20 ms while in use."""

    def __init__(self, pid):
        self.pid, self.peak, self.start, self.running = pid, 0, None, True
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self):
        while self.running:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.peak = max(self.peak, int(line.split()[1]))
                            self.start = self.start if self.start is not None else int(line.split()[1])
            except OSError:
                return
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def timed(command, pid=None):
    started = time.monotonic()
    if pid:
        with PeakMemory(pid) as memory:
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - started, (memory.start / 1024, memory.peak / 1024)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xfer")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work")
    args = parser.parse_args()
    xfer = os.path.abspath(args.xfer)
    work = tempfile.mkdtemp(prefix="xfer-bench-web-", dir=args.work)
    processes = []
    try:
        data, source = os.path.join(work, "data"), os.path.join(work, "source")
        os.makedirs(source)
        # A file of mixed content (half random, half text-like) and a package of small files.
        big = os.path.join(source, "big.bin")
        with open(big, "wb") as f:
            text = b"".join(f"line {i} of a log-like text that compresses\n".encode() for i in range(30000))[: 1 << 20]
            for i in range(args.size_mib):
                f.write(os.urandom(1 << 20) if i % 2 == 0 else text)
        package = os.path.join(source, "tree.pkg")
        for i in range(args.files):
            directory = os.path.join(package, f"d{i % 40}")
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, f"f{i}.txt"), "wb") as f:
                f.write(os.urandom(2000 + (i * 7919) % 60000))
        port, static_port = free_port(), free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([xfer, "serve", "--data", data, "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(server)
        wait_healthy(url + "/v1/health")
        with open(os.path.join(data, "admin-token")) as f:
            admin = f.read().strip()
        token = json.loads(subprocess.run([xfer, "account", "create", "bench", "--quota", "100G", "--server", url, "--token", admin,
                                           "--json"], capture_output=True, text=True, check=True).stdout)["token"]
        env = dict(os.environ, XFER_SERVER=url, XFER_TOKEN=token, XFER_STATE_DIR=os.path.join(work, "state"))
        subprocess.run([xfer, "push", big, "Documents/big.bin"], env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([xfer, "push", package, "Documents/tree.pkg"], env=env, check=True, stdout=subprocess.DEVNULL)
        # A browser's session, as a browser gets it (cookie jar by hand).
        jar = {}

        def fetch(path, form=None):
            request = urllib.request.Request(url + path, data=urllib.parse.urlencode(form).encode() if form else None,
                                             headers={"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items()),
                                                      "Sec-Fetch-Site": "same-origin"})
            opener = urllib.request.build_opener(NoRedirect)
            try:
                response = opener.open(request)
            except urllib.error.HTTPError as error:
                response = error
            for line in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = line.partition("=")
                jar[name] = rest.split(";")[0]
            return response.read().decode(errors="replace")

        page = fetch("/web/signin")
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        fetch("/web/signin", {"token": token, "csrf": csrf})
        cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        static = subprocess.Popen([sys.executable, "-m", "http.server", str(static_port), "--bind", "127.0.0.1", "--directory", source],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(static)
        wait_healthy(f"http://127.0.0.1:{static_port}/big.bin")
        out = os.path.join(work, "out")
        cases = [
            ("file: web view (curl)", ["curl", "-sf", "-H", f"Cookie: {cookie}", "-o", out, url + "/web/c/default/raw?path=Documents%2Fbig.bin"], server.pid, big),
            ("file: xfer pull", [xfer, "pull", "Documents/big.bin", out, "--force"], server.pid, big),
            ("file: static file server (curl)", ["curl", "-sf", "-o", out, f"http://127.0.0.1:{static_port}/big.bin"], None, big),
            ("package: web view as tar (curl)", ["curl", "-sf", "-H", f"Cookie: {cookie}", "-o", out + ".tar",
                                                 url + "/web/c/default/raw?path=Documents%2Ftree.pkg"], server.pid, None),
            ("package: xfer pull", [xfer, "pull", "Documents/tree.pkg", out + ".pkg", "--force"], server.pid, None),
        ]
        results = {name: [] for name, *_ in cases}
        for run in range(args.runs):
            for name, command, pid, expected in (cases if run % 2 == 0 else list(reversed(cases))):
                for leftover in [out, out + ".tar", out + ".pkg"]:
                    if os.path.isdir(leftover):
                        shutil.rmtree(leftover)
                    elif os.path.exists(leftover):
                        os.remove(leftover)
                seconds, peak = timed(command, pid) if "xfer pull" not in name else timed_env(command, env, pid)
                if expected and xferlab.sha256(out) != xferlab.sha256(expected):
                    raise RuntimeError(f"{name}: the bytes differ")
                results[name].append((seconds, peak))
        size = os.path.getsize(big)
        tree = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(package) for f in fs)
        print(f"file {size / 1e6:.0f} MB, package {args.files} files {tree / 1e6:.0f} MB; median of {args.runs}; "
              f"the server's resident memory when each began and its peak while it ran\n")
        print_table("download", results, lambda name: size if name.startswith("file") else tree)
    finally:
        stop(processes)
        shutil.rmtree(work, ignore_errors=True)


def print_table(first, results, amount):
    """One row per step: the median wall time of its (seconds, (MiB before, MiB peak) or None)
    runs, the rate of `amount(name)` bytes in it, and the server's memory."""
    print(f"| {first} | wall s | MB/s | server MiB before → peak |")
    print("|---|---|---|---|")
    for name, values in results.items():
        wall = statistics.median(v[0] for v in values)
        memory = [v[1] for v in values if v[1] is not None]
        shown = f"{max(m[0] for m in memory):.0f} → {max(m[1] for m in memory):.0f}" if memory else "—"
        print(f"| {name} | {wall:.2f} | {amount(name) / 1e6 / wall:.0f} | {shown} |")


def stop(processes):
    """Ends the servers a benchmark started (SIGTERM, then SIGKILL after 10 s)."""
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def timed_env(command, env, pid):
    started = time.monotonic()
    with PeakMemory(pid) as memory:
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started, (memory.start / 1024, memory.peak / 1024)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    main()
