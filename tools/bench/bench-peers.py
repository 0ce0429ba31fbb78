#!/usr/bin/env python3
"""xfer side by side with rsync, casync, restic and borg, in one run, on data this script builds.

Each tool backs up version 1 of a data set (first push), then version 2 (an edit), then
version 2 again (no-op), then restores the latest into an empty directory. Every tool starts
from an empty repository in each round; the order of the tools rotates from round to round;
the page cache stays warm (the sources are read once before the first round). Reported: wall
seconds, CPU seconds (the tool plus its server: xfer serve, the rsync daemon), the client's
peak resident memory, bytes stored after the first push, bytes on the wire where there is a
wire (xfer, rsync); median of --runs rounds.

How each tool is run (defaults unless said):
  xfer    `xfer serve` on a loopback port, `xfer push SRC NAME`, `xfer pull NAME OUT`
  rsync   `rsync -a` to and from an `rsync --daemon` on a loopback port (uncompressed, as a
          sync tool is usually run; `-az` is reported for the source-tree edit)
  casync  `casync make --store=S` (its default zstd) and `casync extract`
  casync-sync  (not in the default tools) casync, its extract followed by `sync -f OUT` in the
          timed step: a restore as durable as xfer's, which syncs every file before renaming
          the tree into place
  restic  a local repository, format version 2 (compression auto), `backup` and `restore`
  borg    a local repository without encryption, `create --compression lz4`, `extract`

Everything (data sets, repositories, restores) is under $XFER_BENCH_DIR/peers, by default
bench-data/peers in the checkout: the file system the project lives on, which the run names.

Data sets (made once there):
  file    a 1 GiB tar of the toolchain's libraries; v2 has 16 small insertions (seeded)
  libs    the toolchain's lib/ directory (~1.9 GB); v2 has seeded edits: insertions and
          overwrites in files, files replaced, added and removed
  tree    swift-nio 2.101.2's sources from the local package mirror; v2 is 2.101.3
  many    (not in the default sets) 200,000 small text files in 2,000 directories; v2 edits
          1,000, adds 200 and removes 200: memory and per-file costs at scale

    python3 tools/bench/bench-peers.py XFER_BINARY [--sets file,libs,tree] [--runs 3]
                                 [--tools xfer,rsync,casync,restic,borg] [--json FILE]
                                 [--xfer-variant NAME=PUSH-ARGS ...] [--xfer-binary NAME=PATH ...]
                                 [--xfer-sealed NAME[=PATH] ...] [--xfer-encrypted NAME[=PATH] ...]

tools/bench/bench-peers.sh installs the peers, builds xfer and calls this; docs/PERFORMANCE.md,
"Against rsync, casync, restic and borg" and "Trees of many files", reports the tables.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import xferlab  # noqa: E402
from xferlab import free_port  # noqa: E402

STEPS = ["first", "edit", "noop", "restore"]
TOOLS = ["xfer", "rsync", "casync", "restic", "borg"]


# ---------------------------------------------------------------------------------- data sets

def toolchain_lib():
    swift = shutil.which("swift")
    if not swift:
        sys.exit("bench-peers: swift is not on PATH (source tools/env.sh)")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(swift))), "lib")


def insert_bytes(source, target, rng, count):
    """Copies `source` to `target` with `count` insertions of 8-200 random bytes at seeded offsets."""
    size = os.path.getsize(source)
    offsets = sorted(rng.randrange(size) for _ in range(count))
    with open(source, "rb") as inp, open(target, "wb") as out:
        position = 0
        for offset in offsets:
            out.write(inp.read(offset - position))
            position = offset
            out.write(rng.randbytes(rng.randint(8, 200)))
        shutil.copyfileobj(inp, out, 1 << 20)


def make_file_set(base):
    print("bench-peers: making the file set (1 GiB tar of the toolchain's libraries)", file=sys.stderr)
    lib = toolchain_lib()
    v1 = os.path.join(base, "v1")
    with open(v1, "wb") as out:
        tar = subprocess.Popen(["tar", "cf", "-", "-C", os.path.dirname(lib), os.path.basename(lib)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        remaining = 1 << 30
        while remaining > 0:
            block = tar.stdout.read(min(remaining, 1 << 20))
            if not block:
                break
            out.write(block)
            remaining -= len(block)
        tar.kill()
        tar.wait()
    insert_bytes(v1, os.path.join(base, "v2"), random.Random(16), 16)


def make_libs_set(base):
    print("bench-peers: making the libs set (the toolchain's lib/, then seeded edits)", file=sys.stderr)
    v1, v2 = os.path.join(base, "v1"), os.path.join(base, "v2")
    subprocess.run(["cp", "-a", toolchain_lib(), v1], check=True)
    subprocess.run(["cp", "-a", v1, v2], check=True)
    rng = random.Random(198)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(v2) for f in fs
                   if not os.path.islink(os.path.join(d, f)) and os.path.getsize(os.path.join(d, f)) > 4096)
    chosen = rng.sample(files, 40)
    for path in chosen[:10]:          # a few bytes inserted here and there (a relinked library)
        edited = path + ".edit"
        insert_bytes(path, edited, rng, 4)
        os.replace(edited, path)
    for path in chosen[10:25]:        # overwritten in place (a patched block)
        with open(path, "r+b") as f:
            size = os.path.getsize(path)
            for _ in range(3):
                f.seek(rng.randrange(size - 64))
                f.write(rng.randbytes(rng.randint(16, 64)))
    for path in chosen[25:30]:        # replaced by new content of a similar size
        size = os.path.getsize(path)
        with open(path, "wb") as f:
            f.write(rng.randbytes(min(size, 4 << 20)))
    for index, path in enumerate(chosen[30:35]):  # added: a copy of a file with a new header
        with open(path, "rb") as f:
            body = f.read()
        with open(os.path.join(os.path.dirname(path), f"added-{index}.bin"), "wb") as f:
            f.write(rng.randbytes(4096) + body)
    for path in chosen[35:40]:        # removed
        os.unlink(path)


def make_tree_set(base):
    mirror = "/opt/swift-packages/apple/swift-nio.git"
    for name, version in (("v1", "2.101.2"), ("v2", "2.101.3")):
        target = os.path.join(base, name)
        os.makedirs(target)
        archive = subprocess.Popen(["git", "-C", mirror, "archive", version], stdout=subprocess.PIPE)
        subprocess.run(["tar", "xf", "-", "-C", target], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            sys.exit(f"bench-peers: cannot read swift-nio {version} from {mirror}")


def make_many_set(base):
    """200,000 small text files (100-3,000 bytes of words, seeded) in 2,000 directories; v2
    edits 1,000 of them, adds 200 and removes 200. Not in the default sets: it measures memory
    and per-file costs at a size the others do not reach, and takes minutes per tool."""
    rng = random.Random(7)
    words = [f"w{i}".encode() for i in range(5000)]
    v1 = os.path.join(base, "v1")
    paths = []
    for a in range(200):
        for b in range(10):
            directory = os.path.join(v1, f"d{a:03d}", f"s{b}")
            os.makedirs(directory)
            for c in range(100):
                size = rng.randint(100, 3000)
                path = os.path.join(directory, f"f{c:03d}.txt")
                with open(path, "wb") as f:
                    f.write(b" ".join(rng.choice(words) for _ in range(size // 5))[:size])
                paths.append(path)
    v2 = os.path.join(base, "v2")
    subprocess.run(["cp", "-a", v1, v2], check=True)
    chosen = rng.sample(range(len(paths)), 1400)
    for index in chosen[:1000]:                   # edited: a line inserted
        path = paths[index].replace(v1, v2, 1)
        with open(path, "rb") as f:
            body = f.read()
        at = rng.randrange(len(body) + 1)
        with open(path, "wb") as f:
            f.write(body[:at] + b"\nedited " + str(index).encode() + b"\n" + body[at:])
    for index in chosen[1000:1200]:               # removed
        os.unlink(paths[index].replace(v1, v2, 1))
    for n in range(200):                          # added
        with open(os.path.join(v2, f"d{n:03d}", "s0", f"new{n:03d}.txt"), "wb") as f:
            f.write(b" ".join(rng.choice(words) for _ in range(300)))


MAKERS = {"file": make_file_set, "libs": make_libs_set, "tree": make_tree_set, "many": make_many_set}


def data_set(root, name):
    """The data set's directory (v1 and v2 in it), made once: a set left half-made is made again."""
    base = os.path.join(root, name)
    done = os.path.join(base, ".done")
    if not os.path.exists(done):
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        MAKERS[name](base)
        open(done, "w").close()
    return base


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True, check=True).stdout.split()[0])


