#!/usr/bin/env python3
"""A seeded randomized check of the sync engine (in the spirit of Dropbox's CanopyCheck and
Trinity), driving the real `xfer` binary.

Two or three devices (directories, each with its own client state and its own fault proxy on a
port that never changes, so each device's server URL stays the same) and one `xfer serve`.
Device B belongs to a second account, a writer of the first account's container, which it
syncs as `check/default` (docs/SHARING.md).
Every step is drawn from one seeded stream:

  create, edit, delete, rename, chmod   files in a few directories (sizes 0-70 KB, rarely 300 KB)
  symlink                               create or retarget a symlink (dangling, outside DIR, ...)
  ignore                                write or remove a root .xferignore ignoring *.tmp and build/
  package                               create or edit NAME.pkg/ (add, change, remove a file)
  mvdir, rmdir                          move or remove a directory holding several documents
  bulk                                  create bulk/ with 60 small files, or remove it (a deletion
                                        the mass-deletion rule holds until the user confirms)
  sync                                  `xfer sync DIR --once` of one device
  sync_faulty                           the same through its proxy injecting faults (drop, reset,
                                        truncate, flip, delay): listings, feeds and transfers
                                        that fail or are cut short
  sync_concurrent                       two devices' passes at once
  kill_client                           kill -9 of a device's pass after 0-120 ms
  offline, online                       a device's proxy drops every connection, then passes again
  server_restart, server_crash          SIGTERM / SIGKILL of `xfer serve`, same data, same port
  server_crash_mid_pass                 SIGKILL of the server while a device's pass runs
  server_backup, server_restore         copy the data directory; later put that older copy back
  server_replace                        a fresh empty data directory at the same port (the account
                                        is created again; devices get its new token)

Beside the devices, `xfer mount` of the container (--no-mount: none), a device of its own:

  mount_write, mount_remove             a program writes (in place, or an editor's save renamed
                                        over) or removes a file through the mount
  mount_package                         a program adds, changes or removes a file inside a package
                                        through the mount
  mount_kill                            kill -9 of the mount, mounted again (same state directory)

  select                                a device leaves a folder out (`--exclude-path`), holds one
                                        alone (`--only`), or holds everything again; a convergence
                                        takes everything back in first

What the mount closed is promised once its queue is sent (at a convergence, with the server up,
within 60 s, kill -9s between included). At every convergence the mount must show, within 15 s
and through the change feed alone, what the devices hold.

After every step, the invariant: every content a device ever saved is still recoverable
somewhere: in a device's tree, in a device's trash (DIR/.xfer-trash), or as a kept version on
the server (current, superseded or conflict; fetched once with `xfer pull --version N` and
hashed). Cheap places are looked at first; each content keeps a witness (where it was last
found, with the stamps of its files) that is re-checked with an lstat each step.
"Saved" means: on disk at the start of a pass of its device that ended with exit 0, did not
report that document failed and did not ignore it. A content the user overwrites before any
pass saw it was never promised to anyone. Besides, whatever any pass (failed, cut short or
killed too) saw on disk must still be somewhere right after it: a pass never destroys a file.
When the server loses data on purpose (replaced, or restored from an older copy), what stays
promised is what that server and the trashes hold; a document only in a device's tree is then
as if never synced (promised again by the next successful pass that sees it), and the engine
must delete nothing on that server's word.
Every `--quiesce-every` steps and at the end, faults go away and every device syncs, round
robin, until a whole round changes nothing (a held mass deletion is confirmed as a user would,
with --allow-mass-delete); then every device's tree must be the same (paths, contents, file
modes; ignored paths aside) and `xfer status` must show every document synced or in conflict.

On a failure: the seed, the step, the last steps and a command that replays it; exit 1.
Replays are exact for the stream of steps; timings (kills, concurrent passes) are not, so a
replay may take another path after a kill.

    python3 tools/suites/sync-check.py                         # CI: 4 seeds x 200 steps, debug build
    python3 tools/suites/sync-check.py --seed 101 --seeds 8 --steps 2500 --configuration release   # long
    python3 tools/suites/sync-check.py --seed 7 --seeds 1 --steps 412   # replay a failure (as printed)
"""
import argparse
import collections
import errno
import hashlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import random

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
from xferlab import free_port  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

FILE_DIRS = ["", "d1/", "d1/d2/", "e/", "e/d2/", "build/"]
FILE_NAMES = [f"f{i}.txt" for i in range(6)] + ["g0.tmp"]
# The root .xferignore the "ignore" step writes or removes (a document like any other, so it
# reaches every device): with it, build/ and every *.tmp are left alone both ways.
IGNORE_RULES = b"# sync-check\n*.tmp\nbuild/\n"
IGNORE_DIGEST = hashlib.sha256(IGNORE_RULES).hexdigest()
PACKAGE_DIRS = ["", "d1/"]
PACKAGE_NAMES = [f"p{i}.pkg" for i in range(3)]
FAULT_KINDS = ["drop", "reset", "reset", "truncate", "truncate", "truncate", "flip", "delay"]
ACCOUNT = "check"
# Device B belongs to another account, a writer of ACCOUNT's container shared with it
# (docs/SHARING.md): it syncs the container as check/default.
MEMBER = "member"
# Every device reaches the server through its proxy, so from one address; a bit flipped in a
# response's framing leaves the client waiting for bytes that never come until the server
# closes the idle connection: 5 s here instead of 45.
SERVER_OPTIONS = ["--max-connections-per-address", "4096", "--idle-timeout", "5"]

STEPS = [  # (kind, weight)
    ("create", 11), ("edit", 15), ("delete", 5), ("rename", 5), ("chmod", 2), ("package", 8),
    ("symlink", 1.5), ("mvdir", 1), ("rmdir", 1), ("bulk", 0.5), ("ignore", 1),
    ("sync", 24), ("sync_faulty", 8), ("sync_concurrent", 4), ("kill_client", 5),
    ("offline", 2.5), ("online", 3),
    ("server_restart", 1.2), ("server_crash", 1.2), ("server_crash_mid_pass", 1.2),
    ("server_backup", 0.5), ("server_restore", 0.4), ("server_replace", 0.5),
    ("mount_write", 5), ("mount_remove", 1), ("mount_package", 3), ("mount_kill", 0.7),
    ("select", 1.5),
]


class Failure(Exception):
    pass


def internal(name):
    """xfer's own names, which sync never touches and the comparison skips."""
    return name == ".xfer" or (name.startswith(".") and ".xfer-" in name)  # IgnoreRules.isXferName


