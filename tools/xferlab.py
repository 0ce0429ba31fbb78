"""Shared pieces of the reliability harnesses in tools/: a real `xfer serve` process, accounts,
running the `xfer` client, and sampling a process's memory. Python's standard library only."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

from benchlib import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def xfer_binary(configuration="debug"):
    """The built `xfer` binary (build it first: `swift build [-c release]`)."""
    path = os.path.join(ROOT, ".build", configuration, "xfer")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing; run `swift build{' -c release' if configuration == 'release' else ''}` first")
    return path


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Server:
    """`xfer serve` on a free loopback port over a data directory (kept across restarts)."""

    def __init__(self, binary, data, extra=(), port=None, log_level="warning"):
        self.binary, self.data, self.extra, self.log_level = binary, data, list(extra), log_level
        self.port = port or free_port()
        self.process = None
        self.log = open(os.path.join(os.path.dirname(data), f"server-{self.port}.log"), "ab")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=20):
        self.process = subprocess.Popen([self.binary, "serve", "--data", self.data, "--listen", f"127.0.0.1:{self.port}",
                                         "--log-level", self.log_level] + self.extra, stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"xfer serve exited with {self.process.returncode}; see {self.log.name}")
            try:
                urllib.request.urlopen(self.url + "/v1/health", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("xfer serve did not answer /v1/health in time")

    def kill9(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def peak_rss_kib(self):
        """The process's peak resident set (VmHWM), KiB."""
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def create_account(binary, data, name, quota="100G"):
    out = subprocess.run([binary, "account", "create", name, "--data", data, "--quota", quota],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


class Workspace:
    """A temporary directory for one harness run, removed at exit unless `keep`."""

    def __init__(self, name, keep=False):
        self.path = tempfile.mkdtemp(prefix=f"xfer-{name}-")
        self.keep = keep

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)

    def join(self, *parts):
        return os.path.join(self.path, *parts)


def run_xfer(binary, args, server, token, state, timeout=120, extra_env=None):
    """Runs one client command. Returns (exit code, stdout, stderr); a timeout is exit code -1000."""
    env = dict(os.environ, XFER_SERVER=server, XFER_TOKEN=token, XFER_STATE_DIR=state, XFER_CONFIG="/nonexistent")
    env.update(extra_env or {})
    try:
        p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return -1000, e.stdout or "", e.stderr or ""


def clear_error(code, stderr, stdout=""):
    """An exit the CLI documents: a known code and one `xfer:` message on stderr, or with
    --json an {"error": {"code", "message"}} object on stdout (not a crash, signal or hang)."""
    if code not in (1, 3, 4, 5, 6, 7, 8, 9, 10):
        return False
    if "xfer: " in (stderr or ""):
        return True
    try:
        body = json.loads((stdout or "").strip().splitlines()[-1])
        return bool(body["error"]["code"]) and bool(body["error"]["message"])
    except (ValueError, KeyError, IndexError, TypeError):
        return False


def write_random(path, size, rng):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for start in range(0, size, 16 << 20):
            f.write(rng.randbytes(min(16 << 20, size - start)))


def edit_file(path, rng, edits=3):
    """Overwrites, inserts and appends a few small runs of random bytes."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    for _ in range(edits):
        at = rng.randrange(0, len(data) + 1)
        patch = rng.randbytes(rng.randrange(1, 4096))
        if rng.random() < 0.5:
            data[at:at + len(patch)] = patch
        else:
            data[at:at] = patch
    with open(path, "wb") as f:
        f.write(data)


def report(path, value):
    """Writes a JSON report next to the printed one."""
    if path:
        with open(path, "w") as f:
            json.dump(value, f, indent=2, sort_keys=True)