def cpu_of(pid):
    """CPU seconds of a process and its waited-for children (the rsync daemon forks per connection)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick


# ------------------------------------------------------------------------------------- tools

class Tool:
    """One tool's repository (and server) for one round. `run` returns a measurement dict."""
    name = ""
    server_pid = None

    def __init__(self, work):
        self.work = work
        self.env = dict(os.environ)

    def start(self):
        pass

    def stop(self):
        pass

    def stored(self):
        return du(self.repo)

    def run(self, command, cwd=None):
        timing = os.path.join(self.work, "time.txt")
        server_before = cpu_of(self.server_pid) if self.server_pid else 0.0
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", timing] + command, env=self.env, cwd=cwd,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if self.server_pid:
            time.sleep(0.2)  # the rsync daemon reaps the connection's process: then its CPU is counted
        if done.returncode != 0:
            sys.exit(f"bench-peers: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}{done.stdout[-2000:]}")
        user, system, rss = open(timing).read().split()[-3:]
        server = (cpu_of(self.server_pid) - server_before) if self.server_pid else 0.0
        return {"wall": wall, "cpu": float(user) + float(system) + server, "rss_kib": int(rss), "out": done.stdout}


class Xfer(Tool):
    name = "xfer"

    def __init__(self, work, binary, push_args=(), sealed=False, encrypted=False):
        super().__init__(work)
        self.binary = binary
        self.push_args = list(push_args)
        self.repo = os.path.join(work, "data")
        self.sealed = sealed
        self.encrypted = encrypted

    def start(self):
        serve_args = []
        if self.sealed:
            # A server that seals everything at rest (--encryption-key), with a new key each round.
            key = os.path.join(self.work, "key")
            subprocess.run([self.binary, "server-key", "new", key], check=True, capture_output=True)
            serve_args = ["--encryption-key", key]
        token = xferlab.create_account(self.binary, self.repo, "bench", extra=serve_args)
        self.server = xferlab.Server(self.binary, self.repo, extra=serve_args).start()
        self.server_pid = self.server.process.pid
        self.env.update(XFER_SERVER=self.server.url, XFER_TOKEN=token, XFER_CONFIG=os.path.join(self.work, "none.json"),
                        XFER_STATE_DIR=os.path.join(self.work, "state"))
        if self.encrypted:
            # An end-to-end encrypted container, made (and its key kept on this device) before any timed step.
            self.env.update(XFER_CONTAINER="bench-e2e")
            subprocess.run([self.binary, "container", "create", "bench-e2e", "--encrypted"], check=True, capture_output=True,
                           env=dict(self.env, XFER_PASSPHRASE="bench passphrase"))

    def stop(self):
        self.server.stop()

    def backup(self, source, kind):
        result = self.run([self.binary, "push", source, "bench.data", "--json"] + self.push_args)
        report = json.loads(result["out"])
        # The commit carries the manifest delta base64 in JSON: 4 bytes for every 3.
        result["wire"] = report["bytes_sent"] + (report["manifest_bytes"] + 2) // 3 * 4
        return result

    def restore(self, target, kind):
        result = self.run([self.binary, "pull", "bench.data", target, "--json"])
        report = json.loads(result["out"])
        result["wire"] = report["bytes_fetched"] + report["manifest_bytes"]
        result["restored"] = target
        return result