def signature(st):
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Hasher:
    """SHA-256 of files and package trees, cached by (path, inode, size, mtime, ctime)."""

    def __init__(self):
        self.cache = {}
        self.hashed = 0

    def file(self, path, st=None):
        st = st or os.lstat(path)
        key = (path,) + signature(st)
        digest = self.cache.get(key)
        if digest is None:
            if stat.S_ISLNK(st.st_mode):
                digest = "l:" + hashlib.sha256(os.readlink(path).encode()).hexdigest()
            else:
                digest = xferlab.sha256(path)
            self.cache[key] = digest
            self.hashed += 1
        return digest

    def tree(self, root):
        """A package's content: its files' relative paths and digests (modes aside). Returns
        (digest, [(relative path, mode)], {absolute path: signature})."""
        entries, modes, sigs = [], [], {}
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not internal(d))
            for name in sorted(files):
                if internal(name):
                    continue
                full = os.path.join(directory, name)
                st = os.lstat(full)
                relative = os.path.relpath(full, root)
                entries.append(f"{relative}\0{self.file(full, st)}")
                modes.append((relative, stat.S_IMODE(st.st_mode)))
                sigs[full] = signature(st)
        return "pkg:" + hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest(), sorted(modes), (root, sigs)


def scan(root, hasher):
    """A device's documents: path -> (kind, digest, modes, (package root or None, {file: signature}))."""
    docs = {}
    for directory, dirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else relative + "/"
        dirs[:] = sorted(d for d in dirs if not internal(d))
        for name in [d for d in dirs if d.endswith(".pkg")]:
            digest, modes, sigs = hasher.tree(os.path.join(directory, name))
            docs[prefix + name] = ("package", digest, tuple(modes), sigs)
        dirs[:] = [d for d in dirs if not d.endswith(".pkg")]
        for name in sorted(files):
            if internal(name):
                continue
            full = os.path.join(directory, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                docs[prefix + name] = ("symlink" if stat.S_ISLNK(st.st_mode) else "file", hasher.file(full, st), stat.S_IMODE(st.st_mode),
                                       (None, {full: signature(st)}))
    return docs


def directories(root):
    """A device's directory documents: every directory that is not a package, with its mode as
    it travels (rwx, the owner's always set)."""
    found = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not internal(d) and not d.endswith(".pkg"))
        for name in dirs:
            full = os.path.join(directory, name)
            found[os.path.relpath(full, root)] = ("directory", "", stat.S_IMODE(os.lstat(full).st_mode) & 0o777 | 0o700, (None, {}))
    return found


def package_files(root):
    return {os.path.join(d, f) for d, dirs, fs in os.walk(root) if not dirs.sort() and not [dirs.remove(x) for x in list(dirs) if internal(x)]
            for f in fs if not internal(f)}


def ignored(docs, path):
    """Whether the rules in `docs` (a scan: the root .xferignore the "ignore" step writes, if
    there) ignore `path`."""
    rules = docs.get(".xferignore")
    return rules is not None and rules[1] == IGNORE_DIGEST and (path == "build" or path.startswith("build/") or path.endswith(".tmp"))


def held_for_ignored(tree):
    """Directories of a scan `tree` that hold ignored files and nothing else (below them only
    ignored paths and such directories): a device keeps one when the other deleted it, since
    removing it would remove what the user asked never to sync."""
    held = set()
    directories = sorted((p for p, v in tree.items() if v[0] == "directory" and not ignored(tree, p)),
                         key=lambda p: -p.count("/"))
    for directory in directories:
        below = [p for p in tree if p.startswith(directory + "/")]
        if below and all(ignored(tree, p) or p in held for p in below):
            held.add(directory)
    return held


def sigs_valid(seen):
    """Whether what was hashed is still there as it was: (package root or None, {file: signature})."""
    root, sigs = seen
    if root is not None:
        try:
            files = package_files(root)
        except OSError:
            return False
        if files != set(sigs):
            return False
    for path, sig in sigs.items():
        try:
            if signature(os.lstat(path)) != sig:
                return False
        except OSError:
            return False
    return True


class Device:
    def __init__(self, name, ws, server_port, seed):
        self.name = name
        self.dir = ws.join(f"dev-{name}")
        self.state = ws.join(f"state-{name}")
        os.makedirs(self.dir)
        self.proxy = FaultProxy(server_port, seed, rate=0.0, kinds=FAULT_KINDS)
        self.online = True

    @property
    def url(self):
        return f"http://127.0.0.1:{self.proxy.port}"

    def faults(self, rate, kinds=FAULT_KINDS):
        with self.proxy.lock:
            self.proxy.rate, self.proxy.kinds = rate, list(kinds)

    def settle(self):
        """Back to its normal self: no faults when online, every connection dropped when offline."""
        self.faults(1.0, ["drop"]) if not self.online else self.faults(0.0)


class MountObserver:
    """`xfer mount` of the container beside the devices: once they converge, the mount must show
    what they hold (paths, contents, modes) within seconds, kept current by the change feed alone.
    A server replaced or restored from an older copy is another server: the mount is made again."""

    def __init__(self, check):
        self.check, self.mount, self.incarnation = check, None, None
        self.point = check.ws.join("mount")

    def ensure(self):
        if self.mount and self.mount.process.poll() is None and self.incarnation == self.check.incarnation:
            return
        self.stop()
        env = dict(os.environ, XFER_SERVER=self.check.server.url, XFER_TOKEN=self.check.token,
                   XFER_STATE_DIR=self.check.ws.join("state-mount"), XFER_CONFIG="/nonexistent")
        self.log = open(self.check.ws.join("mount.log"), "a")
        try:
            self.mount = xferlab.Mount([self.check.binary, "mount", self.point], self.point, env, log=self.log, timeout=60)
        except RuntimeError as error:
            raise Failure(str(error))
        self.incarnation = self.check.incarnation

    def kill(self):
        """kill -9 of the mount: what it closed must outlive it (the next `ensure` mounts again)."""
        if self.mount:
            self.mount.process.kill()
            self.mount.process.wait()
            subprocess.run(["fusermount3", "-u", "-z", self.point], capture_output=True)
            self.mount = None
            self.log.close()

    def queued(self):
        """What the mount's queue holds: staging files, records, packages (STATE/mount-writes/*/)."""
        root = os.path.join(self.check.ws.join("state-mount"), "mount-writes")
        return [os.path.join(root, d, n) for d in (os.listdir(root) if os.path.isdir(root) else [])
                for n in os.listdir(os.path.join(root, d))]

    def queued_paths(self):
        """The documents the mount's queue still holds a closed write of (its records name them)."""
        paths = set()
        for name in self.queued():
            if name.endswith((".json", ".package")):
                try:
                    paths.add(json.load(open(name))["path"])
                except (OSError, ValueError, KeyError):
                    pass
        return paths

    def drain(self):
        """Waits up to 60 s (the server up) until the mount has sent everything it queued."""
        deadline = time.monotonic() + 60
        while self.queued():
            if time.monotonic() > deadline:
                raise Failure(f"60 s with the server up, the mount still holds {sorted(map(os.path.basename, self.queued()))[:10]}; "
                              f"see {self.log.name}")
            time.sleep(0.2)

    def documents(self, kind):
        """The mount's file documents (`kind` "file") or packages ("package"), by walking it (no byte read)."""
        found = []
        for directory, dirs, files in os.walk(self.point):
            prefix = os.path.relpath(directory, self.point)
            prefix = "" if prefix == "." else prefix + "/"
            dirs[:] = sorted(d for d in dirs if not internal(d))
            found += [prefix + d for d in dirs if d.endswith(".pkg")] if kind == "package" else \
                [prefix + f for f in sorted(files) if not internal(f) and stat.S_ISREG(os.lstat(os.path.join(directory, f)).st_mode)]
            dirs[:] = [d for d in dirs if not d.endswith(".pkg")]
        return found

    def stop(self):
        if self.mount:
            status = self.mount.stop()
            self.mount = None
            self.log.close()
            if status != 0:
                raise Failure(f"xfer mount exited {status}; see {self.log.name}")

    def tree(self):
        tree = scan(self.point, Hasher())
        tree.update(directories(self.point))
        return tree

    def agrees(self, expected, held, rules):
        """Waits up to 15 s for the mount to show `expected` (paths held for ignored files aside,
        and paths the ignore rules in `rules`, a device's whole tree, leave out)."""
        deadline = time.monotonic() + 15
        while True:
            # Documents the devices' ignore rules leave out stay on the server (pushed before the
            # rules came): the mount shows them, the devices' trees do not count them.
            # A directory holding only such documents shows in the mount (as one holding only
            # ignored files stays on a device, `held`).
            mount = self.tree()
            judged = {p: v for p, v in mount.items() if p != ".xferignore"}
            if ".xferignore" in rules:
                judged[".xferignore"] = rules[".xferignore"]
            held_here = held_for_ignored(judged)
            shown = {p: v for p, v in mount.items() if not ignored(rules, p)}
            differ = [f"  {p}: devices {expected[p][:3] if p in expected else 'absent'} / mount {shown[p][:3] if p in shown else 'absent'}"
                      for p in sorted(set(expected) | set(shown))
                      if p not in held and p not in held_here
                      and (expected.get(p) or (None,) * 3)[:3] != (shown.get(p) or (None,) * 3)[:3]]
            if not differ:
                return
            if time.monotonic() > deadline:
                raise Failure("15 s after the devices converged, the mount shows otherwise:\n" + "\n".join(differ[:20]))
            time.sleep(0.2)


