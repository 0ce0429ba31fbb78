#!/usr/bin/env python3
"""Pushes and pulls through the fault-injecting proxy (tools/lib/faultproxy.py).

For each seed: a document (a file or a package) is created or edited, pushed through the
proxy, and pulled through it by a second device. Every attempt must either succeed or fail
with a clear error (a documented exit code and an `xfer:` message, never a crash or a hang);
a failed step is re-run until it succeeds (convergence); every pulled copy must be
byte-identical to what was pushed. At the end the server's own `xfer verify` must be clean.

    python3 tools/suites/fault-suite.py --seeds 40            # CI
    python3 tools/suites/fault-suite.py --seeds 200 --configuration release   # full run
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402


def tree_digest(path):
    if os.path.isfile(path):
        return xferlab.sha256(path)
    entries = []
    for directory, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(directory, name)
            entries.append((os.path.relpath(full, path), xferlab.sha256(full)))
    return entries


def until_success(step, what, stats, attempts=40):
    """Runs `step` until it exits 0; every failure must be a clear error."""
    for attempt in range(attempts):
        code, out, err = step()
        if code == 0:
            stats["retries"] += attempt
            return out
        if not xferlab.clear_error(code, err):
            raise SystemExit(f"FAIL {what}: attempt {attempt} exited {code} without a clear error:\n{err[-2000:]}")
        stats["clear_errors"] += 1
        stats["codes"][str(code)] = stats["codes"].get(str(code), 0) + 1
    raise SystemExit(f"FAIL {what}: did not converge in {attempts} attempts; last error: {err[-500:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=40, help="how many seeds (one document operation each)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.35, help="share of connections that get a fault")
    parser.add_argument("--configuration", default="debug", choices=["debug", "release"])
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    binary = xferlab.xfer_binary(args.configuration)
    stats = {"seeds": [args.first_seed, args.first_seed + args.seeds - 1], "operations": 0, "clear_errors": 0, "retries": 0,
             "codes": {}, "bytes_verified": 0, "failures": 0}
    start = time.time()
    with xferlab.Workspace("faults", keep=bool(os.environ.get("XFER_KEEP"))) as ws:
        data = ws.join("data")
        # Every client reaches the server through the proxy, so from one address, as behind a
        # reverse proxy; connections the proxy drops stay open upstream until the idle timeout.
        server = xferlab.Server(binary, data, extra=["--max-connections-per-address", "4096"])
        os.makedirs(data, exist_ok=True)
        token = xferlab.create_account(binary, data, "faults")
        server.start()
        try:
            docs = {}
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                rng = random.Random(seed)
                proxy = FaultProxy(server.port, seed, args.rate)
                via = f"http://127.0.0.1:{proxy.port}"
                name = f"doc{rng.randrange(8)}" + (".pkg" if seed % 3 == 0 else "")
                source = ws.join("src", name)
                if name in docs and rng.random() < 0.7:
                    if os.path.isdir(source):
                        xferlab.edit_file(os.path.join(source, rng.choice(sorted(os.listdir(source)))), rng)
                    else:
                        xferlab.edit_file(source, rng)
                elif name.endswith(".pkg"):
                    for i in range(rng.randrange(1, 5)):
                        xferlab.write_random(os.path.join(source, f"part{i}.bin"), rng.randrange(0, 1_500_000), rng)
                else:
                    xferlab.write_random(source, rng.randrange(0, 3_000_000), rng)
                docs[name] = True
                until_success(lambda: xferlab.run_xfer(binary, ["push", source, name, "--quiet"], via, token, ws.join("state-a")),
                              f"seed {seed} push {name}", stats)
                target = ws.join("dst", name)
                until_success(lambda: xferlab.run_xfer(binary, ["pull", name, target, "--quiet", "--force"], via, token, ws.join("state-b")),
                              f"seed {seed} pull {name}", stats)
                if tree_digest(target) != tree_digest(source):
                    stats["failures"] += 1
                    raise SystemExit(f"FAIL seed {seed}: the pulled {name} differs from what was pushed")
                stats["bytes_verified"] += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target) for f in fs) \
                    if os.path.isdir(target) else os.path.getsize(target)
                stats["operations"] += 2
                for kind, count in proxy.counts.items():
                    stats.setdefault("connections", {}).setdefault(kind, 0)
                    stats["connections"][kind] += count
                proxy.close()
            code, out, err = xferlab.run_xfer(binary, ["verify", "--data", data, "--json"], server.url, token, ws.join("state-a"))
            verify = json.loads(out)
            if code != 0 or not verify["ok"]:
                raise SystemExit(f"FAIL: xfer verify found problems: {verify['problems']}")
            stats["verify"] = {k: verify[k] for k in ("chunks_checked", "versions_checked", "ok")}
        finally:
            server.stop()
    stats["faults_injected"] = sum(v for k, v in stats.get("connections", {}).items() if k != "pass")
    stats["seconds"] = round(time.time() - start, 1)
    print(json.dumps(stats, indent=2, sort_keys=True))
    xferlab.report(args.json, stats)
    print(f"PASS: {args.seeds} seeds, {stats['operations']} operations, {stats['faults_injected']} faults injected, "
          f"{stats['clear_errors']} clear errors, {stats['bytes_verified']} bytes verified, 0 failures")


if __name__ == "__main__":
    main()