class Rsync(Tool):
    name = "rsync"

    def __init__(self, work, compress=False):
        super().__init__(work)
        self.repo = os.path.join(work, "module")
        self.flags = ["-az"] if compress else ["-a"]

    def start(self):
        os.makedirs(self.repo)
        self.port = free_port()
        config = os.path.join(self.work, "rsyncd.conf")
        with open(config, "w") as f:
            f.write(f"use chroot = no\nlog file = {self.work}/rsyncd.log\npid file = {self.work}/rsyncd.pid\n"
                    f"[bench]\npath = {self.repo}\nread only = no\nuid = root\ngid = root\n")
        self.daemon = subprocess.Popen(["rsync", "--daemon", "--no-detach", f"--config={config}", f"--port={self.port}",
                                        "--address=127.0.0.1"])
        self.server_pid = self.daemon.pid
        deadline = time.time() + 10
        while subprocess.run(["rsync", f"rsync://127.0.0.1:{self.port}/"], capture_output=True).returncode != 0:
            if time.time() > deadline:
                sys.exit("bench-peers: the rsync daemon did not start")
            time.sleep(0.05)

    def stop(self):
        self.daemon.terminate()
        self.daemon.wait()

    def url(self, kind):
        return f"rsync://127.0.0.1:{self.port}/bench/data" + ("/" if kind == "dir" else "")

    @staticmethod
    def wire(out):
        sent = received = 0
        for line in out.splitlines():
            if line.startswith("Total bytes sent:"):
                sent = int(line.split(":")[1].replace(",", ""))
            elif line.startswith("Total bytes received:"):
                received = int(line.split(":")[1].replace(",", ""))
        return sent + received

    def backup(self, source, kind):
        result = self.run(["rsync"] + self.flags + ["--delete", "--stats", source + ("/" if kind == "dir" else ""), self.url(kind)])
        result["wire"] = self.wire(result["out"])
        return result

    def restore(self, target, kind):
        result = self.run(["rsync"] + self.flags + ["--stats", self.url(kind), target + ("/" if kind == "dir" else "")])
        result["wire"] = self.wire(result["out"])
        result["restored"] = target
        return result


