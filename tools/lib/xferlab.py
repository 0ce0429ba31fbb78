"""Shared pieces of the suites and benchmarks (tools/suites, tools/bench): a real `xfer serve`
process on a free port, accounts, running the `xfer` client, FUSE mounts, and sampling a
process's memory.
Python's standard library only."""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def xfer_binary(configuration="debug"):
    """The built `xfer` binary (build it first: `swift build [-c release]`)."""
    path = os.path.join(ROOT, ".build", configuration, "xfer")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing; run `swift build{' -c release' if configuration == 'release' else ''}` first")
    return path


def free_port():
    """A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def terminate(process, timeout):
    """Stops a process with SIGTERM, and with SIGKILL if it still runs `timeout` seconds later.
    Returns whether it stopped on SIGTERM (or had already ended)."""
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return False
    return True


class Mount:
    """A FUSE mount at `point` made by a command that stays in the foreground (`xfer mount`,
    `rclone mount`): started, waited for until the kernel shows it, stopped with fusermount3.
    Its output goes to `log` (an open file), else its stderr is kept for the error."""

    def __init__(self, command, point, env=None, log=None, timeout=120):
        os.makedirs(point, exist_ok=True)
        self.point = point
        started = time.monotonic()
        self.process = subprocess.Popen(command, env=env, stdout=log or subprocess.DEVNULL,
                                        stderr=log or subprocess.PIPE)
        while not os.path.ismount(point):
            if self.process.poll() is not None or time.monotonic() - started > timeout:
                status = self.stop()
                said = self.process.stderr.read().decode()[-500:] if not log else f"see {log.name}"
                raise RuntimeError(f"{os.path.basename(command[0])} did not mount at {point} (exit {status}): {said}")
            time.sleep(0.01)
        self.ready = time.monotonic() - started

    def stop(self):
        """Unmounts (lazily, as a busy mount needs) and waits for the command to end.
        Returns its exit status."""
        subprocess.run(["fusermount3", "-u", "-z", self.point], capture_output=True)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode


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
        terminate(self.process, timeout=10)

    def peak_rss_kib(self):
        """The process's peak resident set (VmHWM), KiB."""
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def create_account(binary, data, name, quota="100G", extra=()):
    out = subprocess.run([binary, "account", "create", name, "--data", data, "--quota", quota] + list(extra),
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def fresh_server(binary, work, account="bench"):
    """Empties `work`, starts a server on work/data with an account: (server, the client's
    environment for it, without a state directory)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    data = os.path.join(work, "data")
    token = create_account(binary, data, account)
    server = Server(binary, data).start()
    return server, dict(os.environ, XFER_SERVER=server.url, XFER_TOKEN=token, XFER_CONFIG="/nonexistent")


class Workspace:
    """A temporary directory for one harness run, removed at exit unless `keep`."""

    def __init__(self, name, keep=False):
        self.path = tempfile.mkdtemp(prefix=f"xfer-{name}-")
        self.keep = keep

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.keep:
            print(f"kept {self.path}")
        else:
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


def internal(name):
    """The engine's own names in a synced folder (marker, trash, staging copies)."""
    return name == ".xfer" or (name.startswith(".") and ".xfer-" in name)


def tree_state(root, skip=lambda name: False):
    """Every directory, file and symlink under root (the engine's own names and those `skip`
    names left out): kind and mode, and a file's content digest or a link's target. Empty
    directories are part of a synced folder."""
    state = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not internal(d) and not skip(d) and not os.path.islink(os.path.join(directory, d))]
        for name in dirs:
            path = os.path.join(directory, name)
            try:
                state[os.path.relpath(path, root)] = ("directory", oct(os.lstat(path).st_mode & 0o777 | 0o700))
            except OSError:
                state[os.path.relpath(path, root)] = ("vanishing",)
        names = files + [d for d in os.listdir(directory) if os.path.islink(os.path.join(directory, d)) and d not in files]
        for name in names:
            if internal(name) or skip(name):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            try:
                info = os.lstat(path)
                if os.path.islink(path):
                    state[relative] = ("link", os.readlink(path))
                else:
                    with open(path, "rb") as f:
                        state[relative] = ("file", oct(info.st_mode & 0o7777), hashlib.sha256(f.read()).hexdigest())
            except OSError:
                state[relative] = ("vanishing",)
    return state


class Daemon:
    """`xfer sync FOLDER --watch --json` as a process; its events go to `log`."""

    def __init__(self, binary, folder, env, log):
        self.binary, self.folder, self.env, self.log = binary, folder, env, log
        self.process = None

    def start(self):
        self.process = subprocess.Popen([self.binary, "sync", self.folder, "--watch", "--json"], env=self.env,
                                        stdout=self.log, stderr=self.log)

    def stop(self):
        if not terminate(self.process, timeout=20):
            raise SystemExit(f"the daemon on {self.folder} did not stop within 20 s of SIGTERM")

    def check(self):
        if self.process.poll() is not None:
            raise SystemExit(f"the daemon on {self.folder} exited with {self.process.returncode}; see {self.log.name}")

    def passes(self):
        """How many passes the daemon has finished so far (its `pass` events)."""
        with open(self.log.name) as f:
            return sum(1 for line in f if '"event":"pass"' in line.replace(" ", ""))


def start_daemons(binary, server_url, token, work, folders):
    """`xfer sync --watch` on each folder, as devices a, b, … in order: each with its own state
    directory and log in `work`, no user config. Returns the started daemons and the client
    environment they share (without XFER_STATE_DIR)."""
    env = dict(os.environ, XFER_SERVER=server_url, XFER_TOKEN=token, XFER_CONFIG=os.path.join(work, "none.json"))
    daemons = []
    for device, folder in zip("abcdefgh", folders):
        log = open(os.path.join(work, f"daemon-{device}.log"), "w")
        daemon = Daemon(binary, folder, dict(env, XFER_STATE_DIR=os.path.join(work, f"state-{device}")), log)
        daemon.start()
        daemons.append(daemon)
    return daemons, env


def stop_daemons(daemons):
    """Stops every daemon, saying (not raising) if one does not stop."""
    for daemon in daemons:
        try:
            daemon.stop()
        except SystemExit as error:
            print(error, file=sys.stderr)


def converge(a, b, daemons, timeout, skip=lambda name: False):
    """Waits until the trees under a and b are the same; (seconds, files). Exits on a daemon
    that stopped, or on trees still different after `timeout` seconds (saying where)."""
    started = time.time()
    last = None
    while time.time() - started < timeout:
        for daemon in daemons:
            daemon.check()
        left, right = tree_state(a, skip), tree_state(b, skip)
        if left == right:
            return time.time() - started, len(left)
        last = (left, right)
        time.sleep(0.1)
    left, right = last
    differ = sorted(k for k in set(left) | set(right) if left.get(k) != right.get(k))
    raise SystemExit(f"the folders still differ {timeout} s later: {len(differ)} paths, e.g. "
                     + "; ".join(f"{k}: A {left.get(k)} B {right.get(k)}" for k in differ[:5]))
