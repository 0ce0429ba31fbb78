#!/usr/bin/env python3
"""End-to-end benchmark of xfer serve / push / pull on loopback (release build).

Prints each measurement with its target and PASS/MISS; every ratio is against a ceiling
measured in the same run on this machine. Called by tools/bench/bench-e2e.sh, which builds xfer
and prepares the data; see docs/PERFORMANCE.md, "End to end: serve, push, pull".

    tools/bench/bench-e2e.py XFER_BINARY DATA_1G DATA_4G WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from xferlab import Server  # noqa: E402

xfer, data1g, data4g, work = sys.argv[1:5]
results = []


def report(ok, text):
    line = ("PASS  " if ok else "MISS  ") + text
    results.append(line)
    print(line, flush=True)



def run(args, env, check=True):
    done = subprocess.run([xfer] + args, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"bench: xfer {' '.join(args)} failed ({done.returncode}): {done.stderr}{done.stdout}")
    return done


def run_json(args, env):
    return json.loads(run(args + ["--json"], env).stdout)


def peak_rss(args, env):
    """Runs xfer under /usr/bin/time; returns (json output, peak RSS in MiB)."""
    rss_file = os.path.join(work, "rss")
    done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, xfer] + args + ["--json"],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench: xfer {' '.join(args)} failed: {done.stderr}")
    return json.loads(done.stdout), int(open(rss_file).read().split()[-1]) / 1024


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
server = Server(xfer, f"{work}/data", log_level="error")
try:
    server.start()
    token = subprocess.run([xfer, "account", "create", "bench", "--quota", "1T", "--data", f"{work}/data"],
                           capture_output=True, text=True, check=True).stdout.strip()
    base_env = dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token,
                    XFER_CONFIG=f"{work}/none.json")

    def device(name):
        return dict(base_env, XFER_STATE_DIR=f"{work}/state-{name}")

    # Ceilings measured now: the core pipeline (chunk + SHA-256 + zstd 3) and zstd decompression.
    subprocess.run(["cat", data1g], stdout=subprocess.DEVNULL)
    pipeline = []
    for _ in range(2):
        summary = json.loads(run(["chunk", "--summary", "--compress", "--json", data1g], base_env).stdout)["summary"]
        pipeline.append(summary["bytes"] / summary["seconds"])
    pipeline_rate = max(pipeline)
    bench = subprocess.run(["zstd", "-b3", "-e3", "-i3", data1g], capture_output=True, text=True)
    speeds = re.findall(r"([\d.]+) MB/s", bench.stderr + bench.stdout)
    zstd_decompress = float(speeds[-1]) * 1e6 if speeds else float("nan")
    dd = subprocess.run(["dd", "if=/dev/zero", f"of={work}/dd.bin", "bs=1M", "count=1024", "conv=fsync"],
                        capture_output=True, text=True)
    disk_write = 2**30 / float(re.findall(r"copied, ([\d.]+) s", dd.stderr)[-1])
    os.remove(f"{work}/dd.bin")
    print(f"ceilings: disk write with fsync (dd) {disk_write / 1e9:.3f} GB/s", flush=True)
    print(f"ceilings: core pipeline chunk+hash+zstd {pipeline_rate / 1e9:.3f} GB/s; "
          f"zstd -d (level 3, one core) {zstd_decompress / 1e9:.3f} GB/s", flush=True)

    # Initial push of 1 GiB.
    size = os.path.getsize(data1g)
    src = f"{work}/one/real.bin"
    os.makedirs(os.path.dirname(src))
    os.link(data1g, src) if os.stat(data1g).st_dev == os.stat(work).st_dev else shutil.copy(data1g, src)
    pushed = run_json(["push", src, "real.bin"], device("a"))
    push_rate = size / pushed["seconds"]
    report(push_rate >= 0.8 * pipeline_rate,
           f"initial push 1 GiB: {push_rate / 1e9:.3f} GB/s = {push_rate / pipeline_rate:.2f} x core pipeline "
           f"[target >= 0.8]; sent {pushed['bytes_sent'] / 2**20:.0f} MiB in {pushed['chunks_sent']} chunks")

    # Pull into an empty directory.
    pulled = run_json(["pull", "real.bin", f"{work}/pull1/real.bin"], device("b"))
    pull_rate = size / pulled["seconds"]
    report(pull_rate >= 0.8 * 2 * zstd_decompress,
           f"pull 1 GiB into an empty directory: {pull_rate / 1e9:.3f} GB/s = {pull_rate / (2 * zstd_decompress):.2f} x "
           f"(2 x zstd decompression) [target >= 0.8]; = {pull_rate / disk_write:.2f} x this disk's fsync'd write rate")

    # A 100-byte insertion in the middle of the 1 GiB file: bytes on the wire both ways.
    edited = f"{work}/edit/real.bin"
    os.makedirs(os.path.dirname(edited))
    with open(data1g, "rb") as f, open(edited, "wb") as out:
        out.write(f.read(size // 2))
        out.write(os.urandom(100))
        shutil.copyfileobj(f, out, 1 << 20)
    run_json(["push", edited, "edited.bin"], device("e"))
    run_json(["pull", "edited.bin", f"{work}/edit-copy.bin"], device("f"))
    with open(edited, "r+b") as f:
        f.seek(size // 3)
        f.write(os.urandom(100))  # make sure the insertion below is a new change
    with open(edited, "rb") as f:
        content = f.read()
    with open(edited, "wb") as f:
        f.write(content[: size // 2 + 7] + os.urandom(100) + content[size // 2 + 7:])
    up = run_json(["push", edited, "edited.bin"], device("e"))
    down = run_json(["pull", "edited.bin", f"{work}/edit-copy.bin"], device("f"))
    wire = up["bytes_sent"] + up.get("manifest_bytes", 0) + down["bytes_fetched"] + down.get("manifest_bytes", 0)
    report(wire < 2**20, f"edit of a 1 GiB file (100 bytes overwritten + 100 inserted): {wire / 1024:.0f} KiB on the wire both ways "
           f"(push {up['chunks_sent']} chunks, pull {down['chunks_fetched']} chunks) [target < 1 MiB]")

    # No-op push of 10,000 files.
    tree = f"{work}/tree"
    for i in range(10000):
        d = f"{tree}/d{i % 100}"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/f{i}.txt", "w") as f:
            f.write(f"file {i}\n" * (i % 50 + 1))
    run_json(["push", tree, "tree.pkg"], device("t"))
    walls = []
    for _ in range(3):
        start = time.monotonic()
        noop = run_json(["push", tree, "tree.pkg"], device("t"))
        walls.append(time.monotonic() - start)
    report(min(walls) < 0.5 and noop["chunks_sent"] == 0,
           f"no-op push of 10,000 files: {min(walls):.3f} s wall (best of 3, process start included) [target < 0.5 s]")

    # Metadata of a 4 GiB push visible to another client's ls.
    big = f"{work}/four/real-4g.bin"
    os.makedirs(os.path.dirname(big))
    os.link(data4g, big) if os.stat(data4g).st_dev == os.stat(work).st_dev else shutil.copy(data4g, big)
    subprocess.run(["cat", big], stdout=subprocess.DEVNULL)
    rss_file = os.path.join(work, "rss-push")
    start = time.monotonic()
    push = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, xfer, "push", big, "big4.bin", "--json"],
                            env=device("g"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = None
    while time.monotonic() - start < 30:
        listing = json.loads(run(["ls", "--json"], device("h")).stdout)
        if any(d["path"] == "big4.bin" for d in listing["documents"]):
            seen = time.monotonic() - start
            break
    out, err = push.communicate()
    if push.returncode != 0:
        sys.exit(f"bench: 4 GiB push failed: {err}")
    # The watcher is a separate process: its own start-up counts against it, so also time one ls alone.
    t = time.monotonic()
    run(["ls", "--json"], device("h"))
    ls_alone = time.monotonic() - t
    report(seen is not None and seen - ls_alone < 0.1,
           f"4 GiB push visible in another client's ls {seen * 1000:.0f} ms after the push process started "
           f"(one ls process alone takes {ls_alone * 1000:.0f} ms; difference {(seen - ls_alone) * 1000:.0f} ms) [target < 100 ms]")
    push_rss = int(open(rss_file).read().split()[-1]) / 1024
    report(push_rss <= 200, f"push of 4 GiB: {push_rss:.0f} MiB peak RSS [target <= 200 MiB]; "
           f"{json.loads(out)['bytes'] / json.loads(out)['seconds'] / 1e9:.3f} GB/s")
    pulled4, pull_rss = peak_rss(["pull", "big4.bin", f"{work}/pull4.bin"], device("i"))
    report(pull_rss <= 200, f"pull of 4 GiB: {pull_rss:.0f} MiB peak RSS [target <= 200 MiB]; "
           f"{pulled4['bytes'] / pulled4['seconds'] / 1e9:.3f} GB/s")
finally:
    server.stop()
    shutil.rmtree(work, ignore_errors=True)

print("\n".join(["", "summary:"] + results))