class Casync(Tool):
    name = "casync"

    def __init__(self, work):
        super().__init__(work)
        self.repo = os.path.join(work, "store")
        self.count = 0

    def index(self, kind):
        return os.path.join(self.work, f"index{self.count}" + (".caidx" if kind == "dir" else ".caibx"))

    def backup(self, source, kind):
        self.count += 1
        return self.run(["casync", "make", f"--store={self.repo}", self.index(kind), source])

    def restore(self, target, kind):
        result = self.run(["casync", "extract", f"--store={self.repo}", self.index(kind), target])
        result["restored"] = target
        return result


class DurableCasync(Casync):
    """casync whose restore is then made durable as xfer's is (`sync -f` of the target: one
    syncfs of its file system), timed as one step: the same work as xfer's pull, whose files
    are all on disk before the tree is renamed into place."""
    name = "casync-sync"

    def restore(self, target, kind):
        result = self.run(["sh", "-c", 'casync extract --store="$1" "$2" "$3" && sync -f "$3"', "extract",
                           self.repo, self.index(kind), target])
        result["restored"] = target
        return result


class Restic(Tool):
    name = "restic"

    def __init__(self, work):
        super().__init__(work)
        self.repo = os.path.join(work, "repo")
        self.env.update(RESTIC_REPOSITORY=self.repo, RESTIC_PASSWORD="bench", RESTIC_CACHE_DIR=os.path.join(work, "cache"))

    def start(self):
        subprocess.run(["restic", "init", "--repository-version", "2"], env=self.env, check=True, capture_output=True)

    def backup(self, source, kind):
        return self.run(["restic", "backup", "--quiet", "--host", "bench", source])

    def restore(self, target, kind):
        return self.run(["restic", "restore", "latest", "--target", target])


