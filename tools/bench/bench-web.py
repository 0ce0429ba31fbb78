#!/usr/bin/env python3
"""The web view's downloads, measured: a large file and a package streamed from chunks to
curl, side by side in the same run with `xfer pull` of the same documents and with curl
fetching the same file from a plain static file server (Python's http.server, the floor of
serving bytes that already sit in one file). Reports wall seconds (median), MB/s and the
server's peak resident memory while each download ran.

    python3 tools/bench/bench-web.py .build/release/xfer [--size-mib 1024] [--files 2000] [--runs 3] [--work DIR]

Use a release build (`swift build -c release --product xfer`); DIR should be on a real disk.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
from xferlab import free_port  # noqa: E402
from benchlib import print_table, stop, timed, timed_env, wait_healthy  # noqa: E402


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
    server, processes = None, []
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
        server = xferlab.Server(xfer, data, log_level="warning")
        static_port = free_port()
        url = server.url
        server.start(timeout=30)
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
            ("file: web view (curl)", ["curl", "-sf", "-H", f"Cookie: {cookie}", "-o", out, url + "/web/c/default/raw?path=Documents%2Fbig.bin"], server.process.pid, big),
            ("file: xfer pull", [xfer, "pull", "Documents/big.bin", out, "--force"], server.process.pid, big),
            ("file: static file server (curl)", ["curl", "-sf", "-o", out, f"http://127.0.0.1:{static_port}/big.bin"], None, big),
            ("package: web view as tar (curl)", ["curl", "-sf", "-H", f"Cookie: {cookie}", "-o", out + ".tar",
                                                 url + "/web/c/default/raw?path=Documents%2Ftree.pkg"], server.process.pid, None),
            ("package: xfer pull", [xfer, "pull", "Documents/tree.pkg", out + ".pkg", "--force"], server.process.pid, None),
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
        if server:
            server.stop()
        stop(processes)
        shutil.rmtree(work, ignore_errors=True)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    main()
