#!/usr/bin/env python3
"""`GET /metrics` read by a parser nobody here wrote: prometheus-client's text parser (PyPI,
installed if missing). Starts `xfer serve`, pushes, pulls, pushes a conflict and runs gc with
the CLI, then scrapes with the admin token and checks the families and their values; without
the token the route answers 401.

    python3 tools/suites/metrics-test.py [--xfer .build/debug/xfer]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def ensure_parser():
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "prometheus-client==0.21.1"], check=True)



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xfer", default=".build/debug/xfer")
    args = parser.parse_args()
    ensure_parser()
    from prometheus_client.parser import text_string_to_metric_families

    xfer = os.path.abspath(args.xfer)
    work = tempfile.mkdtemp(prefix="xfer-metrics-")
    server = xferlab.Server(xfer, os.path.join(work, "data"))
    url = server.url
    failures = []
    try:
        server.start(timeout=30)
        admin = open(os.path.join(work, "data", "admin-token")).read().strip()
        token = json.loads(subprocess.run([xfer, "account", "create", "m", "--server", url, "--token", admin, "--json"],
                                          capture_output=True, text=True, check=True).stdout)["token"]

        def cli(*arguments, device="a"):
            env = dict(os.environ, XFER_SERVER=url, XFER_TOKEN=token, XFER_STATE_DIR=os.path.join(work, "state-" + device))
            subprocess.run([xfer, *arguments], env=env, check=True, capture_output=True)

        source = os.path.join(work, "f.bin")
        with open(source, "wb") as f:
            f.write(os.urandom(300_000))
        cli("push", source, "Documents/f.bin")
        cli("pull", "Documents/f.bin", os.path.join(work, "b.bin"), device="b")
        # A conflict: both edit from version 1; b's is later and wins, a's is kept as a conflict.
        with open(source, "ab") as f:
            f.write(b"a")
        os.utime(source, (1_000, 1_000))
        cli("push", source, "Documents/f.bin")
        with open(os.path.join(work, "b.bin"), "ab") as f:
            f.write(b"b")
        cli("push", os.path.join(work, "b.bin"), "Documents/f.bin", device="b")
        subprocess.run([xfer, "gc", "--server", url, "--token", admin, "--grace", "0s"], check=True, capture_output=True)

        try:
            urllib.request.urlopen(url + "/metrics", timeout=10)
            failures.append("/metrics answered without a token")
        except urllib.error.HTTPError as error:
            if error.code != 401:
                failures.append(f"/metrics without a token: {error.code}, not 401")
        request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {admin}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            content_type = response.headers["Content-Type"]
            text = response.read().decode()
        if not content_type.startswith("text/plain"):
            failures.append(f"content type {content_type}")
        families = {family.name: family for family in text_string_to_metric_families(text)}
        value = {}
        for family in families.values():
            for sample in family.samples:
                value.setdefault(sample.name, 0)
                value[sample.name] += sample.value

        def expect(what, ok):
            print(("ok   " if ok else "FAIL ") + what)
            if not ok:
                failures.append(what)

        expect("commits counted (3)", value.get("xfer_commits_total") == 3)
        expect("the conflict counted (1)", value.get("xfer_conflicts_total") == 1)
        expect("chunks received and stored", value.get("xfer_chunks_received_total", 0) >= value.get("xfer_chunks_stored_total", 0) > 0)
        expect("upload and download bytes", value.get("xfer_upload_bytes_total", 0) > 300_000 and value.get("xfer_download_bytes_total", 0) > 0)
        expect("gc counted", value.get("xfer_gc_runs_total") == 1)
        expect("one account, its bytes", value.get("xfer_accounts") == 1 and value.get("xfer_used_bytes", 0) >= 300_000)
        expect("no poll waiting", value.get("xfer_feed_waiters") == 0)
        routes = {sample.labels.get("http_route") for family in families.values() for sample in family.samples}
        expect("request latency histograms by route template",
               "http_server_request_duration" in families and families["http_server_request_duration"].type == "histogram"
               and "/v1/containers/{container}/commit" in routes)
        expect("no route label holds a path or a token", not any(r and ("Documents/" in r or token in r) for r in routes))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        sys.exit(1)
    print("metrics: prometheus-client parsed the scrape; every check passed")


if __name__ == "__main__":
    main()
