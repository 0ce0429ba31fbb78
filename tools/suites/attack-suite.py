#!/usr/bin/env python3
"""The attacker's suite: attacks on xfer tried the way an attacker would, through the real
binaries on 127.0.0.1.

Server-side rows play a malicious account holder against a real `xfer serve` (raw sockets
and http.client for hostile requests, `xfer push`/`sync` where the attack goes through the
client). Client-side rows point `xfer pull`/`sync`/`versions` at a small hostile server
(tools/lib/hostile_server.py) that lies the way a compromised server could. Each row states the
expected (safe) behaviour and what was observed; the run prints a table and exits 1 if any
row fails (informational rows are reported but do not count unless --strict).

    python3 tools/suites/attack-suite.py                        # every row (about 1-2 minutes)
    python3 tools/suites/attack-suite.py --only bomb,escape     # rows whose name contains a word
    python3 tools/suites/attack-suite.py --xfer /path/to/xfer --write-doc docs/SECURITY.md

--write-doc regenerates the table between `<!-- attack-table:begin -->` and
`<!-- attack-table:end -->` in the given file. Every wait is bounded; every server the suite
starts is killed when it ends. Standard library only. See docs/SECURITY.md.
"""
import argparse
import base64
import errno
import hashlib
import hmac
import http.client
import json
import os
import random
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
import xferwire as w  # noqa: E402
from hostile_server import Doc, HostileServer, dir_entry, file_entry, symlink_entry  # noqa: E402

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MiB = 1 << 20
FAKE_TOKEN = "xfer_" + "ab" * 32
ROWS = []


def attack(number, name, expected, informational=False, background=False):
    """Registers an attack: a function(lab) -> (observed text, passed)."""
    def register(function):
        ROWS.append({"number": number, "name": name, "expected": expected, "informational": informational,
                     "background": background, "run": function})
        return function
    return register


# MARK: the lab: servers, accounts, clients, requests, measurements

class Lab:
    def __init__(self, binary, workspace):
        self.binary, self.ws = binary, workspace
        self.servers, self.processes, self.hostile = [], [], []
        self.lock = threading.Lock()

    def dir(self, *parts):
        path = self.ws.join(*parts)
        os.makedirs(path, exist_ok=True)
        return path

    def server(self, tag, extra=(), log_level="warning"):
        data = os.path.join(self.dir(tag), "data")
        os.makedirs(data, mode=0o700, exist_ok=True)
        server = xferlab.Server(self.binary, data, extra, log_level=log_level)
        with self.lock:
            self.servers.append(server)
        return server.start(timeout=30)

    def serve_options(self):
        """The text of `xfer serve --help` (to use options a fixed server has, like --idle-timeout)."""
        if not hasattr(self, "_serve_help"):
            out = subprocess.run([self.binary, "serve", "--help"], capture_output=True, text=True, timeout=30)
            self._serve_help = out.stdout + out.stderr
        return self._serve_help

    def account(self, server, name, quota="100G"):
        return xferlab.create_account(self.binary, server.data, name, quota)

    def hostile_server(self, scenario):
        server = HostileServer(scenario)
        with self.lock:
            self.hostile.append(server)
        return server

    def client(self, args, url, token, state, timeout=60):
        return xferlab.run_xfer(self.binary, args, url, token, state, timeout=timeout)

    def popen(self, args, **kwargs):
        process = subprocess.Popen([self.binary] + args, **kwargs)
        with self.lock:
            self.processes.append(process)
        return process

    def cleanup(self):
        for server in self.servers:
            try:
                server.kill9()
            except OSError:
                pass
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        for server in self.hostile:
            server.close()


def request(port, method, path, token=None, body=None, timeout=30, content_type=None, source=None):
    """One request on a fresh connection: (status or None, body bytes, seconds)."""
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        content_type = content_type or "application/json"
    if content_type:
        headers["Content-Type"] = content_type
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0) if source else None)
    start = time.monotonic()
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), time.monotonic() - start
    except OSError as error:
        return None, str(error).encode(), time.monotonic() - start
    finally:
        connection.close()


