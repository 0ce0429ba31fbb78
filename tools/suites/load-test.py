#!/usr/bin/env python3
"""Load test on loopback: N concurrent clients (real `xfer` processes) push and pull distinct
and shared documents against one `xfer serve` for a bounded time.

Each client owns one document, which it edits and pushes, and pulls back through a second
device; all clients also edit and push a few shared documents (concurrent edits become
conflict versions, never errors) and pull them. At the end every owned document must pull
byte-identical to its owner's last push, every shared document must be one of the contents
pushed to it, and `xfer verify` on the server must be clean.

Reported: operations and HTTP requests per second, p50/p99 latency per HTTP request as the
server measured it (it logs each request with its time at debug level; the log is parsed),
p50/p99 latency per operation (whole `xfer` process, start included), errors, and the
server's peak resident memory (VmHWM).

    python3 tools/suites/load-test.py --clients 50 --seconds 60                 # the full run
    python3 tools/suites/load-test.py --clients 20 --seconds 10                 # CI
"""
import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402


def percentile(values, p):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--shared", type=int, default=4, help="documents every client edits")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configuration", default="release", choices=["debug", "release"])
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    binary = xferlab.xfer_binary(args.configuration)
    lock = threading.Lock()
    latencies = {"push": [], "pull": []}
    errors = []
    shared_pushed = {f"shared{i}.bin": set() for i in range(args.shared)}
    owned_last = {}
    with xferlab.Workspace("load") as ws:
        data = ws.join("data")
        os.makedirs(data, exist_ok=True)
        token = xferlab.create_account(binary, data, "load", quota="1T")
        # At debug level the server logs one line per request: they are counted at the end.
        # Every client here shares one token, where real devices have one each: the per-token
        # limits are off, so what is measured is the server under many devices, not the limiter.
        server = xferlab.Server(binary, data, extra=["--rate-limit", "0", "--uploads-per-token", "0"], log_level="debug").start()
        log_path = server.log.name
        deadline = time.time() + args.seconds

        def client(index):
            rng = random.Random(args.seed * 1000 + index)
            own = ws.join(f"c{index}", "own.bin")
            xferlab.write_random(own, rng.randrange(64_000, 1_000_000), rng)
            shared_local = ws.join(f"c{index}", "shared.bin")
            while time.time() < deadline:
                roll = rng.random()
                if roll < 0.35:
                    xferlab.edit_file(own, rng)
                    op, args_ = "push", ["push", own, f"own{index}.bin", "--quiet"]
                    content = xferlab.sha256(own)
                elif roll < 0.55:
                    name = f"shared{rng.randrange(len(shared_pushed))}.bin"
                    xferlab.write_random(shared_local, rng.randrange(16_000, 400_000), rng)
                    op, args_ = "push", ["push", shared_local, name, "--quiet"]
                    content = (name, xferlab.sha256(shared_local))
                elif roll < 0.8:
                    op, args_ = "pull", ["pull", f"own{index}.bin", ws.join(f"c{index}", "own-copy.bin"), "--quiet"]
                    content = None
                else:
                    name = f"shared{rng.randrange(len(shared_pushed))}.bin"
                    op, args_ = "pull", ["pull", name, ws.join(f"c{index}", f"copy-{name}"), "--quiet"]
                    content = None
                state = ws.join(f"c{index}", "state-" + ("a" if op == "push" else "b"))
                started = time.time()
                code, out, err = xferlab.run_xfer(binary, args_, server.url, token, state, timeout=120)
                elapsed = time.time() - started
                with lock:
                    if code == 0:
                        latencies[op].append(elapsed)
                        if isinstance(content, str):
                            owned_last[index] = content
                        elif isinstance(content, tuple):
                            shared_pushed[content[0]].add(content[1])
                    elif code == 5 and op == "pull":
                        latencies[op].append(elapsed)  # not pushed yet: a correct answer
                    else:
                        errors.append(f"client {index} {op}: exit {code}: {err.strip()[-300:]}")

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        peak = 0
        while any(t.is_alive() for t in threads):
            try:
                peak = max(peak, server.peak_rss_kib())
            except OSError:
                pass
            time.sleep(0.5)
        wall = args.seconds
        peak = max(peak, server.peak_rss_kib())
        # Nothing lost or corrupt.
        lost = []
        for index, digest in sorted(owned_last.items()):
            target = ws.join("check", f"own{index}.bin")
            code, _, err = xferlab.run_xfer(binary, ["pull", f"own{index}.bin", target, "--quiet"], server.url, token, ws.join("check-state"))
            if code != 0 or xferlab.sha256(target) != digest:
                lost.append(f"own{index}.bin")
        for name, digests in sorted(shared_pushed.items()):
            if not digests:
                continue
            target = ws.join("check", name)
            code, _, err = xferlab.run_xfer(binary, ["pull", name, target, "--quiet"], server.url, token, ws.join("check-state"))
            if code != 0 or xferlab.sha256(target) not in digests:
                lost.append(name)
        code, out, err = xferlab.run_xfer(binary, ["verify", "--data", data, "--json"], server.url, token, ws.join("check-state"))
        verify = json.loads(out)
        server.stop()
        server.log.close()
        request_ms = []
        with open(log_path, "rb") as f:
            for line in f:
                if b"method=" in line and b" ms=" in line:
                    request_ms.append(float(line.split(b" ms=")[1].split()[0]))
        requests = len(request_ms)
    operations = len(latencies["push"]) + len(latencies["pull"])
    report = {
        "clients": args.clients, "seconds": wall, "configuration": args.configuration,
        "operations": operations, "operations_per_second": round(operations / wall, 1),
        "requests": requests, "requests_per_second": round(requests / wall, 1),
        "request_p50_ms": round(percentile(request_ms, 50), 2), "request_p99_ms": round(percentile(request_ms, 99), 2),
        "push": {"count": len(latencies["push"]), "p50_ms": round(percentile(latencies["push"], 50) * 1000, 1),
                 "p99_ms": round(percentile(latencies["push"], 99) * 1000, 1)},
        "pull": {"count": len(latencies["pull"]), "p50_ms": round(percentile(latencies["pull"], 50) * 1000, 1),
                 "p99_ms": round(percentile(latencies["pull"], 99) * 1000, 1)},
        "errors": len(errors), "lost_or_corrupt": len(lost), "server_peak_rss_mib": round(peak / 1024, 1),
        "verify_ok": verify["ok"], "chunks_verified": verify["chunks_checked"],
    }
    print(json.dumps(report, indent=2, sort_keys=True))
    xferlab.report(args.json, report)
    for line in errors[:20]:
        print("error:", line)
    if errors or lost or not verify["ok"]:
        raise SystemExit(f"FAIL: {len(errors)} errors, lost or corrupt: {lost}, verify ok: {verify['ok']}")
    print(f"PASS: {args.clients} clients for {wall:.0f} s: {operations} operations, 0 errors, 0 lost or corrupt")


if __name__ == "__main__":
    main()
