"""What the HTTP benchmarks share (bench-web.py, bench-webdav.py): waiting for a server, timing a
command while sampling a server's resident memory, the results table, and stopping servers."""
import statistics
import subprocess
import threading
import time
import urllib.request


def wait_healthy(url, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except Exception:  # noqa: BLE001
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


class PeakMemory:
    """Samples a process's resident memory every 20 ms while in use."""

    def __init__(self, pid):
        self.pid, self.peak, self.start, self.running = pid, 0, None, True
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self):
        while self.running:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.peak = max(self.peak, int(line.split()[1]))
                            self.start = self.start if self.start is not None else int(line.split()[1])
            except OSError:
                return
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def timed(command, pid=None):
    started = time.monotonic()
    if pid:
        with PeakMemory(pid) as memory:
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.monotonic() - started, (memory.start / 1024, memory.peak / 1024)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started, None


def print_table(first, results, amount):
    """One row per step: the median wall time of its (seconds, (MiB before, MiB peak) or None)
    runs, the rate of `amount(name)` bytes in it, and the server's memory."""
    print(f"| {first} | wall s | MB/s | server MiB before → peak |")
    print("|---|---|---|---|")
    for name, values in results.items():
        wall = statistics.median(v[0] for v in values)
        memory = [v[1] for v in values if v[1] is not None]
        shown = f"{max(m[0] for m in memory):.0f} → {max(m[1] for m in memory):.0f}" if memory else "—"
        print(f"| {name} | {wall:.2f} | {amount(name) / 1e6 / wall:.0f} | {shown} |")


def stop(processes):
    """Ends the servers a benchmark started (SIGTERM, then SIGKILL after 10 s)."""
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def timed_env(command, env, pid):
    started = time.monotonic()
    with PeakMemory(pid) as memory:
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started, (memory.start / 1024, memory.peak / 1024)