def raw_exchange(port, method, path, token, body, content_type="application/json", timeout=60):
    """Sends a (large) body from a thread while reading the answer, so a server that answers
    early (413) and stops reading is seen. Returns (status or None, body bytes, seconds)."""
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def send():
        try:
            sock.sendall(head)
            view = memoryview(body)
            for start in range(0, len(body), MiB):
                sock.sendall(view[start:start + MiB])
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    start = time.monotonic()
    sender.start()
    answer = b""
    deadline = start + timeout
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not data:
                break
            answer += data
            if b"\r\n\r\n" in answer:
                header, _, rest = answer.partition(b"\r\n\r\n")
                length = [int(line.split(b":", 1)[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                if length and len(rest) >= length[0]:
                    break
    finally:
        elapsed = time.monotonic() - start
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        sender.join(timeout=5)
    if not answer.startswith(b"HTTP/"):
        return None, answer, elapsed
    return int(answer.split(b" ", 2)[1]), answer.partition(b"\r\n\r\n")[2], elapsed


def error_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def describe(status, body):
    code = error_code(body)
    return f"{status if status is not None else 'no answer'}{' ' + code if code else ''}"


def proc_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_bytes(path):
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                pass
    return total


def tree_listing(path):
    """Every path under `path`, relative (empty if absent)."""
    found = []
    for directory, dirs, files in os.walk(path):
        for name in dirs + files:
            found.append(os.path.relpath(os.path.join(directory, name), path))
    return sorted(found)


def health_ok(port, timeout=5, source=None):
    status, _, seconds = request(port, "GET", "/v1/health", timeout=timeout, source=source)
    return status == 200, seconds


def announce(server, token, path, kind="file", size=0, base=None, device="attacker", extra=None):
    body = {"path": path, "kind": kind, "size": size, "mtime_ns": 1_700_000_000_000_000_000, "mode": 0o644, "device": device}
    if base is not None:
        body["base_version"] = base
    body.update(extra or {})
    status, answer, _ = request(server.port, "POST", "/v1/containers/default/announce", token, body)
    return status, answer


def commit(server, token, path, version, delta_bytes, digest_hex, base=None, delta_base=None, timeout=120):
    body = {"path": path, "version": version, "manifest_delta": base64.b64encode(delta_bytes).decode(), "manifest_digest": digest_hex}
    if base is not None:
        body["base_version"] = base
    if delta_base is not None:
        body["delta_base"] = delta_base
    return request(server.port, "POST", "/v1/containers/default/commit", token, body, timeout=timeout)


def upload(server, token, plains, timeout=60):
    return raw_exchange(server.port, "POST", "/v1/chunks", token, w.frames(plains), "application/octet-stream", timeout)


def is_signal(code):
    return code is not None and code < 0 and code != -1000


def exit_text(code):
    if code == -1000:
        return "timeout"
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


# MARK: 1. symlink documents with children

def plant_symlink_children(lab, tag, reverse=False):
    """Device A pushes a symlink document and a file document below it (through the real
    client): `Documents/evil` -> an absolute outside directory with `Documents/evil/payload.txt`,
    and `up` -> `..` with `up/X`. Returns the server, token, outside dir and what each push did."""
    server = lab.server(tag)
    token = lab.account(server, "mallory")
    outside = lab.dir(tag, "outside")
    source = lab.dir(tag, "src")
    os.symlink(outside, os.path.join(source, "evil"))
    os.symlink("..", os.path.join(source, "up"))
    payload = os.path.join(source, "payload.txt")
    with open(payload, "w") as f:
        f.write("written outside the synced directory\n")
    pushes = []
    for link, link_doc, child_doc in [("evil", "Documents/evil", "Documents/evil/payload.txt"), ("up", "up", "up/X")]:
        steps = [(os.path.join(source, link), link_doc), (payload, child_doc)]
        for local, doc in (reversed(steps) if reverse else steps):
            code, _, err = lab.client(["push", local, doc, "--quiet"], server.url, token, lab.ws.join(tag, "state-a"))
            pushes.append((doc, code, err.strip().splitlines()[-1:] or [""]))
    return server, token, outside, pushes


def push_rows(lab, tag, reverse):
    _, _, _, pushes = plant_symlink_children(lab, tag, reverse)
    # pushes: pairs (first, second) per variant; the second push must be refused with 6 or 7.
    observed, ok = [], True
    for first, second in [pushes[0:2], pushes[2:4]]:
        observed.append(f"{first[0]}: {exit_text(first[1])}; then {second[0]}: {exit_text(second[1])}")
        ok &= first[1] == 0 and second[1] in (6, 7)
    return "; ".join(observed), ok


@attack("1", "symlink-child-push",
        "push symlink `Documents/evil` -> /outside, then file `Documents/evil/payload.txt` (and `up` -> `..`, then `up/X`): "
        "the second push is refused (exit 7 `conflict` or 6, HTTP 409/400)")
def symlink_child_push(lab):
    return push_rows(lab, "1-push", reverse=False)


@attack("1r", "symlink-child-push-reverse",
        "the same in the other order (file `Documents/evil/payload.txt` first, then symlink `Documents/evil`): "
        "the symlink push is refused (exit 7 or 6)")
def symlink_child_push_reverse(lab):
    return push_rows(lab, "1r-push", reverse=True)


def escapes_after_sync(lab, tag, url, token, outside):
    """Syncs device B's DIR = TAG/b/root once; returns (exit code, things created outside DIR)."""
    root = lab.dir(tag, "b", "root")
    code, out, err = lab.client(["sync", root, "--once", "--quiet"], url, token, lab.ws.join(tag, "state-b"))
    escaped = [f"outside/{p}" for p in tree_listing(outside)]
    escaped += [f"b/{p}" for p in tree_listing(lab.ws.join(tag, "b")) if p != "root" and not p.startswith("root/")]
    return code, escaped


@attack("1s", "symlink-child-sync",
        "after those pushes (whatever the server accepted), `xfer sync DIR --once` on device B creates nothing outside DIR "
        "(the outside directory and DIR's parent stay empty: no payload, no `.partial`)")
def symlink_child_sync(lab):
    server, token, outside, pushes = plant_symlink_children(lab, "1s-sync")
    code, escaped = escapes_after_sync(lab, "1s-sync", server.url, token, outside)
    accepted = [doc for doc, c, _ in pushes if c == 0]
    return (f"server accepted {accepted}; sync {exit_text(code)}; created outside DIR: {escaped or 'nothing'}",
            not escaped and not is_signal(code))


@attack("1b", "hostile-symlink-child-sync",
        "a hostile server lists `Documents/evil` (symlink -> /outside) and `Documents/evil/payload.txt`, `up` -> `..` and `up/X`: "
        "`xfer sync DIR --once` creates nothing outside DIR")
def hostile_symlink_child_sync(lab):
    outside = lab.dir("1b-hostile", "outside")
    docs = [Doc("Documents/evil", [symlink_entry(outside)], version=1),
            Doc("Documents/evil/payload.txt", [file_entry(b"written outside the synced directory\n")], version=1),
            Doc("up", [symlink_entry("..")], version=1),
            Doc("up/X", [file_entry(b"written beside the synced directory\n")], version=1)]
    hostile = lab.hostile_server({"documents": docs})
    code, escaped = escapes_after_sync(lab, "1b-hostile", hostile.url, FAKE_TOKEN, outside)
    return f"sync {exit_text(code)}; created outside DIR: {escaped or 'nothing'}", not escaped and not is_signal(code)


# MARK: 2. manifests that cost the server more than they weigh

@attack("2", "delta-memory-bomb",
        "base: a package whose file lists one 64-byte chunk 200,000 times; then a ~1.3 KB commit whose delta copies that run "
        "40 times in each of 6 entries (48M references): refused with 4xx (`too_large`/`invalid_manifest`), the server's RSS "
        "stays within +256 MiB of its baseline, and /v1/health still answers")
def delta_memory_bomb(lab):
    server = lab.server("2-bomb")
    token = lab.account(server, "mallory")
    chunk = bytes(range(64))
    status, _, _ = upload(server, token, [chunk])
    entries = [{"path": "f", "kind": w.FILE, "mode": 0o644, "mtime": 0, "chunks": [w.chunk_ref(chunk)] * 200_000}]
    base = w.manifest(w.PACKAGE_DOC, entries)
    path = "Data/bomb.pkg"
    status, answer = announce(server, token, path, "package", 64 * 200_000)
    version = json.loads(answer)["version"]
    status, answer, _ = commit(server, token, path, version, w.delta(w.PACKAGE_DOC, entries), w.digest(base))
    setup = f"base commit {describe(status, answer)}"
    base_version = version
    status, answer = announce(server, token, path, "package", 0, base=base_version)
    version = json.loads(answer).get("version", version + 1) if status == 201 else version + 1
    bomb_entries = [{"path": name, "kind": w.FILE, "mode": 0o644, "mtime": 0, "base_entry": 1,
                     "ops": w.copy_ops([(0, 200_000)] * 40)} for name in "abcdef"]
    bomb = w.delta(w.PACKAGE_DOC, bomb_entries, base_digest=w.digest(base))

    pid = server.process.pid
    rss_before, hwm_before = proc_kib(pid, "VmRSS"), proc_kib(pid, "VmHWM")
    ceiling = rss_before + 1536 * 1024  # the suite's watchdog: past this the server is killed (the row fails)
    peak, killed, result = rss_before, False, {}

    def send():
        result["answer"] = commit(server, token, path, version, bomb, "00" * 32, base=base_version, delta_base=base_version, timeout=90)

    sender = threading.Thread(target=send, daemon=True)
    start = time.monotonic()
    sender.start()
    while sender.is_alive() and time.monotonic() - start < 90:
        rss = proc_kib(pid, "VmRSS")
        peak = max(peak, rss)
        if rss > ceiling:
            server.kill9()
            killed = True
            break
        time.sleep(0.02)
    sender.join(timeout=10)
    seconds = time.monotonic() - start
    hwm_after = proc_kib(pid, "VmHWM") if not killed else 0
    if hwm_after > hwm_before:
        peak = max(peak, hwm_after)
    growth_mib = (peak - rss_before) / 1024
    status, answer, _ = result.get("answer", (None, b"", 0))
    alive, _ = health_ok(server.port) if not killed else (False, 0)
    verdict = "killed by the suite's watchdog at +1.5 GiB" if killed else describe(status, answer)
    ok = (not killed and status is not None and 400 <= status < 500 and growth_mib <= 256 and alive)
    return (f"{setup}; bomb ({len(bomb)} B) -> {verdict} after {seconds:.1f} s; RSS {rss_before // 1024} MiB -> peak "
            f"{peak // 1024} MiB (+{growth_mib:.0f} MiB); health {'ok' if alive else 'no answer'}"), ok


@attack("2b", "chunk-length-lie-commit",
        "upload a 22-byte chunk, commit a file manifest that declares it 200,000 bytes long: the commit is refused (4xx)")
def chunk_length_lie_commit(lab):
    server = lab.server("2b-liar")
    token = lab.account(server, "mallory")
    chunk = b"twenty-two bytes long!"
    upload(server, token, [chunk])
    entries = [{"path": "", "kind": w.FILE, "mode": 0o644, "mtime": 0, "chunks": [w.chunk_ref(chunk, 200_000)]}]
    status, answer = announce(server, token, "Data/liar.bin", "file", 200_000)
    version = json.loads(answer)["version"]
    status, answer, _ = commit(server, token, "Data/liar.bin", version, w.delta(w.FILE_DOC, entries), w.digest(w.manifest(w.FILE_DOC, entries)))
    return f"commit -> {describe(status, answer)}", status is not None and 400 <= status < 500


# MARK: 3. connections that cost the server without doing anything

@attack("3a", "idle-connections",
        "200 connections held open from 127.0.0.1 (100 silent, 100 with half a request header; the server is started with "
        "`--max-connections-per-address 64` when it has that option): /v1/health from another client address (127.0.0.2) "
        "still answers within 5 s")
def idle_connections(lab):
    cap = "--max-connections-per-address" in lab.serve_options()
    server = lab.server("3a-idle", ["--max-connections-per-address", "64"] if cap else [])
    sockets = []
    try:
        for i in range(200):
            try:
                s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            except OSError:
                break
            try:
                if i % 2:
                    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            except OSError:
                pass
            sockets.append(s)
        time.sleep(1.0)
        held = sum(1 for s in sockets if still_open(s))
        ok, seconds = health_ok(server.port, timeout=5, source="127.0.0.2")
        return (f"{len(sockets)} opened, {held} still open after 1 s{' (cap 64 per address)' if cap else ''}; "
                f"health from 127.0.0.2 {'answered' if ok else 'no answer'} in {seconds:.2f} s"), ok and seconds < 5
    finally:
        for s in sockets:
            s.close()


def still_open(sock):
    """Whether the server has not closed `sock` (nothing to read yet, no EOF, no reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


@attack("3b", "header-timeout",
        "a connection that sends half a request header is closed by the server within 30 s (probed for at most 40 s); "
        "when the server has `--idle-timeout`, it is started with 5 and must close within 8 s. A silent connection's "
        "fate is reported too", background=True)
def header_timeout(lab):
    short = "--idle-timeout" in lab.serve_options()
    limit, probe = (8, 12) if short else (30, 40)
    server = lab.server("3b-slowloris", ["--idle-timeout", "5"] if short else [])
    half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    half.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    start = time.monotonic()
    closed = {}
    try:
        while time.monotonic() - start < probe and len(closed) < 2:
            for name, s in (("half", half), ("silent", silent)):
                if name in closed:
                    continue
                s.settimeout(0.25)
                try:
                    data = s.recv(4096)
                    if not data:
                        closed[name] = time.monotonic() - start
                except socket.timeout:
                    pass
                except OSError:
                    closed[name] = time.monotonic() - start
    finally:
        half.close()
        silent.close()
    text = lambda name: f"closed after {closed[name]:.1f} s" if name in closed else f"still open after {probe} s"
    return (f"{'--idle-timeout 5: ' if short else ''}half header: {text('half')}; silent: {text('silent')}",
            closed.get("half", 999) <= limit)


@attack("3c", "parked-long-polls",
        "50 parked long polls (`changes?after=0&wait=60` on an empty container): the server uses < 5% of a core "
        "(utime+stime over 3 s)")
def parked_long_polls(lab):
    server = lab.server("3c-polls")
    token = lab.account(server, "mallory")
    pid = server.process.pid
    time.sleep(0.5)
    idle_before = cpu_seconds(pid)
    time.sleep(1.0)
    idle = (cpu_seconds(pid) - idle_before) * 100
    sockets = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall((f"GET /v1/containers/default/changes?after=0&wait=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       f"Authorization: Bearer {token}\r\n\r\n").encode())
            sockets.append(s)
        time.sleep(1.0)
        answered = sum(1 for s in sockets if not still_open(s) or select.select([s], [], [], 0)[0])
        before, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(3.0)
        share = (cpu_seconds(pid) - before) / (time.monotonic() - t0) * 100
        return (f"{len(sockets) - answered} parked ({answered} answered or closed at once): {share:.1f}% of a core "
                f"(idle server: {idle:.1f}%)"), share < 5
    finally:
        for s in sockets:
            s.close()


# MARK: 4. quota before disk

@attack("4", "quota-before-disk",
        "an account with quota 0 uploads 40 MiB of chunks (5 requests of 32 × 256 KiB): every request is refused "
        "(507 `quota_exceeded`) and the server's packs/ grows by < 1 MiB")
def quota_before_disk(lab):
    server = lab.server("4-quota")
    token = lab.account(server, "freeloader", quota="0")
    chunks_dir = os.path.join(server.data, "packs")
    before = tree_bytes(chunks_dir)
    statuses = []
    for _ in range(5):
        status, answer, _ = upload(server, token, [os.urandom(256 << 10) for _ in range(32)])
        statuses.append(describe(status, answer))
    time.sleep(0.2)
    growth = tree_bytes(chunks_dir) - before
    ok = all(s == "507 quota_exceeded" for s in statuses) and growth < MiB
    return f"answers {sorted(set(statuses))} ×{len(statuses)}; packs/ grew {growth / MiB:.1f} MiB", ok


# MARK: 5. oversized metadata

@attack("5a", "huge-device-name",
        "announce with a 10 MiB `device` string: refused with 400 (or 413, when the route's body limit catches it first)")
def huge_device_name(lab):
    server = lab.server("5a-device")
    token = lab.account(server, "mallory")
    body = json.dumps({"path": "Data/x", "kind": "file", "size": 0, "mtime_ns": 0, "mode": 420, "device": "D" * (10 * MiB)}).encode()
    status, answer, seconds = raw_exchange(server.port, "POST", "/v1/containers/default/announce", token, body)
    return f"{describe(status, answer)} in {seconds:.1f} s", status in (400, 413)


@attack("5b", "oversized-json-body",
        "a 65 MiB JSON body (announce): 413 `too_large`, not 500, and the server keeps serving")
def oversized_json_body(lab):
    server = lab.server("5b-body")
    token = lab.account(server, "mallory")
    body = b'{"path":"Data/x","kind":"file","size":0,"mtime_ns":0,"mode":420,"device":"' + b"D" * (65 * MiB) + b'"}'
    status, answer, seconds = raw_exchange(server.port, "POST", "/v1/containers/default/announce", token, body)
    alive, _ = health_ok(server.port)
    return (f"{describe(status, answer)} in {seconds:.1f} s; health {'ok' if alive else 'no answer'}",
            status == 413 and alive)


@attack("5c", "huge-missing-list",
        "a 57 MiB JSON list of ids (~890,000) to /v1/chunks/missing: 413 within 3 s")
def huge_missing_list(lab):
    server = lab.server("5c-missing")
    token = lab.account(server, "mallory")
    count = (57 * MiB) // 67
    body = b'{"ids":[' + b",".join([b'"' + b"0" * 64 + b'"'] * count) + b"]}"
    status, answer, seconds = raw_exchange(server.port, "POST", "/v1/chunks/missing", token, body, timeout=90)
    alive, _ = health_ok(server.port)
    return (f"{count} ids, {len(body) / MiB:.0f} MiB -> {describe(status, answer)} in {seconds:.1f} s; "
            f"health {'ok' if alive else 'no answer'}"), status == 413 and seconds < 3 and alive


# MARK: 6. hostile names

HOSTILE_NAMES = [("U+202E", "Documents/invoice\u202Etxt.exe"), ("U+2028", "Documents/a\u2028b.txt"),
                 ("U+0085", "Documents/a\u0085b.txt"), ("ESC", "Documents/a\x1b[2Jb.txt"), ("newline", "Documents/a\nb.txt")]


@attack("6a", "hostile-document-names",
        "announce documents named with U+202E, U+2028, U+0085, ESC, newline: each refused with 400 `invalid_path`")
def hostile_document_names(lab):
    server = lab.server("6a-names")
    token = lab.account(server, "mallory")
    seen = []
    for label, name in HOSTILE_NAMES:
        status, answer = announce(server, token, name)
        seen.append((label, describe(status, answer)))
    return "; ".join(f"{label}: {answer}" for label, answer in seen), all(a == "400 invalid_path" for _, a in seen)


@attack("6b", "hostile-entry-names-commit",
        "commit a package whose manifest has an entry named with ESC, or with a newline: refused (4xx)")
def hostile_entry_names_commit(lab):
    server = lab.server("6b-entries")
    token = lab.account(server, "mallory")
    seen = []
    for label, entry_name in [("ESC", "a\x1b]0;pwned\x07b.txt"), ("newline", "a\nb.txt")]:
        entries = [{"path": entry_name, "kind": w.FILE, "mode": 0o644, "mtime": 0, "chunks": []}]
        path = f"Data/entries-{label}.pkg"
        status, answer = announce(server, token, path, "package")
        version = json.loads(answer)["version"]
        status, answer, _ = commit(server, token, path, version, w.delta(w.PACKAGE_DOC, entries), w.digest(w.manifest(w.PACKAGE_DOC, entries)))
        seen.append((label, status, describe(status, answer)))
    return "; ".join(f"{label}: {text}" for label, _, text in seen), all(s is not None and 400 <= s < 500 for _, s, _ in seen)


# MARK: 7. files on the server

@attack("7a", "data-file-modes",
        "a fresh data directory under a 0755 parent (umask 022): the directory, metadata.sqlite (and -wal/-shm) and "
        "admin-token, packs/ and its fan-out directories have mode & 077 == 0")
def data_file_modes(lab):
    parent = lab.dir("7a-modes", "parent")
    os.chmod(parent, 0o755)
    data = os.path.join(parent, "data")
    server = xferlab.Server(lab.binary, data)
    with lab.lock:
        lab.servers.append(server)
    server.start(timeout=30)
    modes = {}
    for name in [".", "metadata.sqlite", "metadata.sqlite-wal", "metadata.sqlite-shm", "admin-token", "packs", "packs/00"]:
        path = os.path.join(data, name)
        if os.path.exists(path):
            modes[name if name != "." else "data/"] = os.stat(path).st_mode & 0o7777
    loose = sorted(name for name, mode in modes.items() if mode & 0o077)
    text = ", ".join(f"{name} {oct(mode)[2:]}" for name, mode in modes.items())
    return (f"{text}; readable by group/others: {', '.join(loose) or 'none'}",
            not loose and "admin-token" in modes and "packs" in modes)


@attack("7b", "writable-data-dir",
        "`xfer serve` on a data directory that is group- or world-writable (0770, 0777) refuses to start (exit non-zero)")
def writable_data_dir(lab):
    seen, ok = [], True
    for mode in (0o777, 0o770):
        data = lab.dir(f"7b-writable-{oct(mode)[2:]}", "data")
        os.chmod(data, mode)
        port = xferlab.free_port()
        log = open(lab.ws.join(f"7b-writable-{oct(mode)[2:]}", "server.log"), "wb")
        process = lab.popen(["serve", "--data", data, "--listen", f"127.0.0.1:{port}", "--log-level", "warning"], stdout=log, stderr=log)
        started, deadline = False, time.monotonic() + 15
        while time.monotonic() < deadline and process.poll() is None:
            if health_ok(port, timeout=1)[0]:
                started = True
                break
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
            seen.append(f"{oct(mode)[2:]}: {'started and served' if started else 'still running'} (killed)")
            ok = False
        else:
            seen.append(f"{oct(mode)[2:]}: exit {process.returncode}")
            ok &= process.returncode != 0
    return "; ".join(seen), ok


# MARK: 8. listening in the open without TLS

@attack("8", "public-listen-without-tls",
        "`xfer serve --listen 0.0.0.0:0` without --tls-cert refuses to start: exit non-zero, a message that mentions TLS "
        "(if it starts, the suite kills it the moment it says it is serving)")
def public_listen_without_tls(lab):
    data = lab.dir("8-public", "data")
    process = lab.popen(["serve", "--data", data, "--listen", "0.0.0.0:0", "--log-level", "warning"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(line.decode(errors="replace") for line in process.stderr), daemon=True)
    reader.start()
    deadline, served = time.monotonic() + 20, False
    while time.monotonic() < deadline and process.poll() is None:
        if any("serving" in line for line in lines):
            served = True
            process.kill()
            break
        time.sleep(0.02)
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
    reader.join(timeout=2)
    message = " ".join(line.strip() for line in lines if "admin token" not in line)[:160]
    if served:
        return "started and served on 0.0.0.0 (killed at once)", False
    mentions = "tls" in message.lower()
    return f"exit {process.returncode}: {message!r}", process.returncode not in (0, None) and process.returncode > 0 and mentions


# MARK: 9. what another account's uploads reveal

@attack("9", "chunk-existence-timing",
        "account B uploads 40 chunks account A already stores and 40 fresh ones (64 KiB, interleaved): a threshold at the "
        "pooled median tells them apart ≤ 65% of the time", informational=True)
def chunk_existence_timing(lab):
    server = lab.server("9-timing")
    alice, bob = lab.account(server, "alice"), lab.account(server, "bob")
    rng = random.Random(9)
    known = [rng.randbytes(64 << 10) for _ in range(40)]
    upload(server, alice, known)
    held, fresh = [], []
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for i in range(40):
            pair = [("held", known[i]), ("fresh", rng.randbytes(64 << 10))]
            rng.shuffle(pair)
            for kind, plain in pair:
                start = time.monotonic()
                connection.request("POST", "/v1/chunks", body=w.frames([plain]),
                                   headers={"Authorization": f"Bearer {bob}", "Content-Type": "application/octet-stream"})
                connection.getresponse().read()
                (held if kind == "held" else fresh).append(time.monotonic() - start)
    finally:
        connection.close()
    threshold = statistics.median(held + fresh)
    right = sum(t < threshold for t in held) + sum(t >= threshold for t in fresh)
    accuracy = max(right, 80 - right) / 80
    return (f"medians: held {statistics.median(held) * 1000:.2f} ms, fresh {statistics.median(fresh) * 1000:.2f} ms; "
            f"guessing rule right {accuracy:.0%}"), accuracy <= 0.65


# MARK: client-side rows: a hostile server

def pull_from(lab, tag, hostile, doc, dest_name=None):
    destination = lab.ws.join(tag, "dst", dest_name or os.path.basename(doc))
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    code, out, err = lab.client(["pull", doc, destination, "--quiet"], hostile.url, FAKE_TOKEN, lab.ws.join(tag, "state"), timeout=60)
    return code, out, err, destination


@attack("10", "extreme-mtime-pull",
        "a hostile manifest with mtime Int64.min (and Int64.max; and a package whose root and directory carry Int64.min): "
        "`xfer pull` does not crash (no signal; exit 0 or a documented code), nothing written outside")
def extreme_mtime_pull(lab):
    outside = lab.dir("10-mtime", "outside")
    docs = [Doc("Documents/tmin", [file_entry(b"hello", mtime=INT64_MIN)], mtime_ns=INT64_MIN),
            Doc("Documents/tmax", [file_entry(b"hello", mtime=INT64_MAX)], mtime_ns=INT64_MAX),
            Doc("Documents/pmin.pkg", [dir_entry("d", mtime=INT64_MIN), file_entry(b"hello", mtime=INT64_MIN, path="d/f")],
                kind=w.PACKAGE_DOC, mtime_ns=INT64_MIN)]
    hostile = lab.hostile_server({"documents": docs})
    seen, ok = [], True
    for doc in docs:
        code, _, err, _ = pull_from(lab, "10-mtime", hostile, doc.path)
        seen.append(f"{os.path.basename(doc.path)}: {exit_text(code)}")
        ok &= code == 0 or xferlab.clear_error(code, err)
    escaped = tree_listing(outside)
    return "; ".join(seen) + (f"; outside: {escaped}" if escaped else ""), ok and not escaped


@attack("11", "chunk-length-lie-pull",
        "a hostile manifest declares a chunk 200,000 bytes long; the server serves the 22-byte chunk with that id: "
        "the pull is refused (non-zero exit) and no 200,000-byte file appears at the destination (a hidden staging copy "
        "left for a resume is reported)")
def chunk_length_lie_pull(lab):
    docs = [Doc("Documents/liar.bin", [file_entry(b"twenty-two bytes long!", length=200_000)])]
    hostile = lab.hostile_server({"documents": docs})
    code, _, err, destination = pull_from(lab, "11-liar", hostile, "Documents/liar.bin")
    size = os.path.getsize(destination) if os.path.exists(destination) else None
    parent = os.path.dirname(destination)
    partials = [f"{p} ({os.path.getsize(os.path.join(parent, p))} bytes, kept for a resume)"
                for p in tree_listing(parent) if ".partial" in p and os.path.isfile(os.path.join(parent, p))]
    ok = code not in (0, None) and not is_signal(code) and size != 200_000
    return (f"pull {exit_text(code)}; destination {'absent' if size is None else f'{size} bytes'}"
            f"{'; staging left: ' + ', '.join(partials) if partials else ''}"), ok


ESCAPES = "\x1b[2J\x1b]0;pwned\x07\r"


def control_bytes(text):
    """C0 controls and DEL other than newline and tab."""
    return sorted({f"0x{ord(c):02x}" for c in text if (ord(c) < 0x20 and c not in "\n\t") or ord(c) == 0x7F})


@attack("12", "terminal-escapes",
        "a hostile server's error message holds ESC[2J and ESC]0;title BEL, and a `versions`/`ls` listing's `device` holds "
        "escapes: the client's stdout and stderr carry no ESC or other C0 control byte but newline and tab")
def terminal_escapes(lab):
    error = lab.hostile_server({"error": {"status": 404, "code": "not_found", "message": f"gone{ESCAPES} really"}})
    doc = Doc("Documents/x.txt", [file_entry(b"x")], device=f"laptop{ESCAPES}")
    device = lab.hostile_server({"documents": [doc], "versions": {doc.path: [doc.info]}})
    seen, ok = [], True
    runs = [("pull (error)", error, ["pull", "Documents/x.txt", lab.ws.join("12-escapes", "dst", "x.txt")]),
            ("ls (error)", error, ["ls"]),
            ("versions (error)", error, ["versions", "Documents/x.txt"]),
            ("versions (device)", device, ["versions", "Documents/x.txt"]),
            ("ls (device)", device, ["ls"])]
    os.makedirs(lab.ws.join("12-escapes", "dst"), exist_ok=True)
    for label, server, args in runs:
        code, out, err = lab.client(args, server.url, FAKE_TOKEN, lab.ws.join("12-escapes", "state"))
        bad = control_bytes(out + err)
        seen.append(f"{label}: {exit_text(code)}, {'controls ' + ' '.join(bad) if bad else 'clean'}")
        ok &= not bad and not is_signal(code)
    return "; ".join(seen), ok


@attack("13", "hostile-entry-names-pull",
        "hostile package manifests whose entry names are `../escape.txt`, an absolute path, or hold ESC or a newline: "
        "each pull is refused (non-zero exit) and nothing is written (no destination, no staging, nothing outside)")
def hostile_entry_names_pull(lab):
    outside = lab.dir("13-entries", "outside")
    variants = [("dotdot", "../escape.txt"), ("absolute", outside + "/absolute.txt"), ("ESC", "a\x1b[2Jb.txt"), ("newline", "a\nb.txt")]
    docs = [Doc(f"Documents/{label}.pkg", [file_entry(b"hostile", path=name)], kind=w.PACKAGE_DOC) for label, name in variants]
    hostile = lab.hostile_server({"documents": docs})
    seen, ok = [], True
    for (label, _), doc in zip(variants, docs):
        tag = f"13-entries/{label}"
        code, _, err, destination = pull_from(lab, tag, hostile, doc.path)
        written = tree_listing(os.path.dirname(destination))
        seen.append(f"{label}: {exit_text(code)}{', wrote ' + repr(written) if written else ''}")
        ok &= code not in (0, None) and not is_signal(code) and not written
    escaped = tree_listing(outside)
    return "; ".join(seen) + (f"; outside: {escaped}" if escaped else ""), ok and not escaped


# MARK: 23. a hostile server under a mount

def mount_until_ready(lab, tag, url, point):
    """`xfer mount` against `url` at `point`; the process, and whether it mounted within 30 s."""
    os.makedirs(point, exist_ok=True)
    env = dict(os.environ, XFER_SERVER=url, XFER_TOKEN=FAKE_TOKEN, XFER_STATE_DIR=lab.ws.join(tag, "state"),
               XFER_CONFIG="/nonexistent")
    process = lab.popen(["mount", point], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not os.path.ismount(point) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return process, os.path.ismount(point)


def read_through(path):
    """What reading `path` through the mount gives: its length, or the errno."""
    try:
        with open(path, "rb") as f:
            return f"{len(f.read())} bytes"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))


@attack("23", "mount-hostile-server",
        "`xfer mount` of a hostile server: package entries named `../escape.txt`, absolute or holding ESC; a chunk whose "
        "manifest declares 200,000 bytes; mtimes of Int64.min and max; a size of Int64.max; an empty change feed answered at once. The mount "
        "lists them without crashing, refuses the hostile package and the lying chunk (EIO, not their bytes), writes "
        "nothing outside, keeps serving, polls the feed at most a few times a second, and unmounts with exit 0; a listing "
        "naming `../x` is refused before anything is mounted")
def mount_hostile_server(lab):
    tag = "23-mount"
    outside = lab.dir(tag, "outside")
    names = [("dotdot", "../escape.txt"), ("absolute", outside + "/absolute.txt"), ("ESC", "a\x1b[2Jb.txt")]
    docs = [Doc(f"Documents/{label}.pkg", [file_entry(b"hostile", path=name)], kind=w.PACKAGE_DOC) for label, name in names]
    one_chunk = {"chunks": 1}  # as a server says of a file of one chunk (none: a symlink's content)
    docs += [Doc("Documents/liar.bin", [file_entry(b"twenty-two bytes long!", length=200_000)], info=one_chunk),
             Doc("Documents/tmin", [file_entry(b"min", mtime=INT64_MIN)], mtime_ns=INT64_MIN, info=one_chunk),
             Doc("Documents/tmax", [file_entry(b"max", mtime=INT64_MAX)], mtime_ns=INT64_MAX, info=one_chunk),
             Doc("Documents/huge", [file_entry(b"big")], info={"chunks": 1, "size": INT64_MAX})]
    hostile = lab.hostile_server({"documents": docs})
    point = lab.dir(tag, "mnt")
    process, mounted = mount_until_ready(lab, tag, hostile.url, point)
    if not mounted:
        return f"did not mount: {exit_text(process.poll())}", False
    try:
        listing = subprocess.run(["ls", "-lR", point], capture_output=True, text=True, timeout=60)
        packages = [f"{label}: {read_through(os.path.join(point, 'Documents', label + '.pkg', 'x'))}" for label, _ in names]
        liar = read_through(os.path.join(point, "Documents", "liar.bin"))
        times = [read_through(os.path.join(point, "Documents", name)) for name in ("tmin", "tmax", "huge")]
        polls_before = sum(1 for r in hostile.requests if "/changes" in str(r))
        time.sleep(2)
        polls = sum(1 for r in hostile.requests if "/changes" in str(r)) - polls_before
        alive = process.poll() is None
    finally:
        subprocess.run(["fusermount3", "-u", "-z", point], capture_output=True)
        process.wait(timeout=30)
    refused = lab.hostile_server({"documents": [Doc("Documents/ok", [file_entry(b"ok")],
                                                    info={"path": "../x"})]})
    bad_point = lab.dir(tag, "mnt-bad")
    bad, bad_mounted = mount_until_ready(lab, tag + "-bad", refused.url, bad_point)
    bad_code = bad.wait(timeout=30) if not bad_mounted else None
    if bad_mounted:
        subprocess.run(["fusermount3", "-u", "-z", bad_point], capture_output=True)
    escaped = tree_listing(outside)
    ok = (alive and not is_signal(listing.returncode) and liar in ("EIO",) and all(t == "3 bytes" for t in times)
          and all(p.endswith(("EIO", "ENOENT")) for p in packages) and polls <= 10 and process.returncode == 0
          and not escaped and not bad_mounted and bad_code not in (0, None) and not is_signal(bad_code))
    return (f"ls -lR {exit_text(listing.returncode)}; packages {', '.join(packages)}; liar {liar}; mtimes {times}; "
            f"{polls} feed polls in 2 s; mount {'alive' if alive else 'dead'}, unmounted {exit_text(process.returncode)}; "
            f"bad listing: {'mounted' if bad_mounted else exit_text(bad_code)}"
            + (f"; outside: {escaped}" if escaped else "")), ok


# MARK: 16. a search built to be slow

@attack("16", "query-pattern-cost",
        "an account commits 3,000 documents named with 240 `a`s and searches them with a 255-byte pattern of stars "
        "and classes (`*[a]*[a]…`, which SQL cannot narrow): every page answers in < 3 s, the whole search in < 30 s, "
        "and the server keeps serving")
def query_pattern_cost(lab):
    server = lab.server("16-query")
    token = lab.account(server, "mallory")
    status, answer, _ = upload(server, token, [b"x"])
    if status != 200:
        return f"the chunk upload failed: {describe(status, answer)}", False
    ref = w.chunk_ref(b"x")
    manifest = w.manifest(w.FILE_DOC, [{"kind": w.FILE, "chunks": [ref]}])
    for start in range(0, 3000, 1000):
        documents = [{"path": f"Documents/{'a' * 240}-{i}", "kind": "file", "size": 1, "mtime_ns": 1, "mode": 0o644,
                      "manifest": base64.b64encode(manifest).decode(), "manifest_digest": w.digest(manifest)}
                     for i in range(start, start + 1000)]
        status, answer, _ = raw_exchange(server.port, "POST", "/v1/containers/default/commits", token,
                                         json.dumps({"documents": documents}).encode())
        if status != 200 or b'"error"' in answer:
            return f"the batch commit failed: {describe(status, answer)}", False
    pattern = ("*[a]" * 64)[:254] + "b"
    page, pages, slowest, began, found = None, 0, 0.0, time.monotonic(), 0
    while pages < 100:
        path = "/v1/containers/default/query?limit=100&name=" + urllib.parse.quote(pattern, safe="")
        if page:
            path += "&page=" + urllib.parse.quote(page, safe="")
        status, answer, seconds = raw_exchange(server.port, "GET", path, token, b"", timeout=120)
        slowest = max(slowest, seconds)
        pages += 1
        if status != 200:
            return f"page {pages}: {describe(status, answer)} after {seconds:.1f} s", False
        listed = json.loads(answer)
        found += len(listed["documents"])
        page = listed.get("next")
        if not listed.get("more"):
            break
    total = time.monotonic() - began
    alive, _ = health_ok(server.port)
    return (f"{len(pattern)}-byte pattern: {pages} pages, {found} found, slowest page {slowest:.2f} s, all {total:.1f} s; "
            f"health {'ok' if alive else 'no answer'}"), slowest < 3 and total < 30 and alive and found == 0


# MARK: the web view and share links (docs/WEB.md)

def web_request(port, method, path, cookies=None, form=None, headers=None, timeout=30):
    """One browser-like request: (status, headers dict (lowercase names, Set-Cookie as a list), body bytes)."""
    sent = dict(headers or {})
    if cookies:
        sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        answer = {"set-cookie": response.msg.get_all("Set-Cookie") or []}
        for name, value in response.getheaders():
            if name.lower() != "set-cookie":
                answer[name.lower()] = value
        return response.status, answer, response.read()
    finally:
        connection.close()


def cookie_jar(jar, answer):
    for line in answer["set-cookie"]:
        name, _, rest = line.partition("=")
        value = rest.split(";")[0]
        if value and "Max-Age=0" not in line:
            jar[name] = value
        else:
            jar.pop(name, None)


def hidden(body, name):
    marker = f'name="{name}" value="'.encode()
    at = body.find(marker)
    return body[at + len(marker):body.index(b'"', at + len(marker))].decode() if at >= 0 else None


def put_file(server, token, path, content):
    """One small file document, uploaded and committed in a batch (as a device would)."""
    upload(server, token, [content])
    manifest = w.manifest(w.FILE_DOC, [{"kind": w.FILE, "chunks": [w.chunk_ref(content)]}])
    documents = [{"path": path, "kind": "file", "size": len(content), "mtime_ns": 1, "mode": 0o644,
                  "manifest": base64.b64encode(manifest).decode(), "manifest_digest": w.digest(manifest)}]
    raw_exchange(server.port, "POST", "/v1/containers/default/commits", token, json.dumps({"documents": documents}).encode())


def web_sign_in(port, token):
    """A signed-in cookie jar and the pages' CSRF token, as a browser gets them."""
    jar = {}
    status, answer, body = web_request(port, "GET", "/web/signin")
    cookie_jar(jar, answer)
    status, answer, body = web_request(port, "POST", "/web/signin", jar, {"token": token, "csrf": hidden(body, "csrf")},
                                       {"Sec-Fetch-Site": "same-origin"})
    cookie_jar(jar, answer)
    if status != 303 or "xfer_session" not in jar:
        return None, None
    status, answer, body = web_request(port, "GET", "/web/", jar)
    return jar, hidden(body, "csrf")


@attack("17", "web-cross-site-forms",
        "a signed-in browser visits a hostile page that posts the web view's delete form (with or without the right "
        "CSRF token, Origin another site); a forged session cookie, the admin token and a revoked token's session: "
        "every forged request is refused (403, or the sign-in page) and the document is intact")
def web_cross_site_forms(lab):
    server = lab.server("17-web")
    token = lab.account(server, "victim")
    put_file(server, token, "Documents/precious.txt", b"precious")
    jar, csrf = web_sign_in(server.port, token)
    if jar is None:
        return "could not sign in as a browser does", False
    form = {"csrf": csrf, "path": "Documents/precious.txt", "base": "1"}
    outcomes = []
    for label, headers, fields in [
        ("cross-site, right token", {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, form),
        ("same-site header forged off, Origin evil", {"Origin": "https://evil.example"}, form),
        ("same site, no token", {"Sec-Fetch-Site": "same-origin"}, {k: v for k, v in form.items() if k != "csrf"}),
        ("same site, another token", {"Sec-Fetch-Site": "same-origin"}, dict(form, csrf="0" * 64)),
    ]:
        status, _, _ = web_request(server.port, "POST", "/web/c/default/delete", jar, fields, headers)
        outcomes.append((label, status))
    forged, _, _ = web_request(server.port, "GET", "/web/", {"xfer_session": "ab" * 32})
    with open(os.path.join(server.data, "admin-token")) as f:
        admin = f.read().strip()
    admin_jar, _ = web_sign_in(server.port, admin)
    raw_exchange(server.port, "POST", "/v1/admin/tokens/revoke", admin, json.dumps({"token": token}).encode())
    revoked, _, _ = web_request(server.port, "GET", "/web/", jar)
    # The victim's document, read with a new token of the account.
    status, body, _ = raw_exchange(server.port, "POST", "/v1/admin/tokens", admin, json.dumps({"account": "victim"}).encode())
    fresh = json.loads(body).get("token", "") if status in (200, 201) else ""
    status, body, _ = raw_exchange(server.port, "GET", "/v1/containers/default/document?path=Documents%2Fprecious.txt", fresh, b"")
    intact = status == 200 and json.loads(body).get("state") == "current"
    refused = all(code == 403 for _, code in outcomes)
    text = ", ".join(f"{label}: {code}" for label, code in outcomes)
    text += f"; forged cookie: {forged}; admin token signs in: {admin_jar is not None}; revoked token's session: {revoked}; "
    text += f"document {'intact' if intact else 'CHANGED or unreadable'}"
    return text, refused and forged == 303 and admin_jar is None and revoked == 303 and intact


@attack("18", "share-link-guessing",
        "an attacker without the secret guesses share links, and one with a password-protected link guesses its "
        "password: made-up links answer 404, the eleventh wrong password in a minute 429 (scrypt per try before), "
        "and the server's log never holds a link's secret")
def share_link_guessing(lab):
    server = lab.server("18-share", log_level="debug")   # every request line in its log
    token = lab.account(server, "owner")
    put_file(server, token, "Documents/s.txt", b"shared")
    jar, csrf = web_sign_in(server.port, token)
    if jar is None:
        return "could not sign in as a browser does", False
    status, _, body = web_request(server.port, "POST", "/web/c/default/share", jar,
                                  {"csrf": csrf, "path": "Documents/s.txt", "base": "1", "days": "1", "password": "hunter2"},
                                  {"Sec-Fetch-Site": "same-origin"})
    at = body.find(b"/s/")
    if status != 200 or at < 0:
        return f"no link was made: {status}", False
    secret = body[at + 3:at + 3 + 64].decode()
    made_up = [web_request(server.port, "GET", "/s/" + "%064x" % random.getrandbits(256))[0] for _ in range(20)]
    codes = []
    for attempt in range(12):
        status, _, _ = web_request(server.port, "POST", "/s/" + secret, None, {"password": f"guess{attempt}"},
                                   {"Sec-Fetch-Site": "same-origin"})
        codes.append(status)
    right, _, _ = web_request(server.port, "POST", "/s/" + secret, None, {"password": "hunter2"}, {"Sec-Fetch-Site": "same-origin"})
    logged, lines = False, 0
    for name in os.listdir(os.path.dirname(server.data)):
        path = os.path.join(os.path.dirname(server.data), name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                content = f.read()
            logged = logged or secret.encode() in content
            lines += content.count("/s/…".encode())
    text = (f"20 made-up links: {sorted(set(made_up))}; wrong passwords: {codes}; the right one after them: {right}; "
            f"{lines} log lines name a link (as /s/…), the secret in {'some' if logged else 'none'}")
    return text, (set(made_up) == {404} and codes[:10] == [401] * 10 and codes[10:] == [429, 429] and right == 429
                  and not logged and lines >= 30)


# MARK: WebDAV

def dav_request(port, method, path, token, body=b"", headers=None, timeout=60):
    """One WebDAV request with HTTP Basic (the password a token): (status, headers dict, body bytes)."""
    sent = {"Authorization": "Basic " + base64.b64encode(f"attacker:{token}".encode()).decode()}
    sent.update(headers or {})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    except OSError as error:
        return None, {}, str(error).encode()
    finally:
        connection.close()


def dav_lock_body(owner, scope="shared"):
    return (f'<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:{scope}/></D:lockscope>'
            f'<D:locktype><D:write/></D:locktype><D:owner>{owner}</D:owner></D:lockinfo>').encode()


@attack("19a", "dav-lock-amplification",
        "one write token takes as many shared, depth-infinity LOCKs on a container's root as it can, each with a "
        "4 KB owner, beside 200 files; a Depth: 1 PROPFIND then lists the root: a path holds few locks, each lock "
        "appears once in the answer, and the server's memory grows by less than 100 MB")
def dav_lock_amplification(lab):
    server = lab.server("19a-dav")
    token = lab.account(server, "locker")
    for index in range(200):
        dav_request(server.port, "PUT", f"/dav/default/f{index:03}.txt", token, b"x")
    granted, refused = 0, None
    for index in range(1000):
        refused, _, _ = dav_request(server.port, "LOCK", "/dav/default/", token, dav_lock_body(f"{index:04}" + "o" * 3960),
                                    {"Depth": "infinity", "Timeout": "Second-600"})
        if refused != 200:
            break
        granted += 1
    pid = server.process.pid
    before = proc_kib(pid, "VmRSS")
    peak, sizes = before, []
    for _ in range(3):
        status, _, body = dav_request(server.port, "PROPFIND", "/dav/default/", token, b"", {"Depth": "1"}, timeout=120)
        sizes.append(len(body))
        peak = max(peak, proc_kib(pid, "VmRSS"))
    grown = (peak - before) / 1024
    text = (f"{granted} shared locks granted on the root (then {refused}); three Depth: 1 PROPFINDs of 201 "
            f"members answered {status} with {max(sizes) / 1e6:.2f} MB each; server memory +{grown:.0f} MB")
    return text, status == 207 and 0 < granted <= 16 and max(sizes) < 10_000_000 and grown < 100


@attack("19b", "dav-combined-markup",
        "names and dead properties with `<` and `&` that a combining mark (U+0301) follows or a prepended mark "
        "(U+0600) precedes: PROPFIND answers well-formed XML with the names escaped, and a PROPPATCH that hides a "
        "<D:response> behind such a mark is refused (400) and injects nothing")
def dav_combined_markup(lab):
    import xml.dom.minidom
    server = lab.server("19b-dav")
    token = lab.account(server, "marks")
    names = ["a<\u0301b.txt", "c\u0600<d&\u0301e.txt"]
    for name in names:
        dav_request(server.port, "PUT", "/dav/default/" + urllib.parse.quote(name), token, b"x")
    status, _, body = dav_request(server.port, "PROPFIND", "/dav/default/", token, b"", {"Depth": "1"})
    try:
        document = xml.dom.minidom.parseString(body)
        shown = [n.firstChild.data for n in document.getElementsByTagNameNS("DAV:", "displayname") if n.firstChild]
        listed = all(name in shown for name in names)
        parsed = "well-formed"
    except Exception as error:
        listed, parsed = False, f"NOT well-formed ({str(error)[:60]})"
    # Every < of the hidden markup behind U+0600: a scanner reading by Character sees text,
    # an XML parser of the listing sees the property closed and a response of the attacker's.
    hidden = ('</p:p></D:prop></D:propstat></D:response><D:response><D:href>/fake</D:href>'
              '<D:propstat><D:prop><p:p xmlns:p="urn:x">').replace("<", "\u0600<")
    patch = ('<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><X:p xmlns:X="urn:x">'
             + hidden + '</X:p></D:prop></D:set></D:propertyupdate>').encode()
    patched, _, _ = dav_request(server.port, "PROPPATCH", "/dav/default/" + urllib.parse.quote(names[0]), token, patch)
    _, _, after = dav_request(server.port, "PROPFIND", "/dav/default/", token, b"", {"Depth": "1"})
    injected = b"/fake" in after
    text = f"listing {status}, {parsed}, both names shown: {listed}; hidden-tag PROPPATCH {patched}; fake response in a listing: {injected}"
    return text, status == 207 and listed and patched == 400 and not injected


@attack("19c", "dav-oversized-bodies",
        "PROPFIND, PROPPATCH and LOCK bodies past the 64 KiB limit, and a PUT whose body stops before its length: "
        "413 for each oversized body, and the server logs no internal error")
def dav_oversized_bodies(lab):
    server = lab.server("19c-dav")
    token = lab.account(server, "big")
    big = b'<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>' + b" " * (80 << 10)
    codes = [dav_request(server.port, method, "/dav/default/", token, big)[0] for method in ("PROPFIND", "PROPPATCH", "LOCK")]
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    auth = base64.b64encode(f"a:{token}".encode()).decode()
    sock.sendall(f"PUT /dav/default/cut.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\nContent-Length: 1000000\r\n\r\n".encode()
                 + b"y" * 1000)
    time.sleep(0.5)
    sock.close()
    time.sleep(1)
    with open(server.log.name, "rb") as f:
        log = f.read()
    internal = log.count(b"status=500") + log.count(b'"status":"500"') + log.count(b"NIOTooManyBytesError")
    text = f"oversized PROPFIND, PROPPATCH, LOCK: {codes}; internal errors logged: {internal}"
    return text, codes == [413, 413, 413] and internal == 0


@attack("19d", "dav-get-active-content",
        "an HTML file with a script, written over WebDAV and opened with GET at /dav/ by a browser: the answer carries "
        "nosniff, a Content-Security-Policy of default-src 'none' and Content-Disposition: attachment, as the web view's")
def dav_get_active_content(lab):
    server = lab.server("19d-dav")
    token = lab.account(server, "html")
    dav_request(server.port, "PUT", "/dav/default/page.html", token, b"<script>alert(document.cookie)</script>")
    status, headers, _ = dav_request(server.port, "GET", "/dav/default/page.html", token)
    wanted = {"x-content-type-options": headers.get("x-content-type-options"),
              "content-security-policy": (headers.get("content-security-policy") or "")[:24],
              "content-disposition": (headers.get("content-disposition") or "")[:10]}
    text = f"GET {status}: " + ", ".join(f"{k}: {v or 'none'}" for k, v in wanted.items())
    return text, (status == 200 and wanted["x-content-type-options"] == "nosniff"
                  and wanted["content-security-policy"].startswith("default-src 'none'")
                  and wanted["content-disposition"] == "attachment")


# MARK: web view limits and share links, attacked again (20a-20d)

SAME_SITE = {"Sec-Fetch-Site": "same-origin"}


def share_form(port, jar, csrf, path, password="", pin=None):
    """Makes a share link from a document's page: (status, the link's secret or None)."""
    form = {"csrf": csrf, "path": path, "days": "1"}
    if password:
        form["password"] = password
    if pin is not None:
        form.update(pin="1", base=str(pin))
    status, _, body = web_request(port, "POST", "/web/c/default/share", jar, form, SAME_SITE)
    at = body.find(b"/s/")
    return status, (body[at + 3:at + 67].decode() if status == 200 and at >= 0 else None)


def unlock_share(port, secret, password):
    """Gives a link's password as its page's form does: (status, seconds)."""
    start = time.monotonic()
    status, _, _ = web_request(port, "POST", "/s/" + secret, None, {"password": password}, SAME_SITE)
    return status, time.monotonic() - start


def in_threads(count, work):
    """Runs work(i) on `count` threads released together; joins them (each bounded by its requests' timeouts)."""
    barrier = threading.Barrier(count)

    def run(i):
        barrier.wait(timeout=30)
        work(i)
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


@attack("20a", "share-password-flood",
        "account A, at its 1,000 share links, sends 120 link creations with a password in parallel (8 threads × 15: half "
        "for its own document, past the limit, half for documents it does not have) while account B opens its own "
        "password-protected link with the right password six times: each of B's unlocks answers 303 and their median is "
        "under 1 s, and a refused creation costs no scrypt (the server's CPU over the flood, less B's unlocks, under a "
        "quarter of one scrypt per refused creation)")
def share_password_flood(lab):
    server = lab.server("20a-flood")
    flooder, victim = lab.account(server, "flooder"), lab.account(server, "victim")
    put_file(server, flooder, "Documents/f.txt", b"flood")
    put_file(server, victim, "Documents/v.txt", b"the victim's")
    fjar, fcsrf = web_sign_in(server.port, flooder)
    vjar, vcsrf = web_sign_in(server.port, victim)
    if fjar is None or vjar is None:
        return "could not sign in as a browser does", False
    status, secret = share_form(server.port, vjar, vcsrf, "Documents/v.txt", "hunter2")
    if secret is None:
        return f"B's link was not made: {status}", False
    pid = server.process.pid
    before = cpu_seconds(pid)
    alone = unlock_share(server.port, secret, "hunter2")
    scrypt = max(cpu_seconds(pid) - before, 0.01)  # one unlock alone: what one scrypt costs here
    filled = []
    in_threads(8, lambda i: filled.extend(share_form(server.port, fjar, fcsrf, "Documents/f.txt")[0] for _ in range(125)))
    flood, unlocks = [], []

    def play(i):
        if i == 8:
            unlocks.extend(unlock_share(server.port, secret, "hunter2") for _ in range(6))
            return
        for j in range(15):
            path = "Documents/f.txt" if j % 2 else f"Documents/missing-{i}-{j}.txt"
            flood.append(share_form(server.port, fjar, fcsrf, path, password=f"flood{i}{j}")[0])
    before, start = cpu_seconds(pid), time.monotonic()
    in_threads(9, play)
    spent, seconds = cpu_seconds(pid) - before, time.monotonic() - start
    refused = sum(1 for s in flood if s in (404, 413))
    per_refused = (spent - len(unlocks) * scrypt) / max(refused, 1)
    times = [t for _, t in unlocks]
    median = statistics.median(times) if times else 99
    text = (f"A's links: {filled.count(200)} made, then {sorted(set(filled) - {200})}; one unlock alone {alone[0]} in "
            f"{alone[1]:.2f} s ({scrypt:.3f} s CPU); flood answers {dict(sorted((s, flood.count(s)) for s in set(flood)))} "
            f"over {seconds:.1f} s; B's unlocks {sorted(set(s for s, _ in unlocks))}, median {median:.2f} s, slowest "
            f"{max(times, default=0):.2f} s; server CPU {spent:.2f} s, {per_refused / scrypt:.2f} scrypt per refused creation")
    return text, (filled.count(200) == 1000 and len(unlocks) == 6 and all(s == 303 for s, _ in unlocks) and median < 1
                  and refused == 120 and per_refused < 0.25 * scrypt)


def multipart_upload(csrf, name, content, folder="Documents/", boundary="xferattack0boundary"):
    """The web view's upload form (the CSRF token first, as the page puts it): (content type, body)."""
    def field(key, value):
        return f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
    head = (field("csrf", csrf) + field("folder", folder)
            + f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
              f'Content-Type: application/octet-stream\r\n\r\n'.encode())
    return f"multipart/form-data; boundary={boundary}", head + content + f"\r\n--{boundary}--\r\n".encode()


def web_upload(port, jar, csrf, name, content, folder="Documents/"):
    """One file through the web view's upload form: (status, body)."""
    kind, body = multipart_upload(csrf, name, content, folder)
    headers = dict(SAME_SITE, Cookie="; ".join(f"{k}={v}" for k, v in jar.items()), **{"Content-Type": kind})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", "/web/c/default/upload", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    except OSError as error:
        return None, str(error).encode()
    finally:
        connection.close()


@attack("20b", "web-session-token-limits",
        "a server started with `--rate-limit 1 --rate-burst 10 --uploads-per-token 1`; a web session signed in with a "
        "token holds one upload open and sends a second: the second is refused (429, `uploads running`) and the first "
        "completes (303); then 40 quick page loads: most are answered 429 with Retry-After, and the token's next /v1 "
        "request is 429 too (one bucket)")
def web_session_token_limits(lab):
    server = lab.server("20b-limits", ["--rate-limit", "1", "--rate-burst", "10", "--uploads-per-token", "1"])
    token = lab.account(server, "busy")
    put_file(server, token, "Documents/seed.txt", b"seed")
    jar, csrf = web_sign_in(server.port, token)
    if jar is None:
        return "could not sign in as a browser does", False
    kind, body = multipart_upload(csrf, "held.bin", os.urandom(256 << 10))
    cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
    held = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        held.sendall((f"POST /web/c/default/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
                      f"Sec-Fetch-Site: same-origin\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                      f"Connection: close\r\n\r\n").encode() + body[:-1024])
        time.sleep(0.5)
        second, answer = web_upload(server.port, jar, csrf, "second.txt", b"second")
        held.sendall(body[-1024:])
        reply = b""
        while b"\r\n\r\n" not in reply:
            data = held.recv(65536)
            if not data:
                break
            reply += data
        first = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else None
    finally:
        held.close()
    pages = [web_request(server.port, "GET", "/web/", jar) for _ in range(40)]
    limited = [headers for status, headers, _ in pages if status == 429]
    v1, _, _ = request(server.port, "GET", "/v1/containers/default/changes?after=0", token)
    retry = limited[0].get("retry-after") if limited else None
    says = b"uploads running" in answer
    text = (f"held upload {first}; second upload at once {second}{' (uploads running)' if says else ''}; 40 page loads: "
            f"{len(limited)} answered 429 (Retry-After {retry}), the rest {sorted(set(s for s, _, _ in pages) - {429})}; "
            f"the token's next /v1 request {v1}")
    return text, first == 303 and second == 429 and says and len(limited) >= 20 and retry is not None and v1 == 429


def close_abruptly(sock, reset):
    """Closes a client socket: with a reset (SO_LINGER 0) or a plain FIN."""
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    except OSError:
        pass


def park_poll(port, token, wait):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall((f"GET /v1/containers/default/changes?after=0&wait={wait} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Authorization: Bearer {token}\r\n\r\n").encode())
    return sock


def answered(socks, seconds):
    """How many of `socks` have something to read (an answer) within `seconds`."""
    time.sleep(seconds)
    return sum(1 for s in socks if select.select([s], [], [], 0)[0])


@attack("20c", "disconnected-streams",
        "an account fills its 32 waiting change-feed requests (16 web event streams and 16 /v1 long polls, "
        "`wait=60`; a 33rd is 503), then closes them all abruptly (half with a reset, half with a FIN): within 2 s of "
        "the close 32 new long polls park again (none refused); before, the slots stayed taken until each wait ended "
        "(20-60 s)")
def disconnected_streams(lab):
    server = lab.server("20c-streams")
    token = lab.account(server, "leaver")
    jar, _ = web_sign_in(server.port, token)
    if jar is None:
        return "could not sign in as a browser does", False
    cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
    held, heads, again = [], [], []
    try:
        for _ in range(16):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(f"GET /web/c/default/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
            held.append(sock)
            held.append(park_poll(server.port, token, 60))
        time.sleep(0.5)
        for sock in held[0::2]:
            sock.settimeout(5)
            try:
                heads.append(sock.recv(4096))
            except OSError:
                heads.append(b"")
        streams = sum(1 for head in heads if b"retry: 3000\n" in head)
        extra, _, _ = request(server.port, "GET", "/v1/containers/default/changes?after=0&wait=1", token, timeout=10)
        parked_early = answered(held[1::2], 0)
        for index, sock in enumerate(held):
            close_abruptly(sock, reset=index % 4 < 2)
        closed, again, refused, back = time.monotonic(), [], None, None
        while time.monotonic() - closed < 2 and back is None:
            again = [park_poll(server.port, token, 5) for _ in range(32)]
            refused = answered(again, 0.3)
            if refused == 0:
                back = time.monotonic() - closed
            else:
                for sock in again:
                    close_abruptly(sock, reset=True)
                again = []
                time.sleep(0.1)
        after = (f"32 new long polls parked {back:.2f} s later" if back is not None
                 else f"{refused} of 32 new long polls still refused 2 s later")
        text = (f"{streams} of 16 event streams and {16 - parked_early} of 16 long polls held slots; a 33rd long poll: {extra}; "
                f"after the close: {after}")
        return text, streams == 16 and parked_early == 0 and extra == 503 and back is not None
    finally:
        for sock in held + again:
            sock.close()


@attack("20d", "pinned-link-after-delete",
        "a link pinned to version 1 of `Documents/p.txt` (v2 current); the document is deleted (the link's row then put "
        "back, as a restored backup would), then a new document is made at the same path; links pinned to version 1 are "
        "asked for while it is deleted and after: the link answers 404 both times, no new link to version 1 is made, "
        "and nothing serves the old or the new content")
def pinned_link_after_delete(lab):
    import sqlite3
    server = lab.server("20d-pinned")
    token = lab.account(server, "owner")
    jar, csrf = web_sign_in(server.port, token)
    if jar is None:
        return "could not sign in as a browser does", False
    contents = [b"first secret, version one", b"second, version two", b"a new document at the path"]
    made = [web_upload(server.port, jar, csrf, "p.txt", content)[0] for content in contents[:2]]
    status, pinned = share_form(server.port, jar, csrf, "Documents/p.txt", pin=1)
    if pinned is None:
        return f"uploads {made}; the pinned link was not made: {status}", False
    status, _, body = web_request(server.port, "GET", f"/s/{pinned}/download")
    shown = f"while live: {status}{' (version 1)' if body == contents[0] else ''}"
    database = sqlite3.connect(os.path.join(server.data, "metadata.sqlite"), timeout=10)
    try:
        row = database.execute("SELECT * FROM share_links").fetchone()
        deleted, _, _ = web_request(server.port, "POST", "/web/c/default/delete", jar,
                                    {"csrf": csrf, "path": "Documents/p.txt", "base": "2"}, SAME_SITE)
        seen, leaked, links = [], [], [pinned]

        def ask(when):
            for secret in links:
                for suffix in ("", "/download"):
                    code, _, answer = web_request(server.port, "GET", f"/s/{secret}{suffix}")
                    seen.append(code)
                    leaked.extend(f"{when}: {content[:12].decode()}…" for content in contents if content in answer)
            code, secret = share_form(server.port, jar, csrf, "Documents/p.txt", pin=1)
            tried.append((when, code))
            if secret:
                links.append(secret)
        tried = []
        ask("deleted")
        recreated = web_upload(server.port, jar, csrf, "p.txt", contents[2])[0]
        with database:
            database.execute(f"INSERT OR IGNORE INTO share_links VALUES ({', '.join('?' * len(row))})", row)
        ask("new document")
    finally:
        database.close()
    text = (f"uploads {made}, link {shown}; delete {deleted}; new document {recreated}; the links answer {seen}; "
            f"new links to version 1: {', '.join(f'{w} {c}' for w, c in tried)}; content served: {', '.join(leaked) or 'none'}")
    return text, (deleted == 303 and recreated == 303 and set(seen) == {404} and not leaked and len(links) == 1
                  and all(c == 404 for _, c in tried))


# MARK: metadata beside the quota

@attack("22", "metadata-outside-quota",
        "an account with a quota of 0 bytes writes key-value values of 32 KB into container after container (each "
        "container's own limit is 1 MiB) until the server refuses: the account keeps at most its 32 MiB metadata "
        "budget across containers, and the refusal is 507 quota_exceeded")
def metadata_outside_quota(lab):
    server = lab.server("22-meta")
    token = lab.account(server, "hoarder", quota="0")
    value = "v" * 32_000
    accepted, refusal, start = 0, None, time.monotonic()
    for container in range(48):
        for key in range(30):
            body = json.dumps({"key": f"k{key}", "value": value, "timestamp_ns": 1, "device": "d"}).encode()
            status, answer, _ = raw_exchange(server.port, "PUT", f"/v1/containers/c{container}/kv", token, body)
            if status != 200:
                refusal = describe(status, answer)
                break
            accepted += len(value) + 4
        if refusal or time.monotonic() - start > 60:
            break
    text = f"{accepted / 2**20:.1f} MiB of values accepted across containers, then {refusal or 'no refusal'}"
    return text, refusal == "507 quota_exceeded" and accepted <= (32 << 20)


@attack("22b", "documents-without-bytes",
        "an account with a quota of 0 bytes PUTs an empty file over WebDAV; another with 100 kB PUTs empty files until "
        "refused, then COPYs the folder (a COPY may add 20,000 documents a request): every version costs its quota, "
        "so the first is refused (507), the second keeps fewer than 400 documents in all, and the refusal is 507")
def documents_without_bytes(lab):
    server = lab.server("22b-empty")
    nothing = lab.account(server, "nothing", quota="0")
    first, _, _ = dav_request(server.port, "PUT", "/dav/default/empty.txt", nothing, b"")
    token = lab.account(server, "copier", quota="100000")
    dav_request(server.port, "MKCOL", "/dav/default/src/", token)
    accepted, refusal = 0, None
    for index in range(1000):
        status, _, body = dav_request(server.port, "PUT", f"/dav/default/src/e{index:04}.txt", token, b"")
        if status not in (200, 201, 204):
            refusal = status
            break
        accepted += 1
    copied, _, _ = dav_request(server.port, "COPY", "/dav/default/src/", token, b"",
                               {"Destination": f"http://127.0.0.1:{server.port}/dav/default/dst/", "Depth": "infinity"}, timeout=120)
    kept = 0
    for folder in ("src", "dst"):
        status, _, body = dav_request(server.port, "PROPFIND", f"/dav/default/{folder}/", token, b"", {"Depth": "1"})
        kept += body.count(b"<D:response>") if status == 207 else 0
    text = (f"quota 0: an empty PUT answered {first}; quota 100 kB: {accepted} empty files, then {refusal}; "
            f"COPY of the folder answered {copied}; {kept} documents and folders listed in all")
    return text, first == 507 and refusal == 507 and 0 < accepted < 400 and kept < 400


# MARK: containers shared with other accounts (24a-24g)

def shared_lab(lab, tag, role):
    """A server where alice's container `team` holds Documents/plan.txt and her `private` holds
    Documents/secret.txt; `team` is shared with bob as `role`. (server, alice, bob)."""
    server = lab.server(tag)
    alice, bob = lab.account(server, "alice"), lab.account(server, "bob")
    state = lab.dir(tag, "state-alice")
    for container, name in [("team", "plan.txt"), ("private", "secret.txt")]:
        local = os.path.join(lab.dir(tag, "files"), name)
        with open(local, "w") as f:
            f.write(name + "\n")
        lab.client(["push", local, f"Documents/{name}", "--container", container, "-q"], server.url, alice, state)
    status, body, _ = request(server.port, "PUT", "/v1/containers/team/members/bob", alice, {"role": role})
    assert status == 200, describe(status, body)
    return server, alice, bob


def team_state(server, alice):
    """What alice's team holds: its documents' paths and versions, and its values."""
    _, listing, _ = request(server.port, "GET", "/v1/containers/team/documents", alice)
    _, values, _ = request(server.port, "GET", "/v1/containers/team/kv", alice)
    documents = sorted((d["path"], d["version"]) for d in json.loads(listing)["documents"])
    return documents, [e["key"] for e in json.loads(values)["entries"]]


@attack("24a", "reader-writes",
        "bob, a reader of alice/team, tries every write: announce, commits, delete, resolve, kv PUT, key PUT, chunk "
        "upload, member PUT, share link, and WebDAV PUT, MKCOL, DELETE, MOVE on /dav/alice:team/: each refused 403, "
        "and the container holds what it held")
def reader_writes(lab):
    server, alice, bob = shared_lab(lab, "24a-reader", "reader")
    before = team_state(server, alice)
    c = "/v1/containers/alice:team"
    attempts = [
        ("POST", c + "/announce", {"path": "Documents/x", "kind": "file", "size": 1, "mtime_ns": 1, "mode": 420}),
        ("POST", c + "/commits", {"documents": []}),
        ("DELETE", c + "/document?path=Documents/plan.txt", None),
        ("POST", c + "/resolve", {"path": "Documents/plan.txt", "keep": 1, "keep_all": True}),
        ("PUT", c + "/kv", {"key": "k", "value": 1, "timestamp_ns": 1, "device": "d"}),
        ("PUT", c + "/key", {"wrapped": "AAAA", "key_id": "x"}),
        ("POST", "/v1/chunks?container=alice:team", None),
        ("PUT", c + "/members/bob", {"role": "writer"}),
        ("POST", c + "/shares", {"path": "Documents/plan.txt"}),
        ("PUT", "/dav/alice:team/x.txt", b"x"),
        ("MKCOL", "/dav/alice:team/folder", None),
        ("DELETE", "/dav/alice:team/plan.txt", None),
        ("MOVE", "/dav/alice:team/plan.txt", None),
    ]
    answers = []
    for method, path, body in attempts:
        if method == "POST" and path.startswith("/v1/chunks"):
            status, answer, _ = request(server.port, method, path, bob, w.frames([]), content_type="application/octet-stream")
        else:
            status, answer, _ = request(server.port, method, path, bob, body)
        answers.append((f"{method} {path.split('?')[0]}", status))
    refused = all(status == 403 for _, status in answers)
    after = team_state(server, alice)
    other = [f"{what}: {status}" for what, status in answers if status != 403]
    text = f"{len(answers)} writes: {'all 403' if refused else ', '.join(other)}; container unchanged: {after == before}"
    return text, refused and after == before


@attack("24b", "removed-member-feed",
        "bob, a member of alice/team, parks a change feed (`wait=60`); alice unshares bob: the feed is answered 404 "
        "within 5 s, and bob's next listing, chunk read and WebDAV PROPFIND are 404")
def removed_member_feed(lab):
    server, alice, bob = shared_lab(lab, "24b-removed", "writer")
    _, head, _ = request(server.port, "GET", "/v1/containers/alice:team/changes?after=0", bob)
    cursor = json.loads(head)["cursor"]
    answer = {}

    def park():
        answer["status"], _, answer["seconds"] = request(
            server.port, "GET", f"/v1/containers/alice:team/changes?after={cursor}&wait=60", bob, timeout=90)

    waiter = threading.Thread(target=park, daemon=True)
    waiter.start()
    time.sleep(1)
    removed, _, _ = request(server.port, "DELETE", "/v1/containers/team/members/bob", alice)
    started = time.monotonic()
    waiter.join(timeout=70)
    took = time.monotonic() - started
    after = [request(server.port, m, p, bob, b)[0] for m, p, b in [
        ("GET", "/v1/containers/alice:team/documents", None),
        ("POST", "/v1/chunks/missing?container=alice:team", {"ids": []}),
        ("PROPFIND", "/dav/alice:team/", None)]]
    text = f"unshare {removed}; the parked feed answered {answer.get('status')} {took:.1f} s later; then {after}"
    return text, removed == 204 and answer.get("status") == 404 and took < 5 and after == [404, 404, 404]


@attack("24c", "member-other-container",
        "bob, a writer of alice/team, names alice's other container alice/private (and one that does not exist) on "
        "the document, key-value, chunk and WebDAV routes: every answer is 404, the same as for a name that exists "
        "nowhere")
def member_other_container(lab):
    server, alice, bob = shared_lab(lab, "24c-other", "writer")
    answers = {}
    for name in ["alice:private", "alice:nothing"]:
        answers[name] = [request(server.port, m, p.format(name), bob, b)[0] for m, p, b in [
            ("GET", "/v1/containers/{}/documents", None),
            ("GET", "/v1/containers/{}/kv", None),
            ("PUT", "/v1/containers/{}/kv", {"key": "k", "value": 1, "timestamp_ns": 1, "device": "d"}),
            ("POST", "/v1/chunks/missing?container={}", {"ids": []}),
            ("GET", "/dav/{}/secret.txt", None)]]
    _, values, _ = request(server.port, "GET", "/v1/containers/private/kv", alice)
    untouched = json.loads(values)["entries"] == []
    text = f"alice:private {answers['alice:private']}, alice:nothing {answers['alice:nothing']}; private untouched: {untouched}"
    return text, all(status == 404 for row in answers.values() for status in row) and untouched


@attack("24d", "member-token-other-container",
        "bob holds a token of one container (`alice/team`, issued with that scope) and one of his own container "
        "`mine`: the first reaches alice/team and no other (403 for alice/private and bob's own), the second does not "
        "reach alice/team (403)")
def member_token_other_container(lab):
    server, alice, bob = shared_lab(lab, "24d-token", "reader")
    tokens = {}
    for scope in ["alice/team", "mine"]:
        status, body, _ = request(server.port, "POST", "/v1/tokens", bob, {"container": scope})
        assert status == 201, describe(status, body)
        tokens[scope] = json.loads(body)["token"]
    team = tokens["alice/team"]
    answers = [request(server.port, "GET", p, t)[0] for p, t in [
        ("/v1/containers/alice:team/documents", team),
        ("/v1/containers/alice:private/documents", team),
        ("/v1/containers/mine/documents", team),
        ("/v1/containers/alice:team/documents", tokens["mine"])]]
    return f"team token: team {answers[0]}, private {answers[1]}, mine {answers[2]}; mine token: team {answers[3]}", \
        answers == [200, 403, 403, 403]


@attack("24e", "share-to-nobody",
        "alice shares team with an account that does not exist, with herself, and as `owner`; bob (a member, not the "
        "owner) shares it on: refused (404, 400, 400, 403) and the member list stays [bob]")
def share_to_nobody(lab):
    server, alice, bob = shared_lab(lab, "24e-nobody", "writer")
    answers = [request(server.port, "PUT", p, t, b)[0] for p, t, b in [
        ("/v1/containers/team/members/nobody", alice, {"role": "reader"}),
        ("/v1/containers/team/members/alice", alice, {"role": "reader"}),
        ("/v1/containers/team/members/bob", alice, {"role": "owner"}),
        ("/v1/containers/alice:team/members/carol", bob, {"role": "reader"})]]
    _, body, _ = request(server.port, "GET", "/v1/containers/team/members", alice)
    members = [m["account"] for m in json.loads(body)["members"]]
    return f"answers {answers}; members {members}", answers == [404, 400, 400, 403] and members == ["bob"]


def encrypted_shared_lab(lab, tag, members):
    """alice's end-to-end encrypted `vault` holding Documents/plan.txt, shared as writer with each
    account in `members`, whose devices unlocked it by their account keys after comparing
    fingerprints. (server, run) where run(who, args) runs xfer as that account on its device."""
    server = lab.server(tag)
    tokens = {name: lab.account(server, name) for name in ["alice"] + members}
    passphrase = {"XFER_PASSPHRASE": "correct horse"}

    def run(who, args):
        return xferlab.run_xfer(lab.binary, args, server.url, tokens[who], lab.dir(tag, "state-" + who),
                                extra_env=passphrase)

    def fingerprint(who):
        code, out, err = run(who, ["account", "key", "--json"])
        assert code == 0, err
        return json.loads(out)["fingerprint"]

    assert run("alice", ["container", "create", "vault", "--encrypted"])[0] == 0
    plan = os.path.join(lab.dir(tag, "files"), "plan.txt")
    with open(plan, "w") as f:
        f.write("the plan\n")
    assert run("alice", ["push", plan, "Documents/plan.txt", "--container", "vault", "-q"])[0] == 0
    for member in members:
        code, _, err = run("alice", ["container", "share", "vault", member, "--role", "writer",
                                     "--fingerprint", fingerprint(member)])
        assert code == 0, err
        code, _, err = run(member, ["key", "unlock", "--container", "alice/vault",
                                    "--owner-fingerprint", fingerprint("alice")])
        assert code == 0, err
    return server, run


@attack("24f", "forged-member-key",
        "the operator of alice's server swaps the key wrapped to bob for alice's encrypted vault with one eve made (her "
        "own container key sealed to bob's account key) and records eve's key id for vault: bob's devices, which "
        "checked alice's fingerprint, refuse it (exit 4) and keep the key they had; nothing bob pushes is sealed "
        "under eve's key")
def forged_member_key(lab):
    import sqlite3

    server, run = encrypted_shared_lab(lab, "24f-forged", ["bob"])
    eve = lab.account(server, "eve")
    eve_state = lab.dir("24f-forged", "state-eve")
    env = {"XFER_PASSPHRASE": "eve"}
    xferlab.run_xfer(lab.binary, ["container", "create", "vault", "--encrypted"], server.url, eve, eve_state, extra_env=env)
    _, out, _ = run("bob", ["account", "key", "--json"])
    code, _, err = xferlab.run_xfer(lab.binary, ["container", "share", "vault", "bob", "--fingerprint",
                                                 json.loads(out)["fingerprint"]], server.url, eve, eve_state)
    assert code == 0, err
    database = sqlite3.connect(os.path.join(server.data, "metadata.sqlite"), timeout=10)
    try:
        ids = dict(database.execute("SELECT name, id FROM accounts").fetchall())
        vaults = dict(database.execute("SELECT account_id, id FROM containers WHERE name = 'vault'").fetchall())
        forged, eve_key = database.execute(
            "SELECT wrapped_key, key_id FROM container_members WHERE container_id = ?", (vaults[ids["eve"]],)).fetchone()
        with database:
            database.execute("UPDATE container_members SET wrapped_key = ?, key_id = ? WHERE container_id = ?",
                             (forged, eve_key, vaults[ids["alice"]]))
            database.execute("UPDATE container_keys SET key_id = ? WHERE container_id = ?", (eve_key, vaults[ids["alice"]]))
    finally:
        database.close()
    note = os.path.join(lab.dir("24f-forged", "files"), "note.txt")
    with open(note, "w") as f:
        f.write("bob's note\n")
    pushed = run("bob", ["push", note, "Documents/note.txt", "--container", "alice/vault", "-q"])
    unlocked = run("bob", ["key", "unlock", "--container", "alice/vault", "--owner-fingerprint", "x"])
    shown = run("bob", ["container", "show", "--container", "alice/vault", "--json"])
    kept = json.loads(shown[1]).get("key_id") if shown[0] == 0 else None
    text = (f"bob's push: exit {pushed[0]} ({pushed[2].strip()[-90:]}); unlock again: exit {unlocked[0]}; "
            f"server's key id now {eve_key}, bob unlocked under it: {json.loads(shown[1]).get('unlocked') if kept else '?'}")
    return text, pushed[0] == 4 and unlocked[0] != 0 and kept is not None and not json.loads(shown[1])["unlocked"]


@attack("24g", "removed-member-new-data",
        "alice removes carol from her encrypted vault (the key rotates) and writes new.txt; the operator then puts "
        "carol's membership back without alice: carol's device, holding every key it had, cannot open the container "
        "under its new key (exit 4, no new.txt), while bob, still a member, reads new.txt")
def removed_member_new_data(lab):
    import sqlite3

    server, run = encrypted_shared_lab(lab, "24g-rotated", ["bob", "carol"])
    code, out, err = run("alice", ["container", "unshare", "vault", "carol", "--json"])
    assert code == 0, err
    rotation = json.loads(out)["rotation"]
    new = os.path.join(lab.dir("24g-rotated", "files"), "new.txt")
    with open(new, "w") as f:
        f.write("written after carol left\n")
    assert run("alice", ["push", new, "Documents/new.txt", "--container", "vault", "-q"])[0] == 0
    database = sqlite3.connect(os.path.join(server.data, "metadata.sqlite"), timeout=10)
    try:
        ids = dict(database.execute("SELECT name, id FROM accounts").fetchall())
        vault = database.execute("SELECT id FROM containers WHERE account_id = ? AND name = 'vault'",
                                 (ids["alice"],)).fetchone()[0]
        with database:
            database.execute("INSERT INTO container_members (container_id, account_id, role, added_at) "
                             "VALUES (?, ?, 'writer', 0)", (vault, ids["carol"]))
    finally:
        database.close()
    out_carol = os.path.join(lab.dir("24g-rotated", "files"), "carol-new.txt")
    carol = run("carol", ["pull", "Documents/new.txt", out_carol, "--container", "alice/vault"])
    out_bob = os.path.join(lab.dir("24g-rotated", "files"), "bob-new.txt")
    bob = run("bob", ["pull", "Documents/new.txt", out_bob, "--container", "alice/vault"])
    bob_read = os.path.exists(out_bob) and open(out_bob).read() == "written after carol left\n"
    text = (f"rotation to key {rotation['key_id']} (generation {rotation['generation']}, wrapped to "
            f"{rotation['rewrapped']}); carol: exit {carol[0]}, file {'written' if os.path.exists(out_carol) else 'absent'}; "
            f"bob: exit {bob[0]}, read it: {bob_read}")
    return text, carol[0] == 4 and not os.path.exists(out_carol) and bob[0] == 0 and bob_read and \
        rotation["rewrapped"] == ["bob"]


# MARK: records beside documents (25a-25e)

def records_lab(lab, tag):
    """A server where alice's container `notes` holds record n1 in _defaultZone and w1 in zone
    Work, and bob is another account. (server, alice, bob)."""
    server = lab.server(tag)
    alice, bob = lab.account(server, "alice"), lab.account(server, "bob")
    status, body, _ = request(server.port, "POST", "/v1/containers/notes/zones/modify", alice,
                              {"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Work"}}}]})
    assert status == 200, describe(status, body)
    for zone, name in [("_defaultZone", "n1"), ("Work", "w1")]:
        status, body, _ = request(server.port, "POST", "/v1/containers/notes/records/modify", alice, {
            "zoneID": {"zoneName": zone},
            "operations": [{"operationType": "create", "record": {
                "recordName": name, "recordType": "Note", "fields": {"title": {"value": "secret " + name}}}}]})
        assert status == 200 and b"serverErrorCode" not in body, describe(status, body)
    return server, alice, bob


def notes_state(server, alice):
    """Every record of alice's notes, both zones, as (zone, name, tag)."""
    state = []
    for zone in ["_defaultZone", "Work"]:
        _, body, _ = request(server.port, "POST", "/v1/containers/notes/changes/zone", alice,
                             {"zones": [{"zoneID": {"zoneName": zone}}]})
        for record in json.loads(body)["zones"][0]["records"]:
            state.append((zone, record["recordName"], record.get("recordChangeTag")))
    return sorted(state)


@attack("25a", "records-cross-account",
        "bob, not a member, names alice:notes on every records route (modify, lookup, query, changes, zones, "
        "subscriptions, notifications): each 404; made a reader, his record, zone and subscription writes are 403 "
        "while his query reads; alice's records are unchanged")
def records_cross_account(lab):
    server, alice, bob = records_lab(lab, "25a-records")
    before = notes_state(server, alice)
    c = "/v1/containers/alice:notes"
    write = {"operations": [{"operationType": "forceReplace", "record": {
        "recordName": "n1", "recordType": "Note", "fields": {"title": {"value": "bob was here"}}}}]}
    reads = [("POST", c + "/records/lookup", {"records": [{"recordName": "n1"}]}),
             ("POST", c + "/records/query", {"query": {"recordType": "Note"}}),
             ("POST", c + "/changes/zone", {"zones": [{"zoneID": {"zoneName": "_defaultZone"}}]}),
             ("POST", c + "/changes/database", {}),
             ("GET", c + "/zones/list", None),
             ("GET", c + "/subscriptions/list", None),
             ("GET", c + "/notifications?since=0", None)]
    writes = [("POST", c + "/records/modify", write),
              ("POST", c + "/zones/modify", {"operations": [{"operationType": "delete", "zone": {"zoneID": {"zoneName": "Work"}}}]}),
              ("POST", c + "/subscriptions/modify", {"operations": [{"operationType": "create", "subscription": {
                  "subscriptionID": "spy", "subscriptionType": "zone"}}]})]
    outside = [request(server.port, m, p, bob, b)[0] for m, p, b in reads + writes]
    status, body, _ = request(server.port, "PUT", "/v1/containers/notes/members/bob", alice, {"role": "reader"})
    assert status == 200, describe(status, body)
    as_reader = [request(server.port, m, p, bob, b)[0] for m, p, b in writes]
    query = request(server.port, "POST", c + "/records/query", bob, {"query": {"recordType": "Note"}})
    after = notes_state(server, alice)
    text = f"not shared: {outside}; reader writes: {as_reader}; reader query: {query[0]}; records unchanged: {after == before}"
    return text, all(s == 404 for s in outside) and as_reader == [403, 403, 403] and query[0] == 200 and after == before


@attack("25b", "records-cross-zone",
        "records of zone Work are named from _defaultZone: a lookup of w1, a query and the changes of _defaultZone "
        "give nothing of Work; a modify naming a zone that does not exist answers ZONE_NOT_FOUND and makes none")
def records_cross_zone(lab):
    server, alice, _ = records_lab(lab, "25b-zones")
    c = "/v1/containers/notes"
    _, lookup, _ = request(server.port, "POST", c + "/records/lookup", alice, {"records": [{"recordName": "w1"}]})
    _, query, _ = request(server.port, "POST", c + "/records/query", alice, {"query": {"recordType": "Note"}})
    _, changes, _ = request(server.port, "POST", c + "/changes/zone", alice, {"zones": [{"zoneID": {"zoneName": "_defaultZone"}}]})
    _, missing, _ = request(server.port, "POST", c + "/records/modify", alice, {"zoneID": {"zoneName": "Nowhere"},
        "operations": [{"operationType": "create", "record": {"recordName": "x", "recordType": "Note"}}]})
    _, zones, _ = request(server.port, "GET", c + "/zones/list", alice)
    looked = json.loads(lookup)["records"][0].get("serverErrorCode")
    queried = [r.get("recordName") for r in json.loads(query)["records"]]
    changed = [r.get("recordName") for r in json.loads(changes)["zones"][0]["records"]]
    made = json.loads(missing)["records"][0].get("serverErrorCode")
    names = [z["zoneID"]["zoneName"] for z in json.loads(zones)["zones"]]
    text = f"lookup w1: {looked}; query: {queried}; changes: {changed}; modify in Nowhere: {made}; zones {names}"
    return text, looked == "NOT_FOUND" and queried == ["n1"] and changed == ["n1"] and made == "ZONE_NOT_FOUND" \
        and names == ["_defaultZone", "Work"]


@attack("25c", "oversized-records",
        "a record of 1 MiB and one more byte, one of 5,000 words to index, 201 operations, a 9 MiB body and JSON "
        "nested 100,000 deep: LIMIT_EXCEEDED, LIMIT_EXCEEDED, 400, 413 and 400, nothing stored, the server up")
def oversized_records(lab):
    server, alice, _ = records_lab(lab, "25c-oversized")
    c = "/v1/containers/notes/records/modify"

    def one(name, fields):
        return {"operations": [{"operationType": "create", "record": {"recordName": name, "recordType": "Note", "fields": fields}}]}

    big = request(server.port, "POST", c, alice, one("big", {"t": {"value": "x" * (1 << 20)}}), timeout=60)
    words = " ".join(f"w{i}" for i in range(300))
    wordy = request(server.port, "POST", c, alice, one("wordy", {f"f{i}": {"value": words} for i in range(20)}))
    many = request(server.port, "POST", c, alice, {"operations": [
        {"operationType": "create", "record": {"recordName": f"m{i}", "recordType": "Note"}} for i in range(201)]})
    huge = raw_exchange(server.port, "POST", c, alice, b"{" + b" " * (9 << 20) + b"}")
    deep = request(server.port, "POST", "/v1/containers/notes/records/query", alice,
                   b"[" * 100_000 + b"]" * 100_000, content_type="application/json")
    codes = [json.loads(big[1])["records"][0].get("serverErrorCode") if big[0] == 200 else big[0],
             json.loads(wordy[1])["records"][0].get("serverErrorCode") if wordy[0] == 200 else wordy[0],
             many[0], huge[0], deep[0]]
    _, health, _ = request(server.port, "GET", "/v1/health")
    stored = sorted(name for _, name, _ in notes_state(server, alice))
    text = f"answers {codes}; stored {stored}; health {json.loads(health).get('status') if health else None}"
    return text, codes == ["LIMIT_EXCEEDED", "LIMIT_EXCEEDED", 400, 413, 400] and stored == ["n1", "w1"]


@attack("25d", "record-query-abuse",
        "queries built to be costly: 33 filters, an IN of 257 values, 33 words of tokens, 9 sort keys, a resultsLimit "
        "of 10,000 and a continuation marker of another query: each 400 at once (under 2 s in all)")
def record_query_abuse(lab):
    server, alice, _ = records_lab(lab, "25d-queries")
    c = "/v1/containers/notes/records/query"
    equals = {"comparator": "EQUALS", "fieldName": "title", "fieldValue": {"value": "x"}}
    bodies = [
        {"query": {"recordType": "Note", "filterBy": [equals] * 33}},
        {"query": {"recordType": "Note", "filterBy": [{"comparator": "IN", "fieldName": "title",
                                                       "fieldValue": {"value": [str(i) for i in range(257)]}}]}},
        {"query": {"recordType": "Note", "filterBy": [{"comparator": "CONTAINS_ALL_TOKENS", "fieldName": "allTokens",
                                                       "fieldValue": {"value": " ".join(f"w{i}" for i in range(33))}}]}},
        {"query": {"recordType": "Note", "sortBy": [{"fieldName": f"f{i}"} for i in range(9)]}},
        {"query": {"recordType": "Note"}, "resultsLimit": 10_000},
        {"query": {"recordType": "Note"}, "continuationMarker": "q1000000.0123456789abcdef"},
    ]
    started = time.monotonic()
    codes = [request(server.port, "POST", c, alice, body)[0] for body in bodies]
    took = time.monotonic() - started
    return f"answers {codes} in {took:.2f} s", codes == [400] * 6 and took < 2


@attack("25e", "webhook-ssrf",
        "subscriptions whose webhook names what stands behind the server's firewall: 127.0.0.1, localhost, [::1], "
        "127.0.0.1 written as 2130706433 and 0x7f000001, ::ffff:127.0.0.1, 169.254.169.254, 10.0.0.1, and file:// "
        "and gopher:// URLs, against a default server (--webhooks public): each 400, none saved, and a listener on "
        "loopback gets no request after records change")
def webhook_ssrf(lab):
    server, alice, _ = records_lab(lab, "25e-webhooks")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    urls = [f"http://127.0.0.1:{port}/hook", f"http://localhost:{port}/hook", f"http://[::1]:{port}/hook",
            f"http://2130706433:{port}/hook", f"http://0x7f000001:{port}/hook", f"http://[::ffff:127.0.0.1]:{port}/",
            "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/hook", "file:///etc/passwd",
            f"gopher://127.0.0.1:{port}/"]
    codes = []
    for i, url in enumerate(urls):
        status, _, _ = request(server.port, "POST", "/v1/containers/notes/subscriptions/modify", alice, {
            "operations": [{"operationType": "create", "subscription": {
                "subscriptionID": f"s{i}", "subscriptionType": "zone", "webhook": {"url": url}}}]})
        codes.append(status)
    status, body, _ = request(server.port, "POST", "/v1/containers/notes/records/modify", alice, {
        "operations": [{"operationType": "create", "record": {"recordName": "n2", "recordType": "Note"}}]})
    connections = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            listener.accept()[0].close()
            connections += 1
        except socket.timeout:
            pass
    listener.close()
    _, listed, _ = request(server.port, "GET", "/v1/containers/notes/subscriptions/list", alice)
    saved = len(json.loads(listed)["subscriptions"])
    text = f"answers {codes}; subscriptions saved {saved}; connections to the listener {connections}"
    return text, codes == [400] * len(urls) and saved == 0 and connections == 0


# MARK: running and reporting

@attack("14", "encryption-downgrade",
        "a device holds the key of end-to-end encrypted container `vault`; the server at the same address is replaced "
        "by one where `vault` is plain (a hostile or restored server): `xfer push` and `xfer kv set` there are refused "
        "(exit 7) and the server stores nothing of the file, its name or the value")
def encryption_downgrade(lab):
    state = lab.ws.join("14-downgrade", "state")
    first = lab.server("14-downgrade/a")
    token = lab.account(first, "victim")
    passphrase = {"XFER_PASSPHRASE": "correct horse", "XFER_CONTAINER": "vault"}
    made = xferlab.run_xfer(lab.binary, ["container", "create", "vault", "--encrypted"], first.url, token, state, extra_env=passphrase)
    if made[0] != 0:
        return f"could not make the encrypted container: {made[2][-300:]}", False
    first.stop()
    # Another server at the same address, where `vault` was never encrypted.
    second = xferlab.Server(lab.binary, os.path.join(lab.dir("14-downgrade/b"), "data"), port=first.port)
    os.makedirs(second.data, mode=0o700, exist_ok=True)
    with lab.lock:
        lab.servers.append(second)
    other = lab.account(second, "victim")
    second.start(timeout=30)
    secret = lab.ws.join("14-downgrade", "quarterly-secret-plan.txt")
    with open(secret, "w") as f:
        f.write("the harbour project moves to phase two\n" * 50)
    env = {"XFER_CONTAINER": "vault"}
    pushed = xferlab.run_xfer(lab.binary, ["push", secret, "plan.txt"], second.url, other, state, extra_env=env)
    valued = xferlab.run_xfer(lab.binary, ["kv", "set", "launch", "ninth of March"], second.url, other, state, extra_env=env)
    stored = b""
    for root, _, files in os.walk(second.data):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                stored += f.read()
    leaked = [w for w in (b"harbour project", b"plan.txt", b"ninth of March", b"launch") if w in stored]
    ok = pushed[0] == 7 and valued[0] == 7 and not leaked
    return (f"push {exit_text(pushed[0])}, kv set {exit_text(valued[0])}; stored by the second server: "
            f"{', '.join(w.decode() for w in leaked) or 'none of the file, its name or the value'}"), ok


def container_key_from_recovery(text):
    """docs/FORMAT.md "End-to-end keys": a recovery key's 55 Crockford base32 digits are the 32
    key bytes, two bytes of their SHA-256 and three zero bits."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    digits = text.replace("-", "").strip().upper()
    bits = 0
    for digit in digits:
        bits = bits << 5 | alphabet.index(digit)
    raw = (bits >> 3).to_bytes(34, "big")
    key, check = raw[:32], raw[32:]
    if hashlib.sha256(key).digest()[:2] != check:
        raise ValueError("the recovery key's check bytes do not match")
    return key


@attack("15", "sealed-chunk-squat",
        "someone who knows an encrypted container's key (a device it was once unlocked on) uploads, from an account of "
        "its own, other bytes under the sealed id of a file the owner is about to push: the owner's push is refused "
        "(non-zero exit, naming another account) rather than taken as stored, and the owner's file stays as it was")
def sealed_chunk_squat(lab):
    server = lab.server("15-squat")
    owner = lab.account(server, "owner")
    mallory = lab.account(server, "mallory")
    state = lab.ws.join("15-squat", "state")
    env = {"XFER_PASSPHRASE": "correct horse", "XFER_CONTAINER": "vault"}
    made = xferlab.run_xfer(lab.binary, ["container", "create", "vault", "--encrypted"], server.url, owner, state, extra_env=env)
    if made[0] != 0:
        return f"could not make the encrypted container: {made[2][-300:]}", False
    keys = os.path.join(state, "keys")
    with open(os.path.join(keys, os.listdir(keys)[0])) as f:
        key = container_key_from_recovery("".join(line for line in f.read().splitlines() if not line.startswith("#")))
    # The keyed id of a small file (one chunk), as the owner's device will name it.
    secret = lab.ws.join("15-squat", "plan.txt")
    content = os.urandom(1500)  # incompressible: the owner's device stores it raw, so its sealed length is known
    with open(secret, "wb") as f:
        f.write(content)
    keyed = hmac.new(w.e2e_key(key, b"chunk id"), content, hashlib.sha256).digest()
    sealed_id = hashlib.sha256(b"xfer e2e chunk id v1" + keyed).digest()
    # The length the owner's sealed chunk will have (FORMAT.md "End-to-end chunks": keyed id,
    # sealed value of the Padmé-padded raw chunk), so not even the length tells them apart.
    padded = w.padme(1 + 4 + len(content) + 1)
    forged = keyed + os.urandom(4 + 8 + 16 + padded + 16)  # binds to the id; the rest is anyone's
    body = b"XFU1" + w.frame(b"", encoding=3, payload=forged, chunk_id=sealed_id, plain_length=len(forged))
    status, answer, _ = raw_exchange(server.port, "POST", "/v1/chunks", mallory, body, "application/octet-stream", 60)
    squat = describe(status, answer)
    pushed = xferlab.run_xfer(lab.binary, ["push", secret, "plan.txt"], server.url, owner, state, extra_env={"XFER_CONTAINER": "vault"})
    with open(secret, "rb") as f:
        intact = f.read() == content
    refused = pushed[0] not in (0, None) and not is_signal(pushed[0]) and "another account" in pushed[2]
    return (f"squatter's upload {squat}; owner's push {exit_text(pushed[0])}"
            f"{' (' + pushed[2].strip().splitlines()[-1][:160] + ')' if pushed[2].strip() else ''}; "
            f"owner's file {'intact' if intact else 'CHANGED'}"), refused and intact


# MARK: end-to-end: a rolled-back server, damaged sealed data (21a, 21b)

def e2e_devices(lab, tag, devices):
    """A server, an account and its end-to-end encrypted container `vault`, made on the first device; each
    other device unlocks it with the passphrase. Returns (server, token, env, states by device) or a
    failure text."""
    server = lab.server(tag)
    token = lab.account(server, "owner")
    env = {"XFER_PASSPHRASE": "correct horse", "XFER_CONTAINER": "vault"}
    states = {device: lab.ws.join(tag, f"state-{device}") for device in devices}
    made = xferlab.run_xfer(lab.binary, ["container", "create", "vault", "--encrypted"], server.url, token, states[devices[0]], extra_env=env)
    if made[0] != 0:
        return f"could not make the encrypted container: {made[2][-300:]}"
    for device in devices[1:]:
        unlocked = xferlab.run_xfer(lab.binary, ["key", "unlock"], server.url, token, states[device], extra_env=env)
        if unlocked[0] != 0:
            return f"device {device} could not unlock the container: {unlocked[2][-300:]}"
    return server, token, env, states


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


@attack("21a", "e2e-rollback",
        "end to end: device A pushes a.txt v1 then v2, device B syncs a folder (v2); the operator makes v1 current again "
        "in the metadata database (nothing sealed changed) and B's next pass lists the server whole (its kept view "
        "aged past the hour): `xfer sync --once` exits 12 naming the rollback, B's a.txt still holds v2, and "
        "`xfer pull a.txt` into B's a.txt is refused with exit 12 too")
def e2e_rollback(lab):
    import glob
    import sqlite3
    made = e2e_devices(lab, "21a-rollback", ["a", "b"])
    if isinstance(made, str):
        return made, False
    server, token, env, states = made
    source, folder = lab.ws.join("21a-rollback", "a.txt"), lab.dir("21a-rollback", "b")
    pushes = []
    for content in ("version one\n", "version two, the newer\n"):
        with open(source, "w") as f:
            f.write(content)
        pushes.append(xferlab.run_xfer(lab.binary, ["push", source, "a.txt"], server.url, token, states["a"], extra_env=env)[0])
    first = xferlab.run_xfer(lab.binary, ["sync", folder, "--once"], server.url, token, states["b"], extra_env=env)
    mine = os.path.join(folder, "a.txt")
    synced = read_text(mine)
    if pushes != [0, 0] or first[0] != 0 or synced != "version two, the newer\n":
        return f"setup: pushes {pushes}, B's first sync {exit_text(first[0])} ({last_line(first[2])}), B holds {synced!r}", False
    # The operator's rollback: the one document's v2 superseded, v1 current again.
    database = sqlite3.connect(os.path.join(server.data, "metadata.sqlite"), timeout=10)
    try:
        with database:
            (document,) = database.execute("SELECT d.id FROM documents d JOIN containers c ON c.id = d.container_id "
                                           "WHERE c.name = 'vault'").fetchone()
            database.execute("UPDATE versions SET state = 'superseded' WHERE document_id = ? AND state = 'current'", (document,))
            database.execute("UPDATE versions SET state = 'current' WHERE document_id = ? AND version = 1", (document,))
            database.execute("UPDATE documents SET current_version = 1 WHERE id = ?", (document,))
    finally:
        database.close()
    # B's kept view of the server (and its settled mark) two hours old: the next pass lists the server whole.
    for path in glob.glob(os.path.join(states["b"], "sync", "*.sqlite")):
        state = sqlite3.connect(path, timeout=10)
        try:
            with state:
                for key, value in state.execute("SELECT key, value FROM sync_meta WHERE key IN ('view_listed_at', 'settled')").fetchall():
                    parts = value.split(" ")
                    parts[-1] = str(float(parts[-1]) - 7200)
                    state.execute("UPDATE sync_meta SET value = ? WHERE key = ?", (" ".join(parts), key))
        finally:
            state.close()
    again = xferlab.run_xfer(lab.binary, ["sync", folder, "--once"], server.url, token, states["b"], extra_env=env)
    after_sync = read_text(mine)
    pulled = xferlab.run_xfer(lab.binary, ["pull", "a.txt", mine], server.url, token, states["b"], extra_env=env)
    after_pull = read_text(mine)
    elsewhere = lab.ws.join("21a-rollback", "elsewhere.txt")
    other = xferlab.run_xfer(lab.binary, ["pull", "a.txt", elsewhere], server.url, token, states["b"], extra_env=env)
    kept = lambda text: "v2 kept" if text == "version two, the newer\n" else f"now {text!r}"
    text = (f"B's sync after the rollback: {exit_text(again[0])} ({last_line(again[2])}), a.txt {kept(after_sync)}; "
            f"`xfer pull a.txt` into it: {exit_text(pulled[0])} ({last_line(pulled[2] or pulled[1]).replace(folder, 'B')}), "
            f"a.txt {kept(after_pull)}; "
            f"(B's pull into another path: {exit_text(other[0])}{', wrote v1' if os.path.exists(elsewhere) else ''})")
    return text, (again[0] == 12 and "rolled back" in again[2] and after_sync == after_pull == "version two, the newer\n"
                  and pulled[0] == 12)


@attack("21b", "sync-tag-failure-exit",
        "end to end: device A syncs keep.txt, other.txt and damaged.bin; one byte of damaged.bin's sealed chunk is "
        "flipped in the server's pack; a new device's `xfer sync --once` (twice) exits 9, not 0, naming the failed "
        "check: it holds keep.txt and other.txt, no damaged.bin, and deletes nothing (the server still has the three "
        "documents current)")
def sync_tag_failure_exit(lab):
    import glob
    import sqlite3
    made = e2e_devices(lab, "21b-damage", ["a", "c"])
    if isinstance(made, str):
        return made, False
    server, token, env, states = made
    contents = {"keep.txt": b"keep me\n", "other.txt": b"other\n", "damaged.bin": os.urandom(3000)}
    source = lab.dir("21b-damage", "a")
    for name, content in contents.items():
        with open(os.path.join(source, name), "wb") as f:
            f.write(content)
    first = xferlab.run_xfer(lab.binary, ["sync", source, "--once"], server.url, token, states["a"], extra_env=env)
    if first[0] != 0:
        return f"A's sync: {exit_text(first[0])} ({last_line(first[2])})", False
    keys = os.path.join(states["a"], "keys")
    with open(os.path.join(keys, os.listdir(keys)[0])) as f:
        key = container_key_from_recovery("".join(line for line in f.read().splitlines() if not line.startswith("#")))
    # A sealed chunk starts with its keyed id (FORMAT.md "End-to-end chunks"); one byte of the sealed value flipped.
    keyed = hmac.new(w.e2e_key(key, b"chunk id"), contents["damaged.bin"], hashlib.sha256).digest()
    flipped = 0
    for path in glob.glob(os.path.join(server.data, "packs", "*", "*")):
        with open(path, "r+b") as f:
            data = f.read()
            at = data.find(keyed)
            if at >= 0:
                f.seek(at + 32 + 40)
                f.write(bytes([data[at + 32 + 40] ^ 1]))
                flipped += 1
    if flipped != 1:
        return f"found the sealed chunk in {flipped} packs, not one", False
    folder = lab.dir("21b-damage", "c")
    passes = [xferlab.run_xfer(lab.binary, ["sync", folder, "--once"], server.url, token, states["c"], extra_env=env) for _ in range(2)]
    held = {name: open(os.path.join(folder, name), "rb").read() == contents[name]
            for name in tree_listing(folder) if name in contents}
    database = sqlite3.connect(os.path.join(server.data, "metadata.sqlite"), timeout=10)
    try:
        current = database.execute("SELECT COUNT(*) FROM versions WHERE state = 'current'").fetchone()[0]
        deletions = database.execute("SELECT COUNT(*) FROM versions WHERE state = 'deleted'").fetchone()[0]
    finally:
        database.close()
    extra = [name for name in tree_listing(folder) if name not in contents and not xferlab.internal(name)]
    text = (f"new device's passes: {', '.join(exit_text(p[0]) for p in passes)} ({last_line(passes[0][2])}); it holds "
            f"{sorted(n for n, ok in held.items() if ok)}{', other entries ' + repr(extra) if extra else ''}; the server: "
            f"{current} current, {deletions} deleted")
    return text, (all(p[0] == 9 for p in passes) and "failed their check" in passes[0][2]
                  and sorted(held) == ["keep.txt", "other.txt"] and all(held.values()) and not extra
                  and current == 3 and deletions == 0)


def run_row(lab, row):
    start = time.monotonic()
    try:
        observed, passed = row["run"](lab)
    except Exception as error:  # a row that breaks is a failure, with what broke
        observed, passed = f"the attack itself failed: {type(error).__name__}: {error}", False
    return dict(row, observed=observed, passed=bool(passed), seconds=time.monotonic() - start)


def verdict(result):
    word = "PASS" if result["passed"] else "FAIL"
    return f"{word} (info)" if result["informational"] else word


def markdown_table(results, label):
    def cell(text):
        return text.replace("|", "\\|").replace("\n", " ")
    passed = sum(r["passed"] for r in results)
    lines = [f"Last run: {time.strftime('%Y-%m-%d')}, {label}: {passed} of {len(results)} rows pass.",
             "", "| # | attack | expected (safe behaviour) | observed | result |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['number']} | `{r['name']}` | {cell(r['expected'])} | {cell(r['observed'])} | {verdict(r)} |")
    return "\n".join(lines)


def write_doc(path, results, label):
    with open(path) as f:
        text = f.read()
    begin, end = "<!-- attack-table:begin -->", "<!-- attack-table:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{path} lacks the markers {begin} / {end}")
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + markdown_table(results, label) + "\n" + end + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfer", default=os.path.join(xferlab.ROOT, ".build", "debug", "xfer"), help="the xfer binary")
    parser.add_argument("--only", help="comma-separated words; run only rows whose name or number contains one")
    parser.add_argument("--write-doc", metavar="FILE", help="regenerate the table between the attack-table markers in FILE")
    parser.add_argument("--label", help="how --write-doc names the binary (default: its path)")
    parser.add_argument("--strict", action="store_true", help="informational rows count too")
    parser.add_argument("--keep", action="store_true", help="keep the workspace")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    binary = os.path.abspath(args.xfer)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"{binary} is missing; build it (swift build) or pass --xfer PATH")
    rows = ROWS
    if args.only:
        words = [word.strip() for word in args.only.split(",") if word.strip()]
        rows = [r for r in ROWS if any(word in r["name"] or word == r["number"] for word in words)]
        if not rows:
            raise SystemExit(f"no row matches {args.only!r}; rows: {', '.join(r['name'] for r in ROWS)}")
    old_umask = os.umask(0o022)  # what a typical operator has; row 7a depends on it
    start = time.monotonic()
    results = {}
    with xferlab.Workspace("attack", keep=args.keep) as ws:
        lab = Lab(binary, ws)
        try:
            background = {}
            for row in rows:
                if row["background"]:
                    thread = threading.Thread(target=lambda r=row: results.__setitem__(r["name"], run_row(lab, r)), daemon=True)
                    thread.start()
                    background[row["name"]] = thread
            for row in rows:
                if not row["background"]:
                    results[row["name"]] = run_row(lab, row)
                    print(f"{verdict(results[row['name']]):11} {row['number']:>3} {row['name']} ({results[row['name']]['seconds']:.1f} s)", flush=True)
            for name, thread in background.items():
                thread.join(timeout=60)
                if name not in results:
                    row = next(r for r in rows if r["name"] == name)
                    results[name] = dict(row, observed="did not finish in time", passed=False, seconds=60)
                print(f"{verdict(results[name]):11} {results[name]['number']:>3} {name} ({results[name]['seconds']:.1f} s)", flush=True)
        finally:
            lab.cleanup()
            os.umask(old_umask)
        if args.keep:
            print(f"workspace kept: {ws.path}")
    ordered = [results[r["name"]] for r in rows]
    print()
    for r in ordered:
        print(f"{verdict(r):11} {r['number']:>3} {r['name']}")
        print(f"{'':16}expected: {r['expected']}")
        print(f"{'':16}observed: {r['observed']}")
    failed = [r for r in ordered if not r["passed"] and (args.strict or not r["informational"])]
    print(f"\n{len(ordered) - len(failed)} of {len(ordered)} rows pass ({sum(r['informational'] for r in ordered)} informational) "
          f"in {time.monotonic() - start:.0f} s; failing: {', '.join(r['name'] for r in failed) or 'none'}")
    if args.write_doc:
        write_doc(args.write_doc, ordered, args.label or f"`{os.path.relpath(binary, xferlab.ROOT) if binary.startswith(xferlab.ROOT) else binary}`")
    if args.json:
        xferlab.report(args.json, [{k: v for k, v in r.items() if k != "run"} for r in ordered])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
