"""A small hostile xfer server for the client-side rows of tools/suites/attack-suite.py.

It implements only what `xfer pull`, `xfer sync DIR --once` and `xfer versions` ask for
(docs/PROTOCOL.md): list, stat, versions, manifest (a full delta, no base), chunk download
(XFU1 frames), an empty change feed and the account. Everything it answers comes from a
scenario the suite builds, so it can lie in any way a malicious server could: symlink
documents with children, impossible modification times, chunk lengths that disagree with
the chunk, escape sequences in errors and device names, hostile package entry names.

    server = HostileServer({"documents": [Doc("Documents/a.txt", [file_entry(b"hi")])]})
    ... run the client against server.url ...
    server.close()

Standard library only; listens on 127.0.0.1 only.
"""
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import xferwire as w


class Doc:
    """One document the server offers: its entries (xferwire dicts) and its version metadata."""

    def __init__(self, path, entries, kind=w.FILE_DOC, version=1, mtime_ns=1_700_000_000_000_000_000, mode=0o644,
                 device="hostile", state="current", chunks=None, info=None):
        self.path, self.entries, self.kind = path, entries, kind
        self.chunks = dict(chunks or {})  # hex id -> plain bytes (what /v1/chunks/download sends)
        for entry in entries:
            if "content" in entry:
                self.chunks[w.chunk_ref(entry["content"])[1].hex()] = entry["content"]
        self.manifest = w.manifest(kind, entries)
        self.delta = w.delta(kind, entries)
        size = sum(length for e in entries if e["kind"] == w.FILE for length, _ in e.get("chunks", []))
        self.info = {"path": path, "version": version, "state": state, "kind": "file" if kind == w.FILE_DOC else "package",
                     "size": size, "mtime_ns": mtime_ns, "mode": mode, "base_version": None,
                     "manifest_digest": w.digest(self.manifest), "files": len(entries), "chunks": 0,
                     "device": device, "sequence": version}
        self.info.update(info or {})


def file_entry(content=b"", mtime=1_700_000_000_000_000_000, mode=0o644, path="", length=None):
    """A file entry of one chunk holding `content` (no chunk if empty); `length` may lie."""
    chunks = [w.chunk_ref(content, length)] if content else []
    return {"path": path, "kind": w.FILE, "mode": mode, "mtime": mtime, "chunks": chunks, "content": content}


def symlink_entry(target, path="", mtime=1_700_000_000_000_000_000):
    return {"path": path, "kind": w.SYMLINK, "mode": 0o777, "mtime": mtime, "target": target}


def dir_entry(path, mtime=1_700_000_000_000_000_000):
    return {"path": path, "kind": w.DIRECTORY, "mode": 0o755, "mtime": mtime}


class HostileServer:
    """Serves a scenario: {"documents": [Doc…], "error": {"status","code","message"} (every
    /v1 route but health answers it), "versions": {path: [info…]}, "chunks": {hex: plain}}."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.requests = []
        chunks = dict(scenario.get("chunks", {}))
        for doc in scenario.get("documents", []):
            chunks.update(doc.chunks)
        self.chunks = chunks
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                outer._handle(self, "GET")

            def do_POST(self):
                outer._handle(self, "POST")

            def do_PUT(self):
                outer._handle(self, "PUT")

            def do_DELETE(self):
                outer._handle(self, "DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    # MARK: answering

    @staticmethod
    def _send(handler, status, body, content_type="application/json", headers=None):
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def _error(self, handler, status, code, message):
        self._send(handler, status, {"error": {"code": code, "message": message}})

    def _doc(self, path):
        for doc in self.scenario.get("documents", []):
            if doc.path == path:
                return doc
        return None

    def _handle(self, handler, method):
        url = urllib.parse.urlsplit(handler.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        if length > 16 << 20:
            handler.close_connection = True
            return self._error(handler, 413, "too_large", "request body too large for this test server")
        body = handler.rfile.read(length) if length else b""
        self.requests.append((method, url.path))
        parts = url.path.strip("/").split("/")
        if url.path == "/v1/health":
            return self._send(handler, 200, {"status": "ok", "version": "hostile"})
        error = self.scenario.get("error")
        if error:
            return self._error(handler, error["status"], error["code"], error["message"])
        if url.path == "/v1/account":
            return self._send(handler, 200, {"name": "victim", "quota": 1 << 30, "used": 0})
        if url.path == "/v1/chunks/download" and method == "POST":
            ids = json.loads(body or b"{}").get("ids", [])
            out = bytearray(b"XFU1")
            for hex_id in ids:
                plain = self.chunks.get(hex_id)
                if plain is None:
                    return self._error(handler, 404, "not_found", "no such chunk")
                out += w.frame(plain)
            return self._send(handler, 200, bytes(out), "application/octet-stream")
        if url.path == "/v1/chunks/missing" and method == "POST":
            return self._send(handler, 200, {"ids": json.loads(body or b"{}").get("ids", [])})
        if len(parts) != 4 or parts[:2] != ["v1", "containers"]:
            return self._error(handler, 404, "not_found", "no such route")
        route = parts[3]
        docs = self.scenario.get("documents", [])
        cursor = len(docs)
        if route == "documents":
            prefix = query.get("prefix", "")
            return self._send(handler, 200, {"documents": [d.info for d in docs if d.path.startswith(prefix)], "cursor": cursor})
        if route == "changes":
            return self._send(handler, 200, {"changes": [], "keys": [], "cursor": cursor, "more": False})
        if route == "versions":
            versions = self.scenario.get("versions", {}).get(query.get("path"))
            if versions is None:
                doc = self._doc(query.get("path"))
                versions = [doc.info] if doc else []
            return self._send(handler, 200, {"versions": versions})
        doc = self._doc(query.get("path"))
        if doc is None:
            return self._error(handler, 404, "not_found", "no such document")
        if route == "document":
            return self._send(handler, 200, doc.info)
        if route == "manifest":
            headers = {"X-Xfer-Version": str(doc.info["version"]), "X-Xfer-Manifest-Digest": w.digest(doc.manifest)}
            return self._send(handler, 200, doc.delta, "application/octet-stream", headers)
        return self._error(handler, 404, "not_found", "no such route")