class Check:
    def __init__(self, args, seed, ws, binary, stats):
        self.args, self.seed, self.ws, self.binary, self.stats = args, seed, ws, binary, stats
        # The kinds of steps come from their own stream, so a replay draws the same kinds even
        # where a timing (a kill, two passes at once) made the devices' trees differ.
        self.kinds_rng = random.Random(seed)
        self.rng = random.Random(seed * 1_000_003 + 17)
        self.hasher = Hasher()
        self.history = collections.deque(maxlen=30)
        self.step_no = 0
        self.incarnation = 0
        self.port = free_port()
        self.server = None
        self.token = None
        self.member_token = None
        self.backup = None  # (data copy, token, member token, incarnation it was taken from)
        # The promise: content digest -> {"kind", "origin", "paths"} ...
        self.promised = {}
        # ... and where each one was last seen: ("local", seen) or ("trash", device, entry id, seen or None) or
        # ("server", incarnation, path, version).
        self.witness = {}
        # Contents a pass saw on disk, whatever its outcome: the pass itself must not destroy
        # them (checked once, after its step; a successful pass also promises them for good).
        self.transient = {}
        self.trash_index = {}  # device name -> {entry id: [(digest, sigs or None)]}
        self.server_contents = {}  # (incarnation, path, version, manifest digest) -> content digest
        self.devices = []
        self.mount = None
        # What programs closed in the mount and it has not sent yet: path -> (kind, digest).
        self.mount_pending = {}
        # Devices whose selection leaves something out (`xfer sync --exclude-path`, `--only`):
        # a convergence first takes everything back in (--select-all), so trees compare whole.
        self.selective = set()

    # ---------------------------------------------------------------- server

    def new_server(self):
        if self.server:
            self.server.log.close()
        self.incarnation += 1
        data = self.ws.join(f"data-{self.incarnation}")
        os.makedirs(data, mode=0o700)
        self.token = xferlab.create_account(self.binary, data, ACCOUNT)
        self.member_token = xferlab.create_account(self.binary, data, MEMBER)
        self.server = xferlab.Server(self.binary, data, extra=SERVER_OPTIONS, port=self.port)
        self.start_server()
        request = urllib.request.Request(
            f"{self.server.url}/v1/containers/default/members/{MEMBER}", method="PUT", data=b'{"role":"writer"}',
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=30).read()

    def start_server(self):
        for attempt in range(50):
            try:
                self.server.start()
                return
            except RuntimeError:
                if attempt == 49:
                    raise Failure(f"xfer serve did not restart on port {self.port}; see {self.server.log.name}")
                time.sleep(0.1)

    def server_versions(self, path):
        request = urllib.request.Request(f"{self.server.url}/v1/containers/default/versions?path={urllib.parse.quote(path)}",
                                         headers={"Authorization": f"Bearer {self.token}"})
        try:
            return json.loads(urllib.request.urlopen(request, timeout=30).read())["versions"]
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return []
            raise Failure(f"GET versions of {path}: HTTP {error.code}: {error.read()[:300]!r}")

    def server_content(self, path, info):
        key = (self.incarnation, path, info["version"], info.get("manifest_digest"))
        if key not in self.server_contents:
            target = self.ws.join("probe", f"{self.incarnation}-{info['version']}", os.path.basename(path))
            code, _, err = xferlab.run_xfer(self.binary, ["pull", path, target, "--version", str(info["version"]), "--quiet", "--force"],
                                            self.server.url, self.token, self.ws.join("state-probe"), timeout=120)
            if code != 0:
                raise Failure(f"the server lists {path} v{info['version']} ({info['state']}) but `xfer pull --version` exits {code}: {err[-500:]}")
            digest = self.hasher.tree(target)[0] if os.path.isdir(target) else self.hasher.file(target)
            shutil.rmtree(os.path.dirname(target), ignore_errors=True)
            self.server_contents[key] = digest
            self.stats["server_versions_fetched"] += 1
        return self.server_contents[key]

    # ---------------------------------------------------------------- clients

    def token_of(self, device):
        return self.member_token if device.name == "B" else self.token

    def env(self, device):
        return dict(os.environ, XFER_SERVER=device.url, XFER_TOKEN=self.token_of(device), XFER_STATE_DIR=device.state,
                    XFER_CONFIG="/nonexistent")

    def start_sync(self, device, extra=()):
        container = ["--container", f"{ACCOUNT}/default"] if device.name == "B" else []
        return subprocess.Popen([self.binary, "sync", device.dir, "--once", "--json"] + container + list(extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(device))

    def finish_sync(self, device, process, before, kind, must_succeed, killed=False):
        try:
            out, err = process.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            raise Failure(f"{kind} of {device.name} hung (killed after 180 s): {err[-1000:]}")
        code = process.returncode
        events = []
        for line in out.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
        summary = next((e["summary"] for e in events if e.get("event") == "pass"), None)
        failed = {e.get("path") for e in events if e.get("event") in ("failed", "retry")}
        for e in events:
            name = e.get("event")
            if name in ("conflict", "server_changed", "deletions_held", "failed", "uploaded", "downloaded", "removed_locally", "removed_remotely"):
                self.stats["events"][name] = self.stats["events"].get(name, 0) + 1
        for path, (doc_kind, digest, _, seen) in before.items():
            if digest not in self.promised and digest not in self.transient:
                self.transient[digest] = {"kind": doc_kind, "origin": f"{device.name}:{path} (on disk when its {kind} of step {self.step_no} began)",
                                          "paths": {path}}
                self.witness[digest] = ("local", seen)
            (self.promised.get(digest) or self.transient[digest])["paths"].add(path)
        if killed and code == -signal.SIGKILL:
            self.stats["passes_killed"] += 1
        elif code == 0:
            self.stats["passes_ok"] += 1
            # The promise: what was on disk when a successful pass began.
            for path, (doc_kind, digest, _, seen) in before.items():
                # An ignored file is never uploaded: the pass must leave it alone (the check
                # after this step), but nothing is promised about it.
                if path not in failed and digest not in self.promised and not ignored(before, path):
                    entry = self.transient.pop(digest)
                    entry["origin"] = f"{device.name}:{path} (seen by the successful pass of step {self.step_no})"
                    self.promised[digest] = entry
        elif must_succeed:
            raise Failure(f"{kind} of {device.name} exited {code} with the server up and no faults:\n{self.keep_output(device, err)}")
        elif code < 0 or not xferlab.clear_error(code, err, out):
            raise Failure(f"{kind} of {device.name} exited {code} without a clear error (a crash?):\n{self.keep_output(device, err)}")
        else:
            self.stats["passes_failed_cleanly"] += 1
            self.stats["exit_codes"][str(code)] = self.stats["exit_codes"].get(str(code), 0) + 1
        return code, summary, events, err

    def keep_output(self, device, err):
        """The whole standard error of a failed pass goes to a file (a crash report is long)."""
        path = self.ws.join(f"stderr-step{self.step_no}-{device.name}.txt")
        with open(path, "w") as f:
            f.write(err)
        return (err if len(err) <= 3000 else err[:2000] + "\n[...]\n" + err[-1000:]) + f"\n(all of it in {path})"

    def sync(self, device, kind="sync", must_succeed=None, extra=()):
        before = scan(device.dir, self.hasher)
        if must_succeed is None:
            must_succeed = device.online and device.proxy.rate == 0 and self.server_up()
        return self.finish_sync(device, self.start_sync(device, extra), before, kind, must_succeed)

    def server_up(self):
        return self.server.process is not None and self.server.process.poll() is None

    # ---------------------------------------------------------------- the invariant

    def refresh_trash(self, device):
        index = self.trash_index.setdefault(device.name, {})
        root = os.path.join(device.dir, ".xfer-trash")
        try:
            ids = {n for n in os.listdir(root) if not n.endswith(".json")}
        except FileNotFoundError:
            ids = set()
        for gone in set(index) - ids:
            del index[gone]
        for entry in ids - set(index):
            found = []
            top = os.path.join(root, entry)
            for directory, dirs, files in os.walk(top):
                for name in dirs:
                    digest, _, sigs = self.hasher.tree(os.path.join(directory, name))
                    found.append((digest, sigs))
                for name in files:
                    full = os.path.join(directory, name)
                    st = os.lstat(full)
                    # A hard link still shared with a live file can change with it: check it each time.
                    found.append((self.hasher.file(full, st), (None, {full: signature(st)}) if st.st_nlink > 1 else None))
            index[entry] = found
        return index

    def witness_valid(self, digest, trash_ids):
        w = self.witness.get(digest)
        if w is None:
            return False
        if w[0] == "local":
            return sigs_valid(w[1])
        if w[0] == "trash":
            return w[2] in trash_ids.get(w[1], ()) and (w[3] is None or sigs_valid(w[3]))
        return w[1] == self.incarnation

    def check(self):
        """Every promised content is somewhere: a tree, a trash, a version on the server."""
        trash_ids = {}
        for device in self.devices:
            root = os.path.join(device.dir, ".xfer-trash")
            try:
                trash_ids[device.name] = {n for n in os.listdir(root) if not n.endswith(".json")}
            except FileNotFoundError:
                trash_ids[device.name] = set()
        need = [d for d in list(self.promised) + list(self.transient) if not self.witness_valid(d, trash_ids)]
        if not need:
            return []
        self.last_seen = {d: self.witness.get(d) for d in need}
        local = {}
        for device in self.devices:
            for path, (_, digest, _, sigs) in scan(device.dir, self.hasher).items():
                local.setdefault(digest, ("local", sigs))
        for device in self.devices:
            for entry, found in self.refresh_trash(device).items():
                for digest, sigs in found:
                    local.setdefault(digest, ("trash", device.name, entry, sigs))
        missing = []
        versions = {}
        for digest in need:
            if digest in local:
                self.witness[digest] = local[digest]
                continue
            found = self.on_server(digest, versions)
            if found:
                self.witness[digest] = found
            else:
                missing.append(digest)
        return missing

    def on_server(self, digest, versions):
        """A kept version of the server with this content, looked for under every path it was seen at."""
        for path in sorted(self.entry(digest)["paths"]):
            if path not in versions:
                versions[path] = self.server_versions(path)
            for info in versions[path]:
                if info["state"] in ("current", "superseded", "conflict") and self.server_content(path, info) == digest:
                    return ("server", self.incarnation, path, info["version"])
        return None

    def check_or_fail(self):
        missing = self.check()
        if missing:
            lines = []
            for digest in missing:
                p = self.entry(digest)
                lines.append(f"  {p['kind']} {digest[:16]}… first saved as {p['origin']}; paths {sorted(p['paths'])}; "
                             f"last seen {describe(self.last_seen.get(digest))}")
            raise Failure(f"{len(missing)} saved content(s) are nowhere (no tree, no trash, no version on the server):\n" + "\n".join(lines))

    def entry(self, digest):
        return self.promised.get(digest) or self.transient[digest]

    def end_step(self):
        self.check_or_fail()
        for digest in self.transient:
            self.witness.pop(digest, None)
        self.transient.clear()

    def rebaseline(self, why):
        """The server lost data on purpose. What its versions held and no trash does is gone
        with it; what is only in a device's tree is a document as if never synced (a user may
        overwrite it before a pass of that device sees it again, and the next successful pass
        promises it again). What stays promised: the kept versions of the server now there, and
        every trash (sync's own copies, which nothing but their age may remove)."""
        trash, versions = {}, {}
        for device in self.devices:
            for entry, found in self.refresh_trash(device).items():
                for digest, seen in found:
                    trash.setdefault(digest, ("trash", device.name, entry, seen))
        for digest in list(self.promised):
            found = trash.get(digest) or self.on_server(digest, versions)
            if found:
                self.witness[digest] = found
            else:
                del self.promised[digest]
                self.witness.pop(digest, None)
                self.stats["promises_reset_by_server_loss"] += 1
        if self.mount:
            # What the mount sent went with the server; what it still queues goes to this one.
            queued = self.mount.queued_paths()
            self.mount_pending = {p: v for p, v in self.mount_pending.items() if p in queued}
        self.log(f"  ({why}: {len(self.promised)} contents stay promised, on that server or in a trash)")

    # ---------------------------------------------------------------- convergence

    def quiesce(self, final=False):
        for device in self.devices:
            device.online = True
            device.settle()
        if not self.server_up():
            self.start_server()
        if self.mount:
            self.promise_mount_writes()
        for device in self.devices:
            if device.name in self.selective:
                self.sync(device, "quiesce", must_succeed=True, extra=["--select-all"])
                self.end_step()
        self.selective.clear()
        rounds = 0
        while True:
            rounds += 1
            if rounds > self.args.max_rounds:
                raise Failure(f"the devices did not converge in {self.args.max_rounds} rounds of passes without faults; the last round:\n"
                              + "\n".join(last_round))
            changed = False
            last_round = []
            for device in self.devices:
                code, summary, events, err = self.sync(device, "quiesce", must_succeed=True)
                if summary is None:
                    raise Failure(f"a pass of {device.name} printed no summary:\n{err[-1000:]}")
                if summary["deletions_held"]:
                    # The user reads the message and confirms (xfer sync --once --allow-mass-delete).
                    self.end_step()
                    self.stats["mass_deletions_confirmed"] += 1
                    self.log(f"  {device.name}: {summary['deletions_held']} deletions held; confirmed with --allow-mass-delete")
                    code, summary, events, err = self.sync(device, "quiesce", must_succeed=True, extra=["--allow-mass-delete"])
                if any(summary[k] for k in ("uploaded", "downloaded", "removed_locally", "removed_remotely", "directories", "failed",
                                                  "deletions_held")):
                    changed = True
                last_round.append(f"  {device.name}: {brief(summary)}")
                last_round += [f"    {e['event']} {e.get('path', '')} {e.get('version', '')} {e.get('message', '')}".rstrip()
                               for e in events if e.get("event") not in ("pass", "conflict")]
                self.end_step()
            if not changed:
                break
        self.stats["convergence_rounds"][str(rounds)] = self.stats["convergence_rounds"].get(str(rounds), 0) + 1
        self.stats["quiesces"] += 1
        trees, held, whole = {}, {}, {}
        for device in self.devices:
            tree = scan(device.dir, self.hasher)
            tree.update(directories(device.dir))
            whole[device.name] = tree
            held[device.name] = held_for_ignored(tree)
            trees[device.name] = {p: v for p, v in tree.items() if not ignored(tree, p)}
        first = self.devices[0].name
        for device in self.devices[1:]:
            a, b = trees[first], trees[device.name]
            differ = []
            for path in sorted(set(a) | set(b)):
                x, y = a.get(path), b.get(path)
                if (x is None and path in held[device.name]) or (y is None and path in held[first]):
                    continue  # kept on one device only for the ignored files in it
                if x is None or y is None or x[:3] != y[:3]:
                    differ.append(f"  {path}: {first} {x[:3] if x else 'absent'} / {device.name} {y[:3] if y else 'absent'}")
            if differ:
                raise Failure(f"after {rounds} quiet rounds the trees of {first} and {device.name} differ:\n" + "\n".join(differ[:20]))
        for device in self.devices:
            code, out, err = xferlab.run_xfer(self.binary, ["status", device.dir, "--json"], device.url, self.token_of(device),
                                              device.state)
            if code != 0:
                raise Failure(f"xfer status of {device.name} exited {code}: {err[-500:]}")
            bad = []
            for d in json.loads(out)["documents"]:
                if d["state"] in ("synced", "conflict"):
                    continue
                if d["state"] == "pending_download" and d["path"] in held[device.name]:
                    continue  # deleted elsewhere, removed here once its ignored files are gone
                bad.append(f"{d['path']} {d['state']}")
            if bad:
                raise Failure(f"converged, yet xfer status of {device.name} shows: {', '.join(bad[:10])}")
        # Kept versions: once in a while, verify every server witness is still listed as it was.
        verified = {}
        for digest, w in list(self.witness.items()):
            if w[0] == "server":
                if w[2] not in verified:
                    verified[w[2]] = {v["version"]: v for v in self.server_versions(w[2])}
                if w[3] not in verified[w[2]] or self.server_content(w[2], verified[w[2]][w[3]]) != digest:
                    self.witness.pop(digest)
        self.check_or_fail()
        if self.mount:
            self.mount.ensure()
            self.mount.agrees(trees[first], held[first], rules=whole[first])
            self.stats["mount_checks"] += 1
        self.stats["documents_at_quiesce"].append(len(trees[first]))
        self.log(f"  converged in {rounds} round(s): {len(trees[first])} documents alike on {len(self.devices)} devices")
        return rounds

    def promise_mount_writes(self):
        """Once the mount sent its queue, what programs closed in it is promised, as a pass's
        files are: on a device, in a trash or as a kept version from then on."""
        self.mount.ensure()
        self.mount.drain()
        for path, (kind, digest) in self.mount_pending.items():
            if digest not in self.promised:
                self.promised[digest] = {"kind": kind, "origin": f"mount:{path} (closed there, sent by step {self.step_no})",
                                         "paths": {path}}
        self.stats["mount_writes_promised"] += len(self.mount_pending)
        self.mount_pending.clear()

    # ---------------------------------------------------------------- steps

    def log(self, text):
        self.history.append(text)
        if self.args.verbose:
            print(text, flush=True)

    def content(self, who, path, old=None):
        header = f"sync-check seed {self.seed} step {self.step_no} device {who} path {path}\n".encode()
        size = self.rng.choice([self.rng.randrange(0, 200), self.rng.randrange(200, 4000), self.rng.randrange(4000, 70000)])
        if self.rng.random() < 0.02:
            size = self.rng.randrange(100_000, 300_000)
        if old is not None and self.rng.random() < 0.6 and len(old) > 0:
            # An edit of part of the old bytes, the rest kept (so chunks are shared).
            body = bytearray(old.split(b"\n", 1)[-1] if old.startswith(b"sync-check") else old)
            at = self.rng.randrange(0, len(body) + 1)
            patch = self.rng.randbytes(self.rng.randrange(1, 2000))
            body[at:at + (len(patch) if self.rng.random() < 0.5 else 0)] = patch
            return header + bytes(body)
        return header + self.rng.randbytes(size)

    def write(self, full, data):
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.exists(full) and self.rng.random() < 0.5:
            temp = os.path.join(os.path.dirname(full), f"tmp-{self.step_no}")  # an editor's save: a new file renamed over
            with open(temp, "wb") as f:
                f.write(data)
            mode = stat.S_IMODE(os.lstat(full).st_mode)
            os.chmod(temp, mode)
            os.rename(temp, full)
        else:
            with open(full, "wb") as f:  # in place
                f.write(data)

    def docs(self, device, kind=None, bulk=None):
        """The device's documents (of a kind), bulk/ left out nine times in ten."""
        found = scan(device.dir, self.hasher)
        bulk = self.rng.random() < 0.1 if bulk is None else bulk
        return sorted(p for p, v in found.items() if (kind is None or v[0] == kind) and (bulk or not p.startswith("bulk/"))
                      and p != ".xferignore")

    def free_path(self, device, kind):
        docs = set(self.docs(device, bulk=True))
        dirs, names = (FILE_DIRS, FILE_NAMES) if kind == "file" else (PACKAGE_DIRS, PACKAGE_NAMES)
        choices = [d + n for d in dirs for n in names if d + n not in docs and not os.path.lexists(os.path.join(device.dir, d + n))]
        return self.rng.choice(choices) if choices else None

    def pick_device(self, online=None):
        pool = [d for d in self.devices if online is None or d.online == online]
        return self.rng.choice(pool) if pool else None

    def mount_step(self, kind):
        """A program using the mount: what it closes is the mount's to send (queued while the
        server is down); a write the mount refuses (a file whose bytes cannot be fetched now,
        a version changed meanwhile) is counted, and promises nothing."""
        if not self.mount:
            return f"{kind}: no mount"
        if kind == "mount_kill":
            self.mount.kill()
            if self.server_up():
                self.mount.ensure()
            return "mount_kill" + ("" if self.mount.mount else " (mounted again once the server is up)")
        if self.server_up():
            self.mount.ensure()  # mounted again after a kill, or for a server replaced or restored
        elif not self.mount.mount:
            return f"{kind}: not mounted (the server is down)"
        try:
            return self.mount_change(kind)
        except OSError as error:
            name = errno.errorcode.get(error.errno, str(error.errno))
            self.stats["mount_refusals"][name] = self.stats["mount_refusals"].get(name, 0) + 1
            return f"{kind}: refused ({name}: {error.strerror})"

    def mount_change(self, kind):
        rng, root = self.rng, self.mount.point
        if kind == "mount_write":
            files = [p for p in self.mount.documents("file") if p != ".xferignore"]  # the "ignore" step's alone
            if files and rng.random() < 0.6:
                path = rng.choice(files)
                with open(os.path.join(root, path), "rb") as f:
                    data = self.content("mount", path, f.read())
            else:
                # A new file at a free name (not through a symlink there, which writes its target).
                free = [d + n for d in FILE_DIRS for n in FILE_NAMES if not os.path.lexists(os.path.join(root, d + n))]
                if not free:
                    return "mount_write: namespace full"
                path = rng.choice(free)
                data = self.content("mount", path)
            self.write(os.path.join(root, path), data)
            self.mount_pending[path] = ("file", hashlib.sha256(data).hexdigest())
            return f"mount_write {path}"
        if kind == "mount_remove":
            files = [p for p in self.mount.documents("file") if p != ".xferignore"]
            if not files:
                return "mount_remove: no file"
            path = rng.choice(files)
            os.unlink(os.path.join(root, path))
            self.mount_pending.pop(path, None)
            return f"mount_remove {path}"
        packages = self.mount.documents("package")
        if not packages:
            return "mount_package: no package"
        path = rng.choice(packages)
        inside = sorted(os.path.relpath(os.path.join(d, f), os.path.join(root, path))
                        for d, _, fs in os.walk(os.path.join(root, path)) for f in fs)
        if inside and rng.random() < 0.2:
            victim = rng.choice(inside)
            os.unlink(os.path.join(root, path, victim))
            what = f"removed {victim}"
        else:
            name = rng.choice(inside) if inside and rng.random() < 0.6 else rng.choice(["a.txt", "b.bin", "sub/c.txt", "new.txt"])
            full = os.path.join(root, path, name)
            old = open(full, "rb").read() if os.path.isfile(full) else None
            self.write(full, self.content("mount", f"{path}/{name}", old))
            what = f"wrote {name}"
        self.mount_pending[path] = ("package", self.hasher.tree(os.path.join(root, path))[0])
        return f"mount_package {path}: {what}"

    def step(self, kind):
        if kind.startswith("mount_"):
            return self.mount_step(kind)
        rng = self.rng
        device = self.pick_device()
        if kind == "create":
            path = self.free_path(device, "file")
            if path is None:
                return "create: namespace full"
            self.write(os.path.join(device.dir, path), self.content(device.name, path))
            return f"create {device.name}:{path}"
        if kind == "edit":
            files = self.docs(device, "file")
            if not files:
                return "edit: no file"
            path = rng.choice(files)
            full = os.path.join(device.dir, path)
            with open(full, "rb") as f:
                old = f.read()
            self.write(full, self.content(device.name, path, old))
            return f"edit {device.name}:{path}"
        if kind == "delete":
            docs = self.docs(device)
            if not docs:
                return "delete: nothing"
            path = rng.choice(docs)
            full = os.path.join(device.dir, path)
            os.unlink(full) if os.path.islink(full) or not os.path.isdir(full) else shutil.rmtree(full)
            return f"delete {device.name}:{path}"
        if kind == "rename":
            docs = self.docs(device)
            if not docs:
                return "rename: nothing"
            path = rng.choice(docs)
            target = self.free_path(device, "package" if path.endswith(".pkg") and not os.path.islink(os.path.join(device.dir, path)) else "file")
            if target is None:
                return "rename: no free name"
            os.makedirs(os.path.dirname(os.path.join(device.dir, target)), exist_ok=True)
            os.rename(os.path.join(device.dir, path), os.path.join(device.dir, target))
            return f"rename {device.name}:{path} -> {target}"
        if kind == "symlink":
            links = self.docs(device, "symlink")
            if links and rng.random() < 0.4:
                path = rng.choice(links)
                full = os.path.join(device.dir, path)
                os.unlink(full)
            else:
                path = self.free_path(device, "file")
                if path is None:
                    return "symlink: namespace full"
                full = os.path.join(device.dir, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
            # Targets are only text to sync: some dangle, some point outside DIR; none is followed.
            target = rng.choice(["f0.txt", "d1/f1.txt", "../f2.txt", "p0.pkg", "d1", "../../outside", "/etc/hostname", "missing",
                                 f"t{self.step_no}"])
            os.symlink(target, full)
            return f"symlink {device.name}:{path} -> {target}"
        if kind == "ignore":
            rules = os.path.join(device.dir, ".xferignore")
            if os.path.lexists(rules):
                os.unlink(rules)
                return f"ignore {device.name}: .xferignore removed"
            self.write(rules, IGNORE_RULES)
            return f"ignore {device.name}: .xferignore ignores *.tmp and build/"
        if kind == "chmod":
            files = self.docs(device, "file")
            if not files:
                return "chmod: no file"
            path = rng.choice(files)
            full = os.path.join(device.dir, path)
            mode = stat.S_IMODE(os.lstat(full).st_mode) ^ 0o100
            os.chmod(full, mode)
            return f"chmod {device.name}:{path} {oct(mode)}"
        if kind == "package":
            packages = self.docs(device, "package")
            if packages and rng.random() < 0.65:
                path = rng.choice(packages)
                root = os.path.join(device.dir, path)
                inside = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs if not internal(f))
                what = rng.random()
                if what < 0.2 and len(inside) > 1:
                    victim = rng.choice(inside)
                    os.unlink(os.path.join(root, victim))
                    return f"package {device.name}:{path} remove {victim}"
                if what < 0.45 or not inside:  # (a package the mount emptied gets a file)
                    name = rng.choice(["a.bin", "b.txt", "res/c.bin", "res/d.txt", "Contents/Info.plist"])
                    self.write(os.path.join(root, name), self.content(device.name, f"{path}/{name}"))
                    return f"package {device.name}:{path} write {name}"
                victim = rng.choice(inside)
                with open(os.path.join(root, victim), "rb") as f:
                    old = f.read()
                self.write(os.path.join(root, victim), self.content(device.name, f"{path}/{victim}", old))
                return f"package {device.name}:{path} edit {victim}"
            path = self.free_path(device, "package")
            if path is None:
                return "package: namespace full"
            root = os.path.join(device.dir, path)
            # Built beside, then renamed into place, as an application saves a package.
            staging = os.path.join(device.dir, f"tmp-{self.step_no}")
            for name in rng.sample(["a.bin", "b.txt", "res/c.bin", "Contents/Info.plist"], rng.randrange(1, 4)):
                self.write(os.path.join(staging, name), self.content(device.name, f"{path}/{name}"))
            os.makedirs(os.path.dirname(root), exist_ok=True)
            os.rename(staging, root)
            return f"package {device.name}:{path} create"
        if kind == "mvdir":
            source, target = rng.choice([("d1/d2", "e/d2"), ("e/d2", "d1/d2")])
            s, t = os.path.join(device.dir, source), os.path.join(device.dir, target)
            if not os.path.isdir(s) or os.path.lexists(t):
                return f"mvdir {device.name}:{source}: nothing to move"
            os.makedirs(os.path.dirname(t), exist_ok=True)
            os.rename(s, t)
            return f"mvdir {device.name}:{source} -> {target}"
        if kind == "rmdir":
            directory = rng.choice(["d1", "e", "d1/d2", "e/d2", "build"])
            full = os.path.join(device.dir, directory)
            if not os.path.isdir(full):
                return f"rmdir {device.name}:{directory}: none"
            shutil.rmtree(full)
            return f"rmdir {device.name}:{directory}"
        if kind == "bulk":
            root = os.path.join(device.dir, "bulk")
            if os.path.isdir(root):
                shutil.rmtree(root)
                return f"bulk {device.name}: rm -r bulk/"
            for i in range(60):
                self.write(os.path.join(root, f"b{i:02}.txt"), f"bulk seed {self.seed} step {self.step_no} device {device.name} {i} {rng.random()}\n".encode())
            return f"bulk {device.name}: 60 files in bulk/"
        if kind == "select":
            # The user changes what this device holds: a folder left out (its copies go to the
            # trash once the server has them; nothing is deleted anywhere), held alone, or all back.
            choice = rng.choice(["exclude", "exclude", "only", "all"])
            path = rng.choice(["d1", "d1/d2", "e", "build", "bulk", "p0.pkg", "d1/p1.pkg", "f0.txt"])
            extra = {"exclude": ["--exclude-path", path], "only": ["--only", rng.choice(["d1", "e"])],
                     "all": ["--select-all"]}[choice]
            code, summary, _, _ = self.sync(device, "select", extra=extra)
            (self.selective.discard if choice == "all" else self.selective.add)(device.name)
            return f"select {device.name} {' '.join(extra)}: exit {code} {brief(summary)}"
        if kind == "sync":
            code, summary, _, _ = self.sync(device)
            return f"sync {device.name}{'' if device.online else ' (offline)'}: exit {code} {brief(summary)}"
        if kind == "sync_faulty":
            if not device.online:
                return f"sync_faulty {device.name}: offline"
            rate = rng.choice([0.3, 0.6, 1.0])
            device.faults(rate)
            before = device.proxy.injected()
            try:
                code, summary, _, _ = self.sync(device, "sync_faulty", must_succeed=False)
            finally:
                device.settle()
            return f"sync_faulty {device.name} rate {rate}: exit {code}, {device.proxy.injected() - before} faults {brief(summary)}"
        if kind == "sync_concurrent":
            if len(self.devices) < 2:
                return "sync_concurrent: one device"
            a, b = rng.sample(self.devices, 2)
            before_a, before_b = scan(a.dir, self.hasher), scan(b.dir, self.hasher)
            pa, pb = self.start_sync(a), self.start_sync(b)
            ca = self.finish_sync(a, pa, before_a, "sync_concurrent", a.online and self.server_up())[0]
            cb = self.finish_sync(b, pb, before_b, "sync_concurrent", b.online and self.server_up())[0]
            return f"sync_concurrent {a.name}+{b.name}: exit {ca}, {cb}"
        if kind == "kill_client":
            delay = rng.random() * 0.12
            before = scan(device.dir, self.hasher)
            process = self.start_sync(device)
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
            code = self.finish_sync(device, process, before, "kill_client", False, killed=True)[0]
            return f"kill_client {device.name} after {delay * 1000:.0f} ms: exit {code}"
        if kind == "offline":
            device = self.pick_device(online=True)
            if device is None or sum(d.online for d in self.devices) < 2:
                return "offline: keeps one device online"
            device.online = False
            device.settle()
            return f"offline {device.name}"
        if kind == "online":
            device = self.pick_device(online=False)
            if device is None:
                return "online: all are"
            device.online = True
            device.settle()
            return f"online {device.name}"
        if kind in ("server_restart", "server_crash"):
            self.server.stop() if kind == "server_restart" else self.server.kill9()
            self.start_server()
            self.stats["server_restarts"] += 1
            return kind
        if kind == "server_crash_mid_pass":
            pool = [d for d in self.devices if d.online]
            device = rng.choice(pool)
            delay = rng.random() * 0.2
            before = scan(device.dir, self.hasher)
            process = self.start_sync(device)
            time.sleep(delay)
            self.server.kill9()
            code = self.finish_sync(device, process, before, kind, False)[0]
            self.start_server()
            self.stats["server_restarts"] += 1
            return f"server_crash_mid_pass ({device.name}'s pass, {delay * 1000:.0f} ms): exit {code}"
        if kind == "server_backup":
            self.server.stop()
            copy = self.ws.join(f"backup-{self.step_no}")
            shutil.copytree(self.server.data, copy, symlinks=True)
            if self.backup:
                shutil.rmtree(self.backup[0], ignore_errors=True)
            self.backup = (copy, self.token, self.member_token, self.incarnation)
            self.start_server()
            return f"server_backup ({self.server.data})"
        if kind == "server_restore":
            if not self.backup:
                return "server_restore: no backup"
            copy, token, member_token, taken = self.backup
            self.server.stop()
            self.incarnation += 1
            data = self.ws.join(f"data-{self.incarnation}")
            shutil.copytree(copy, data, symlinks=True)
            self.token, self.member_token = token, member_token
            self.server.log.close()
            self.server = xferlab.Server(self.binary, data, extra=SERVER_OPTIONS, port=self.port)
            self.start_server()
            self.stats["server_restores"] += 1
            self.rebaseline("restored from an older copy")
            return f"server_restore (copy taken from incarnation {taken})"
        if kind == "server_replace":
            self.server.stop()
            self.new_server()
            self.stats["server_replacements"] += 1
            self.rebaseline("server replaced")
            return "server_replace (empty data, new token)"
        raise ValueError(kind)

    # ---------------------------------------------------------------- the run

    def run(self, count_steps):
        count = self.args.devices or self.rng.choice([2, 3])
        self.new_server()
        self.devices = [Device("ABC"[i], self.ws, self.port, self.seed * 10 + i) for i in range(count)]
        if self.args.mount:
            self.mount = MountObserver(self)
            self.mount.ensure()
        self.log(f"seed {self.seed}: {count} devices" + (" and a mount" if self.mount else ""))
        kinds = [k for k, _ in STEPS]
        weights = [w for _, w in STEPS]
        try:
            for self.step_no in range(1, count_steps + 1):
                kind = self.kinds_rng.choices(kinds, weights)[0]
                self.stats["steps_by_kind"][kind] = self.stats["steps_by_kind"].get(kind, 0) + 1
                began = time.time()
                text = self.step(kind) or kind
                self.log(f"step {self.step_no}: {text} [{(time.time() - began) * 1000:.0f} ms]")
                self.end_step()
                self.stats["seconds_by_kind"][kind] = round(self.stats["seconds_by_kind"].get(kind, 0) + time.time() - began, 2)
                self.stats["steps"] += 1
                if self.args.quiesce_every and self.step_no % self.args.quiesce_every == 0 and self.step_no < count_steps:
                    self.log(f"step {self.step_no}: quiesce")
                    began = time.time()
                    self.quiesce()
                    self.stats["seconds_by_kind"]["quiesce"] = round(self.stats["seconds_by_kind"].get("quiesce", 0) + time.time() - began, 2)
            self.log("end: quiesce")
            self.quiesce(final=True)
        finally:
            for device in self.devices:
                for kind_, count_ in device.proxy.counts.items():
                    self.stats["connections"][kind_] = self.stats["connections"].get(kind_, 0) + count_
                device.proxy.close()
            if self.mount:
                self.mount.stop()
            if self.server:
                self.server.stop()
        self.stats["contents_saved"] += len(self.promised)
        for w in self.witness.values():
            self.stats["contents_found_in"][w[0]] = self.stats["contents_found_in"].get(w[0], 0) + 1


def describe(witness):
    if witness is None:
        return "nowhere"
    if witness[0] == "local":
        return "in a tree: " + ", ".join(sorted(str(place) for place in witness[1]))[:300]
    if witness[0] == "trash":
        return f"in {witness[1]}'s trash entry {witness[2]}"
    return f"on server incarnation {witness[1]} as {witness[2]} v{witness[3]}"


def brief(summary):
    if not summary:
        return ""
    parts = [f"{summary[k]} {k.replace('_', ' ')}" for k in ("uploaded", "downloaded", "removed_locally", "removed_remotely", "conflicts", "failed", "deletions_held") if summary.get(k)]
    return f"({', '.join(parts)})" if parts else "(nothing)"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="the first seed")
    parser.add_argument("--seeds", type=int, default=4, help="how many seeds, from --seed on")
    parser.add_argument("--steps", type=int, default=200, help="steps per seed")
    parser.add_argument("--devices", type=int, default=0, choices=[0, 2, 3], help="2 or 3 (default: drawn from the seed)")
    parser.add_argument("--quiesce-every", type=int, default=50, help="converge every N steps (0: only at the end)")
    parser.add_argument("--max-rounds", type=int, default=6, help="round-robin passes allowed to converge")
    parser.add_argument("--configuration", default="debug", choices=["debug", "release"])
    parser.add_argument("--binary", help="the xfer binary (default: .build/CONFIGURATION/xfer)")
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--keep-going", action="store_true", help="run the other seeds after a failure")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (always kept after a failure)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every step")
    parser.add_argument("--no-mount", dest="mount", action="store_false",
                        help="no `xfer mount` beside the devices (it needs /dev/fuse and fusermount3)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop servers and proxies, remove the work directory
    binary = os.path.abspath(args.binary) if args.binary else xferlab.xfer_binary(args.configuration)
    stats = {"seeds": [args.seed, args.seed + args.seeds - 1], "steps": 0, "steps_by_kind": {}, "seconds_by_kind": {}, "convergence_rounds": {},
             "quiesces": 0, "mount_checks": 0, "mount_writes_promised": 0, "mount_refusals": {}, "connections": {}, "passes_ok": 0, "passes_failed_cleanly": 0, "passes_killed": 0, "exit_codes": {},
             "events": {}, "server_restarts": 0, "server_restores": 0, "server_replacements": 0, "server_versions_fetched": 0,
             "contents_saved": 0, "contents_found_in": {}, "promises_reset_by_server_loss": 0, "mass_deletions_confirmed": 0, "documents_at_quiesce": [],
             "failures": 0}
    start = time.time()
    for seed in range(args.seed, args.seed + args.seeds):
        ws = xferlab.Workspace(f"sync-check-{seed}", keep=args.keep)
        check = Check(args, seed, ws, binary, stats)
        try:
            check.run(args.steps)
        except Failure as failure:
            stats["failures"] += 1
            ws.keep = True
            print(f"FAIL: seed {seed}, step {check.step_no}: {failure}", file=sys.stderr)
            print("last steps:", file=sys.stderr)
            for line in check.history:
                print(f"  {line}", file=sys.stderr)
            replay = ["python3", "tools/suites/sync-check.py", "--seed", str(seed), "--seeds", "1", "--steps", str(check.step_no), "--binary", binary]
            if args.devices:
                replay += ["--devices", str(args.devices)]
            if args.quiesce_every != 50:
                replay += ["--quiesce-every", str(args.quiesce_every)]
            print(f"replay: {shlex.join(replay)}", file=sys.stderr)
            print(f"work directory kept: {ws.path}", file=sys.stderr)
            stats.setdefault("failed", []).append({"seed": seed, "step": check.step_no, "replay": shlex.join(replay), "error": str(failure)[:2000]})
            if not args.keep_going:
                break
        finally:
            ws.__exit__(None, None, None)
        if args.verbose:
            print(f"seed {seed} done at {time.time() - start:.1f} s", flush=True)
    documents = stats.pop("documents_at_quiesce")
    stats["documents_at_quiesce_max"] = max(documents, default=0)
    stats["faults_injected"] = sum(v for k, v in stats["connections"].items() if k != "pass")
    stats["seconds"] = round(time.time() - start, 1)
    print(json.dumps(stats, indent=2, sort_keys=True))
    xferlab.report(args.json, stats)
    if stats["failures"]:
        sys.exit(1)
    print(f"PASS: {args.seeds} seeds, {stats['steps']} steps, {stats['quiesces']} convergences "
          f"(rounds: {', '.join(f'{k}: {v}' for k, v in sorted(stats['convergence_rounds'].items()))}), "
          f"{stats['faults_injected']} faults injected, {stats['passes_killed']} clients killed, "
          f"{stats['server_restarts']} server restarts, {stats['server_replacements']} replaced, {stats['server_restores']} restored, "
          f"{stats['contents_saved']} contents saved, 0 lost")


if __name__ == "__main__":
    main()
