#!/usr/bin/env python3
"""Search at scale: how long the query route takes on a container of N documents,
beside SQLite scanning the same table itself (the ceiling of a query that must look at every
name) and beside the listing route's first page, all in one run.

    python3 tools/bench/bench-query.py XFER_BINARY [--documents 1000000] [--runs 7] [--work DIR] [--keep]

It starts `xfer serve` (embedded SQLite) on a loopback port, uploads 64 chunks of distinct
sizes, and commits N single-file documents through the batch-commit route, 1,000 a request:
`Documents/dNNNN/<word>-<i>.<ext>` (1,000 to a folder, mixed-case words, eight extensions,
modification times spread over a year, sizes 1-64 KiB). Then each query is asked --runs
times over one kept-alive connection (limit 100, the first page, as a search box asks) and the
median wall time reported; the SQLite scan runs in this process on the server's database file.
docs/PERFORMANCE.md, "Search at a million documents", reports the table.
"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
import xferwire  # noqa: E402

WORDS = ["report", "Invoice", "notes", "IMG", "draft", "Budget", "summary", "photo", "letter", "Plan"]
EXTENSIONS = ["txt", "md", "pdf", "jpg", "swift", "json", "png", "docx"]


def request(connection, method, path, token, body=None):
    headers = {"Authorization": f"Bearer {token}"}
    if body is not None:
        headers["Content-Type"] = "application/octet-stream" if isinstance(body, bytes) else "application/json"
        body = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    if response.status >= 300:
        sys.exit(f"bench-query: {method} {path} answered {response.status}: {data[:300]!r}")
    return data


def fill(connection, token, count, seed=11):
    rng = random.Random(seed)
    chunks = [bytes(rng.getrandbits(8) for _ in range(1024 * (k + 1))) for k in range(64)]
    request(connection, "POST", "/v1/chunks", token, xferwire.frames(chunks))
    refs = [xferwire.chunk_ref(chunk) for chunk in chunks]
    year = 365 * 86400 * 10**9
    base = 1_767_225_600 * 10**9  # 2026-01-01
    started = time.monotonic()
    for start in range(0, count, 1000):
        documents = []
        for i in range(start, min(count, start + 1000)):
            ref = refs[rng.randrange(len(refs))]
            mtime = base + rng.randrange(year)
            name = f"Documents/d{i // 1000:04d}/{rng.choice(WORDS)}-{i}.{rng.choice(EXTENSIONS)}"
            manifest = xferwire.manifest(xferwire.FILE_DOC, [{"kind": xferwire.FILE, "mtime": mtime, "chunks": [ref]}])
            documents.append({"path": name, "kind": "file", "size": ref[0], "mtime_ns": mtime, "mode": 0o644,
                              "manifest": base64.b64encode(manifest).decode(), "manifest_digest": xferwire.digest(manifest)})
        answer = json.loads(request(connection, "POST", "/v1/containers/default/commits", token, {"documents": documents}))
        failed = [r for r in answer["results"] if "error" in r]
        if failed:
            sys.exit(f"bench-query: a batch commit refused {len(failed)} documents: {failed[0]}")
        if (start // 1000) % 100 == 99:
            print(f"  {start + 1000} documents in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return time.monotonic() - started


def timed(runs, action):
    times = []
    for _ in range(runs):
        begun = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - begun)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", default="/tmp/xfer-bench/query")
    parser.add_argument("--keep", action="store_true", help="leave the server's data directory in --work afterwards")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    server, env = xferlab.fresh_server(binary, args.work)
    token = env["XFER_TOKEN"]
    try:
        host = urllib.parse.urlparse(server.url)
        connection = http.client.HTTPConnection(host.hostname, host.port, timeout=600)
        seconds = fill(connection, token, args.documents)
        print(f"filled {args.documents} documents in {seconds:.0f} s ({args.documents / seconds:.0f}/s)", file=sys.stderr)
        queries = [
            ("listing, first page (the documents route)", "/v1/containers/default/documents?limit=100"),
            ("every document, by path", "query?limit=100"),
            ("name `*.pdf` (1 in 8), by path", "query?name=*.pdf&limit=100"),
            ("name `report*` (1 in 10, any case), by path", "query?name=report*&limit=100"),
            (f"name `*-{args.documents * 7 // 9}.*` (one document)", f"query?name=*-{args.documents * 7 // 9}.*&limit=100"),
            ("name `nothing*` (no document)", "query?name=nothing*&limit=100"),
            ("prefix `d0042/` (1,000 documents)", "query?scope=documents&prefix=d0042/&limit=100"),
            ("newest first", "query?sort=modified&order=desc&limit=100"),
            ("largest first, `*.jpg`", "query?name=*.jpg&sort=size&order=desc&limit=100"),
            ("size 60-61 KiB, by name", f"query?min_size={60 * 1024}&max_size={61 * 1024}&sort=name&limit=100"),
            ("deleted (none)", "query?state=deleted&limit=100"),
        ]
        rows = []
        for label, route in queries:
            path = route if route.startswith("/") else "/v1/containers/default/" + route
            median, body = timed(args.runs, lambda: request(connection, "GET", path, token))
            answer = json.loads(body)
            rows.append((label, median, len(answer["documents"]), answer.get("more", False)))
        database = os.path.join(args.work, "data", "metadata.sqlite")
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        scans = [
            ("SQLite alone: count names LIKE '%.pdf'", "SELECT count(*) FROM documents WHERE name_folded LIKE '%.pdf'"),
            ("SQLite alone: count names LIKE 'nothing%'", "SELECT count(*) FROM documents WHERE name_folded LIKE 'nothing%'"),
            ("SQLite alone: newest 100 by mtime", "SELECT v.mtime_ns FROM documents d JOIN versions v ON v.document_id = d.id "
             "AND v.version = COALESCE(d.current_version, d.latest_version) ORDER BY v.mtime_ns DESC LIMIT 100"),
        ]
        for label, statement in scans:
            median, result = timed(args.runs, lambda: db.execute(statement).fetchall())
            rows.append((label, median, len(result) if len(result) > 1 else result[0][0], None))
        print(f"\n{args.documents:,} documents, median of {args.runs}, one kept-alive connection, limit 100\n")
        print("| query | ms | documents on the page | more |")
        print("|---|---|---|---|")
        for label, median, count, more in rows:
            print(f"| {label} | {median * 1000:.1f} | {count} | {'' if more is None else ('yes' if more else 'no')} |")
        size = sum(os.path.getsize(os.path.join(args.work, "data", f)) for f in os.listdir(os.path.join(args.work, "data"))
                   if f.startswith("metadata.sqlite"))
        print(f"\nmetadata.sqlite: {size / 2**20:.0f} MiB")
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