class Borg(Tool):
    name = "borg"

    def __init__(self, work):
        super().__init__(work)
        self.repo = os.path.join(work, "repo")
        self.env.update(BORG_BASE_DIR=os.path.join(work, "borg-home"), BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
                        BORG_RELOCATED_REPO_ACCESS_IS_OK="yes")
        self.count = 0

    def start(self):
        subprocess.run(["borg", "init", "--encryption=none", self.repo], env=self.env, check=True, capture_output=True)

    def backup(self, source, kind):
        self.count += 1
        return self.run(["borg", "create", "--compression", "lz4", f"{self.repo}::v{self.count}", source])

    def restore(self, target, kind):
        os.makedirs(target)
        return self.run(["borg", "extract", f"{self.repo}::v{self.count}"], cwd=target)


# ------------------------------------------------------------------------------------ rounds

def place(version, source, kind):
    """Makes `source` hold `version`, touching only what differs (as an editor's saves would)."""
    if kind == "file":
        shutil.copyfile(version, source + ".new")
        os.replace(source + ".new", source)
    else:
        subprocess.run(["rsync", "-a", "--delete", version + "/", source + "/"], check=True)


def same(expected, restored):
    """Whether a restore holds the expected bytes: the whole tree for xfer and rsync, which restore
    to the given path; the others restore under the source's absolute path, found by name."""
    return subprocess.run(["diff", "-r", "-q", "--no-dereference", expected, restored], capture_output=True).returncode == 0


def durable(result, work):
    """Adds the `sync -f` of the round's file system after a step, timed: `durable` is the
    step's wall plus that flush, when what the step wrote is on disk, for every tool alike
    (xfer syncs its own; the others sync nothing, so their flush is most of what a durable
    copy costs them)."""
    started = time.perf_counter()
    subprocess.run(["sync", "-f", work], check=True)
    result["flush"] = time.perf_counter() - started
    result["durable"] = result["wall"] + result["flush"]
    return result


def one_round(tool, data, kind):
    """The four steps on a fresh repository; returns {step: measurement}."""
    work = tool.work
    source = os.path.join(work, "src")
    if kind == "file":
        place(os.path.join(data, "v1"), source, kind)
    else:
        shutil.copytree(os.path.join(data, "v1"), source, symlinks=True)
    subprocess.run(["sync"])
    results = {}
    tool.start()
    try:
        results["first"] = durable(tool.backup(source, kind), work)
        results["first"]["stored"] = tool.stored()
        place(os.path.join(data, "v2"), source, kind)
        subprocess.run(["sync"])
        results["edit"] = durable(tool.backup(source, kind), work)
        results["noop"] = durable(tool.backup(source, kind), work)
        target = os.path.join(work, "restored")
        subprocess.run(["sync"])
        results["restore"] = durable(tool.restore(target, kind), work)
        if "restored" in results["restore"] and not same(source, target):
            sys.exit(f"bench-peers: {tool.name}'s restore differs from the source")
    finally:
        tool.stop()
    return results


def make_tool(name, work, binary, variants):
    if name in variants:
        other, push_args, sealed, encrypted = variants[name]
        return Xfer(work, other or binary, push_args, sealed, encrypted)
    return {"xfer": lambda: Xfer(work, binary), "rsync": lambda: Rsync(work), "rsync-z": lambda: Rsync(work, compress=True),
            "casync": lambda: Casync(work), "casync-sync": lambda: DurableCasync(work), "restic": lambda: Restic(work), "borg": lambda: Borg(work)}[name]()


