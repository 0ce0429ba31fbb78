#!/usr/bin/env python3
"""Change-feed latency benchmark: push start on one client -> change at a waiting client.

For each document size, ITERATIONS times: a waiting client holds a long poll open
(GET /v1/containers/default/changes?after=CURSOR&wait=30), then `xfer push` starts as a new
process; the latency is the time from spawning the push to the waiting client's answer. The
push announces the document right after its lstat walk, before reading any data, so the
latency should not depend on the document's size. Also reports the latency net of one xfer
process start (measured in the same run with `xfer --version`). Target: under 50 ms.

    tools/bench/bench-e2e.sh feed [ITERATIONS]   (runs: tools/bench/bench-feed.py XFER_BINARY DATA_1G WORK_DIR ITERATIONS)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from xferlab import Server  # noqa: E402

xfer, data1g, work, iterations = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)



server = Server(xfer, f"{work}/data", log_level="warning")
try:
    server.start()
    token = subprocess.run([xfer, "account", "create", "bench", "--data", f"{work}/data", "--quota", "100G"],
                           capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_STATE_DIR=f"{work}/state",
               XFER_CONFIG=f"{work}/none.json")

    def cursor():
        with urllib.request.urlopen(urllib.request.Request(
                f"{server.url}/v1/containers/default/documents?limit=1",
                headers={"Authorization": f"Bearer {token}"})) as answer:
            return json.load(answer)["cursor"]

    # Process start of one xfer command, to report the latency net of it.
    starts = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([xfer, "--version"], capture_output=True, check=True)
        starts.append(time.perf_counter() - t0)
    process_start = min(starts)

    small = f"{work}/small.bin"
    with open(small, "wb") as f:
        f.write(os.urandom(4096))
    medium = f"{work}/medium.bin"
    with open(medium, "wb") as f:
        f.write(os.urandom(64 << 20))
    big = f"{work}/big.bin"
    shutil.copyfile(data1g, big)
    print(f"xfer process start (xfer --version, best of 5): {process_start * 1000:.1f} ms")
    failures = 0
    for label, path in [("4 KiB", small), ("64 MiB", medium), ("1 GiB", big)]:
        latencies = []
        states = {}
        for i in range(iterations):
            with open(path, "r+b") as f:  # a different first 8 bytes each time: every push makes a version
                f.write(os.urandom(8))
            after = cursor()
            arrived = {}

            def wait():
                request = urllib.request.Request(
                    f"{server.url}/v1/containers/default/changes?after={after}&wait=30",
                    headers={"Authorization": f"Bearer {token}"})
                with urllib.request.urlopen(request, timeout=60) as answer:
                    body = json.load(answer)
                arrived["time"] = time.perf_counter()
                arrived["body"] = body

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.2)  # the long poll is open and waiting
            t0 = time.perf_counter()
            push = subprocess.Popen([xfer, "push", path, f"Documents/{label.replace(' ', '')}.bin", "--quiet"], env=env)
            waiter.join()
            push.wait()
            if push.returncode != 0:
                sys.exit(f"bench: push failed ({push.returncode})")
            change = max(arrived["body"]["changes"], key=lambda c: c["version"])
            # A small document may already be committed when the waiter reads the feed; a big
            # one is still uploading: the change arrives before its data has moved.
            if change["state"] not in ("uploading", "current") or change["size"] != os.path.getsize(path):
                sys.exit(f"bench: the first change is not this push's: {change}")
            states[change["state"]] = states.get(change["state"], 0) + 1
            latencies.append(arrived["time"] - t0)
        median = statistics.median(latencies)
        worst = max(latencies)
        ok = median < 0.050
        failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'MISS'}  {label:>6}: push start -> waiting client  median {median * 1000:5.1f} ms, "
              f"max {worst * 1000:5.1f} ms ({iterations} runs; net of process start: median {(median - process_start) * 1000:5.1f} ms; "
              f"seen as {', '.join(f'{k} x{v}' for k, v in sorted(states.items()))})  target < 50 ms", flush=True)
finally:
    server.stop()
sys.exit(1 if failures else 0)
