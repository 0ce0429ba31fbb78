#!/usr/bin/env python3
"""Record queries at scale: how long records/query takes over N records of one type, on SQLite
(the embedded default) or PostgreSQL, beside a lookup of one record by name (the floor: one
indexed row) in the same run.

    python3 tools/bench/bench-records.py XFER_BINARY [--records 1000000] [--runs 101]
        [--postgres URL] [--work DIR] [--keep]

It starts `xfer serve` on a loopback port and saves N records of type `Item` through
records/modify, 200 a request: a name, a category (one of 50), a price (an integer), a rating
(a double), a title of three words from a list of 200, two tags and a place (a location spread
evenly over latitudes 35 to 70 and longitudes -10 to 40). Then each query is asked
--runs times over one kept-alive connection (resultsLimit 100, the first page) and the p50 and
p99 wall times reported. docs/PERFORMANCE.md, "Records", reports the table.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402

WORDS = [f"{a}{b}" for a in ["red", "blue", "green", "gold", "grey", "pink", "teal", "lime", "navy", "rose"]
         for b in ["fox", "owl", "cat", "elk", "yak", "ant", "bee", "cod", "eel", "emu",
                   "gnu", "hen", "jay", "koi", "ram", "ray", "rat", "pig", "dog", "cow"]]


def post(connection, route, token, body):
    connection.request("POST", f"/v1/containers/bench/{route}", body=json.dumps(body).encode(),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    if response.status != 200:
        sys.exit(f"bench-records: {route} answered {response.status}: {data[:300]!r}")
    return json.loads(data)


def fill(connection, token, count, seed=7):
    rng = random.Random(seed)
    started = time.monotonic()
    for start in range(0, count, 200):
        operations = []
        for i in range(start, min(count, start + 200)):
            operations.append({"operationType": "create", "record": {
                "recordName": f"item-{i:07d}", "recordType": "Item", "fields": {
                    "category": {"value": f"category-{rng.randrange(50):02d}"},
                    "price": {"value": rng.randrange(1, 1_000_000)},
                    "rating": {"value": rng.random() * 5},
                    "title": {"value": " ".join(rng.sample(WORDS, 3))},
                    "tags": {"value": rng.sample(["new", "sale", "gift", "eco", "rare", "used"], 2), "type": "STRING_LIST"},
                    "place": {"value": {"latitude": rng.uniform(35, 70), "longitude": rng.uniform(-10, 40)}},
                }}})
        answer = post(connection, "records/modify", token, {"operations": operations})
        if any("serverErrorCode" in r for r in answer["records"]):
            sys.exit(f"bench-records: a save was refused: {answer['records'][:2]}")
        if start and start % 100_000 == 0:
            print(f"  {start:,} records saved in {time.monotonic() - started:.0f} s", flush=True)
    return time.monotonic() - started


PARIS = {"latitude": 48.8566, "longitude": 2.3522}
QUERIES = {
    "lookup of one record by name (the floor)": ("records/lookup", {"records": [{"recordName": "item-0004242"}]}),
    "EQUALS category (2 % of the records), first 100": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "EQUALS", "fieldName": "category", "fieldValue": {"value": "category-07"}}]}, "resultsLimit": 100}),
    "price between two values (0.1 %), sorted by price": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "GREATER_THAN", "fieldName": "price", "fieldValue": {"value": 500_000}},
        {"comparator": "LESS_THAN", "fieldName": "price", "fieldValue": {"value": 501_000}}],
        "sortBy": [{"fieldName": "price"}]}, "resultsLimit": 100}),
    "BEGINS_WITH on the title, first 100": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "BEGINS_WITH", "fieldName": "title", "fieldValue": {"value": "goldowl"}}]}, "resultsLimit": 100}),
    "CONTAINS_ALL_TOKENS of two words": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "CONTAINS_ALL_TOKENS", "fieldName": "title", "fieldValue": {"value": "redfox tealowl"}}]},
        "resultsLimit": 100}),
    "EQUALS category and LIST_CONTAINS a tag": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "EQUALS", "fieldName": "category", "fieldValue": {"value": "category-07"}},
        {"comparator": "LIST_CONTAINS", "fieldName": "tags", "fieldValue": {"value": "gift"}}]}, "resultsLimit": 100}),
    "NEAR a point (10 km), sorted by distance": ("records/query", {"query": {"recordType": "Item", "filterBy": [
        {"comparator": "NEAR", "fieldName": "place", "fieldValue": {"value": PARIS}, "distance": 10_000}],
        "sortBy": [{"fieldName": "place", "relativeLocation": PARIS}]}, "resultsLimit": 100}),
    "NEAR a point (50 km), sorted by distance, first 100": ("records/query", {"query": {"recordType": "Item",
        "filterBy": [{"comparator": "NEAR", "fieldName": "place", "fieldValue": {"value": PARIS}, "distance": 50_000}],
        "sortBy": [{"fieldName": "place", "relativeLocation": PARIS}]}, "resultsLimit": 100}),
}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=101)
    parser.add_argument("--postgres", help="a PostgreSQL URL for the metadata (default: embedded SQLite)")
    parser.add_argument("--work")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="xfer-bench-records-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "data"), mode=0o700)
    extra = ["--metadata", f"{args.postgres}?schema=bench_{os.getpid()}"] if args.postgres else []
    server = xferlab.Server(args.binary, os.path.join(work, "data"), extra=extra).start(timeout=60)
    try:
        with open(os.path.join(work, "data", "admin-token")) as f:
            admin = f.read().strip()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        connection.request("POST", "/v1/admin/accounts", body=b'{"name": "bench"}',
                           headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/json"})
        token = json.loads(connection.getresponse().read())["token"]
        backend = "PostgreSQL" if args.postgres else "SQLite"
        print(f"saving {args.records:,} records ({backend})", flush=True)
        seconds = fill(connection, token, args.records)
        print(f"saved in {seconds:.0f} s ({args.records / seconds:,.0f} records/s)\n")
        print(f"| query over {args.records:,} records ({backend}) | results | p50 ms | p99 ms |")
        print("|---|---|---|---|")
        for name, (route, body) in QUERIES.items():
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                answer = post(connection, route, token, body)
                times.append((time.perf_counter() - started) * 1000)
            count = len(answer["records"])
            print(f"| {name} | {count} | {statistics.median(times):.1f} | {percentile(times, 0.99):.1f} |", flush=True)
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