def warm(path):
    """Reads the data once, so every tool meets a warm page cache."""
    subprocess.run(f"find {path} -type f -print0 | xargs -0 cat > /dev/null", shell=True, check=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--sets", default="file,libs,tree")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--xfer-variant", action="append", default=[], metavar="NAME=ARGS",
                        help="another xfer column, its push run with these extra arguments (e.g. 'l1=--compression-level=1')")
    parser.add_argument("--xfer-binary", action="append", default=[], metavar="NAME=PATH",
                        help="another xfer column run with this build (e.g. 'before=/tmp/old/xfer'), for an A/B in one run")
    parser.add_argument("--xfer-sealed", action="append", default=[], metavar="NAME[=PATH]",
                        help="another xfer column whose server seals its data at rest (xfer serve --encryption-key), "
                             "run with this build if a PATH is given")
    parser.add_argument("--xfer-encrypted", action="append", default=[], metavar="NAME[=PATH]",
                        help="another xfer column pushing into and pulling from an end-to-end encrypted container "
                             "(xfer container create --encrypted), run with this build if a PATH is given")
    parser.add_argument("--json")
    args = parser.parse_args()
    variants = {}
    for spec in args.xfer_variant:
        name, _, extra = spec.partition("=")
        variants["xfer " + name] = (None, extra.split(), False, False)
    for spec in args.xfer_binary:
        name, _, path = spec.partition("=")
        variants["xfer " + name] = (os.path.abspath(path), [], False, False)
    for spec in args.xfer_sealed:
        name, _, path = spec.partition("=")
        variants["xfer " + name] = (os.path.abspath(path) if path else None, [], True, False)
    for spec in args.xfer_encrypted:
        name, _, path = spec.partition("=")
        variants["xfer " + name] = (os.path.abspath(path) if path else None, [], False, True)
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = os.path.join(os.environ.get("XFER_BENCH_DIR", os.path.join(checkout, "bench-data")), "peers")
    os.makedirs(root, exist_ok=True)
    where = subprocess.run(["df", "--output=source,fstype", root], capture_output=True, text=True).stdout.split()
    print(f"measuring in {root}: {' '.join(where[-2:])}", flush=True)
    binary = os.path.abspath(args.binary)
    tools = args.tools.split(",") + list(variants)
    everything = {}
    for set_name in args.sets.split(","):
        data = data_set(root, set_name)
        kind = "file" if set_name == "file" else "dir"
        names = tools + (["rsync-z"] if set_name == "tree" and "rsync" in tools else [])
        warm(data)
        measured = {name: [] for name in names}
        for run in range(args.runs):
            order = names[run % len(names):] + names[:run % len(names)]
            for name in order:
                work = tempfile.mkdtemp(prefix=f"peers-{set_name}-{name.replace(' ', '-')}-", dir=root)
                try:
                    results = one_round(make_tool(name, work, binary, variants), data, kind)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                    subprocess.run(["sync"])
                measured[name].append(results)
                print(f"{set_name} round {run + 1} {name}: " + ", ".join(
                    f"{step} {results[step]['wall']:.2f} s ({results[step]['durable']:.2f} durable)" for step in STEPS),
                    flush=True)
        everything[set_name] = measured
        print_table(set_name, measured)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1, default=lambda o: None)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def print_table(set_name, measured):
    names = list(measured)
    print(f"\n{set_name}: median of {len(next(iter(measured.values())))} rounds")
    print("| step | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))

    def row(label, values, fmt):
        print(f"| {label} | " + " | ".join(fmt(v) if v is not None else "" for v in values) + " |")

    for step in STEPS:
        row(f"{step}: wall s", [median(r[step]["wall"] for r in measured[n]) for n in names], lambda v: f"{v:.2f}")
        row(f"{step}: durable s (wall + sync)", [median(r[step]["durable"] for r in measured[n]) for n in names],
            lambda v: f"{v:.2f}")
        row(f"{step}: CPU s", [median(r[step]["cpu"] for r in measured[n]) for n in names], lambda v: f"{v:.2f}")
        row(f"{step}: peak MiB", [median(r[step]["rss_kib"] for r in measured[n]) for n in names], lambda v: f"{v / 1024:.0f}")
        row(f"{step}: wire", [median(r[step].get("wire") for r in measured[n]) for n in names], human)
    row("stored after first", [median(r["first"]["stored"] for r in measured[n]) for n in names], human)
    print(flush=True)


def human(count):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.0f} B"


if __name__ == "__main__":
    main()
