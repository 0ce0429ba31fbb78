#!/usr/bin/env python3
"""The web view in a real browser: headless Chromium driven over WebDriver (Debian's
chromium and chromium-driver, installed here if missing), against a real `xfer serve`, with
the real CLI on the other side.

It signs in, browses, searches, downloads a file and a package (bytes compared), uploads a
file and pulls it with the CLI (identical), restores a deleted document, resolves a conflict
made by two CLI devices, opens a share link signed out, and sees a push from the CLI appear
without reloading. With --screenshots DIR it saves the main pages as PNG (docs/web/).

    python3 tools/suites/web-test.py [--xfer .build/debug/xfer] [--screenshots docs/web]

Exit status 0 when every step passed; each failure is printed with what was seen.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from xferlab import Server, free_port  # noqa: E402

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"



def ensure_chromium():
    if shutil.which("chromedriver") and (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        return
    print("installing chromium and chromium-driver (Debian packages)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(sudo + ["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"], check=True, env=env, stdout=subprocess.DEVNULL)


class WebDriver:
    """The W3C WebDriver protocol, as much of it as this test uses."""

    def __init__(self, port, downloads):
        self.base = f"http://127.0.0.1:{port}"
        options = {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,860",
                     "--lang=en-US", "--no-first-run", "--disable-extensions"],
            "prefs": {"download.default_directory": downloads, "download.prompt_for_download": False},
        }
        answer = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options,
                                                                                 "goog:loggingPrefs": {"browser": "ALL"}}}})
        self.session = answer["sessionId"]
        self.call("POST", f"/session/{self.session}/goog/cdp/execute",
                  {"cmd": "Browser.setDownloadBehavior", "params": {"behavior": "allow", "downloadPath": downloads}})

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}").get("value", {}) if method != "DELETE" else None
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"WebDriver {method} {path}: {error.code} {error.read()[:500]!r}")

    def s(self, path):
        return f"/session/{self.session}{path}"

    def go(self, url):
        self.call("POST", self.s("/url"), {"url": url})

    @property
    def url(self):
        return self.call("GET", self.s("/url"))

    def find(self, css, timeout=10):
        end = time.time() + timeout
        while True:
            try:
                return self.call("POST", self.s("/element"), {"using": "css selector", "value": css})[ELEMENT]
            except RuntimeError:
                if time.time() > end:
                    raise RuntimeError(f"no element {css!r} on {self.url}")
                time.sleep(0.1)

    def click(self, css):
        self.call("POST", self.s(f"/element/{self.find(css)}/click"), {})

    def type(self, css, text):
        element = self.find(css)
        self.call("POST", self.s(f"/element/{element}/clear"), {})
        self.call("POST", self.s(f"/element/{element}/value"), {"text": text})

    def text(self, css="body"):
        return self.call("GET", self.s(f"/element/{self.find(css)}/text"))

    def script(self, source, *args):
        return self.call("POST", self.s("/execute/sync"), {"script": source, "args": list(args)})

    def screenshot(self, path):
        with open(path, "wb") as out:
            out.write(base64.b64decode(self.call("GET", self.s("/screenshot"))))

    def clear_cookies(self):
        self.call("DELETE", self.s("/cookie"))

    def console(self):
        try:
            return self.call("POST", self.s("/se/log"), {"type": "browser"}) or []
        except RuntimeError:
            return []

    def quit(self):
        try:
            self.call("DELETE", self.s(""))
        except Exception:
            pass


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def wait_for(predicate, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = predicate()
        except RuntimeError:  # a page between two loads: its elements went stale
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xfer", default=".build/debug/xfer")
    parser.add_argument("--screenshots", help="save the main pages as PNG files here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    xfer = os.path.abspath(args.xfer)
    ensure_chromium()
    work = tempfile.mkdtemp(prefix="xfer-web-")
    downloads = os.path.join(work, "downloads")
    os.makedirs(downloads)
    driver_port = free_port()
    server = Server(xfer, os.path.join(work, "data"))
    server_url = server.url
    processes = []
    failures = []

    def step(name, body):
        started = time.time()
        try:
            body()
            print(f"ok   {name} ({time.time() - started:.1f} s)", flush=True)
        except Exception as error:  # noqa: BLE001: every failure is reported, the next step runs
            failures.append(name)
            print(f"FAIL {name}: {error}", flush=True)

    def cli(*arguments, device="laptop", check=True):
        env = dict(os.environ, XFER_SERVER=server_url, XFER_TOKEN=token, XFER_STATE_DIR=os.path.join(work, "state-" + device))
        result = subprocess.run([xfer, *arguments], env=env, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise RuntimeError(f"xfer {' '.join(arguments)}: {result.stderr.strip()}")
        return result

    try:
        server.start(timeout=30)
        with open(os.path.join(server.data, "admin-token")) as f:
            admin = f.read().strip()
        token = json.loads(subprocess.run([xfer, "account", "create", "alice", "--server", server_url, "--token", admin, "--json"],
                                          capture_output=True, text=True, check=True).stdout)["token"]
        # What the CLI puts there first.
        source = os.path.join(work, "source")
        os.makedirs(os.path.join(source, "Trip.pkg", "photos"))
        report = os.urandom(1_500_000)
        with open(os.path.join(source, "report.pdf"), "wb") as f:
            f.write(report)
        for name, size in [("photos/1.jpg", 300_000), ("photos/2.jpg", 200_000), ("notes.txt", 1000)]:
            with open(os.path.join(source, "Trip.pkg", name), "wb") as f:
                f.write(os.urandom(size))
        with open(os.path.join(source, "todo.txt"), "w") as f:
            f.write("milk\n")
        cli("push", os.path.join(source, "report.pdf"), "Documents/Work/report.pdf")
        cli("push", os.path.join(source, "Trip.pkg"), "Documents/Trip.pkg")
        cli("push", os.path.join(source, "todo.txt"), "Documents/todo.txt")

        processes.append(subprocess.Popen(["chromedriver", f"--port={driver_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: _ready(driver_port), 30, "chromedriver")
        browser = WebDriver(driver_port, downloads)
        shots = args.screenshots

        def shot(name):
            if shots:
                os.makedirs(shots, exist_ok=True)
                browser.screenshot(os.path.join(shots, name + ".png"))

        def sign_in():
            browser.go(server_url + "/web/")
            wait_for(lambda: browser.url.endswith("/web/signin"), 10, "the sign-in page")
            shot("signin")
            browser.type("#token", token)
            browser.click("#signin")
            wait_for(lambda: "Containers" in browser.text("h1"), 10, "the containers page")
            assert "alice" in browser.text(".who"), browser.text(".who")
            shot("containers")

        def browse():
            browser.click("a[href='/web/c/default']")
            wait_for(lambda: "Documents" in browser.text("#main"), 10, "the container's top folder")
            browser.click("a[href='/web/c/default?folder=Documents%2F']")
            wait_for(lambda: "Trip.pkg" in browser.text("#listing"), 10, "Documents/")
            body = browser.text("#listing")
            for name in ["Work", "Trip.pkg", "todo.txt"]:
                assert name in body, body
            assert "report.pdf" not in body, "a deeper document shown at the top"
            shot("folder")

        def search():
            browser.type("#search", "*.PDF")
            browser.click("form.search button")
            wait_for(lambda: "Documents/Work/report.pdf" in browser.text("#main"), 10, "the search result")
            assert "todo.txt" not in browser.text("#listing")

        def download(link_css, expected_name):
            for leftover in os.listdir(downloads):
                os.remove(os.path.join(downloads, leftover))
            browser.click(link_css)
            path = os.path.join(downloads, expected_name)
            wait_for(lambda: os.path.exists(path) and not any(n.endswith(".crdownload") for n in os.listdir(downloads)), 30,
                     f"{expected_name} to download (have {os.listdir(downloads)})")
            return path

        def download_file():
            browser.go(server_url + "/web/c/default/item?path=Documents%2FWork%2Freport.pdf")
            shot("document")
            path = download("#download", "report.pdf")
            assert sha(path) == hashlib.sha256(report).hexdigest(), "downloaded bytes differ"

        def download_package():
            browser.go(server_url + "/web/c/default/item?path=Documents%2FTrip.pkg")
            assert "photos/1.jpg" in browser.text("#contents")
            path = download("#download", "Trip.pkg.tar")
            out = os.path.join(work, "untar")
            with tarfile.open(path) as archive:
                archive.extractall(out, filter="data")
            for name in ["photos/1.jpg", "photos/2.jpg", "notes.txt"]:
                assert sha(os.path.join(out, "Trip.pkg", name)) == sha(os.path.join(source, "Trip.pkg", name)), name

        def upload():
            local = os.path.join(work, "from-browser.bin")
            with open(local, "wb") as f:
                f.write(os.urandom(700_000))
            browser.go(server_url + "/web/c/default?folder=Documents%2F")
            browser.script("document.querySelector('details.tools').open = true")
            element = browser.find("#upload-file")
            browser.call("POST", browser.s(f"/element/{element}/value"), {"text": local})
            browser.click("#upload")
            wait_for(lambda: "from-browser.bin" in browser.text("h1"), 20, "the uploaded document's page")
            pulled = os.path.join(work, "pulled.bin")
            cli("pull", "Documents/from-browser.bin", pulled)
            assert sha(pulled) == sha(local), "the CLI pulled other bytes than were uploaded"

        def live():
            browser.go(server_url + "/web/c/default?folder=Documents%2F")
            browser.find("#listing")
            before = browser.script("return document.body.getAttribute('data-updated')")
            with open(os.path.join(source, "live.txt"), "w") as f:
                f.write("pushed while the page was open\n")
            cli("push", os.path.join(source, "live.txt"), "Documents/live.txt", device="phone")
            wait_for(lambda: "live.txt" in browser.text("#main"), 20, "the push to appear without a reload")
            assert browser.script("return document.body.getAttribute('data-updated')") != before, "the page was reloaded, not updated"

        def delete_and_restore():
            browser.go(server_url + "/web/c/default/item?path=Documents%2Ftodo.txt")
            browser.click("#delete")
            wait_for(lambda: "todo.txt" not in browser.text("#main"), 10, "todo.txt to leave the folder")
            browser.click("#deleted-link")
            wait_for(lambda: "Documents/todo.txt" in browser.text("#main"), 10, "Recently Deleted")
            shot("deleted")
            browser.click("button.restore")
            wait_for(lambda: "todo.txt" in browser.text("h1"), 10, "the restored document")
            pulled = os.path.join(work, "todo.txt")
            cli("pull", "Documents/todo.txt", pulled, device="restorer")
            assert open(pulled).read() == "milk\n"

        def conflict():
            mine = os.path.join(work, "a.txt")
            theirs = os.path.join(work, "b.txt")
            with open(mine, "w") as f:
                f.write("v1\n")
            cli("push", mine, "Documents/plan.txt", device="a")
            cli("pull", "Documents/plan.txt", theirs, device="b")
            with open(mine, "w") as f:
                f.write("from a\n")
            os.utime(mine, (time.time() - 100, time.time() - 100))
            cli("push", mine, "Documents/plan.txt", device="a")
            with open(theirs, "w") as f:
                f.write("from b\n")
            cli("push", theirs, "Documents/plan.txt", device="b")
            browser.go(server_url + "/web/c/default/item?path=Documents%2Fplan.txt")
            assert "conflicting" in browser.text("#conflict-note")
            shot("conflict")
            # Keep a's version (the one that lost), from its row.
            rows = browser.script("return Array.from(document.querySelectorAll('#versions tr[data-version]')).map(r => [r.dataset.version, r.innerText])")
            losing = next(v for v, text in rows if "conflict" in text)
            browser.click(f"#versions tr[data-version='{losing}'] button.keep")
            wait_for(lambda: not browser.script("return document.getElementById('conflict-note') !== null"), 10, "the conflict to be settled")
            pulled = os.path.join(work, "plan.txt")
            cli("pull", "Documents/plan.txt", pulled, device="c")
            assert open(pulled).read() == "from a\n", open(pulled).read()

        def share():
            browser.go(server_url + "/web/c/default/item?path=Documents%2FWork%2Freport.pdf")
            browser.script("document.getElementById('share-tools').open = true")
            browser.type("#share-password", "open sesame")
            browser.click("#share")
            link = wait_for(lambda: browser.script("const e = document.getElementById('share-url'); return e && e.value"), 10, "the link")
            shot("share-made")
            browser.clear_cookies()
            browser.go(server_url + "/web/")
            wait_for(lambda: browser.url.endswith("/web/signin"), 10, "signed out")
            browser.go(link)
            browser.type("#password", "open sesame")
            browser.click("#unlock")
            wait_for(lambda: "report.pdf" in browser.text("h1"), 10, "the shared page")
            shot("share-opened")
            path = download("#download", "report.pdf")
            assert sha(path) == hashlib.sha256(report).hexdigest()

        def member():
            bob = json.loads(subprocess.run([xfer, "account", "create", "bob", "--server", server_url, "--token", admin, "--json"],
                                            capture_output=True, text=True, check=True).stdout)["token"]
            cli("container", "share", "default", "bob", "--role", "reader")
            browser.clear_cookies()
            browser.go(server_url + "/web/signin")
            browser.type("#token", bob)
            browser.click("#signin")
            wait_for(lambda: "Containers" in browser.text("h1"), 10, "bob's containers page")
            listed = browser.text("ul.containers")
            assert "alice/default" in listed and "reader" in listed, listed
            shot("member-containers")
            browser.click("a[href='/web/c/alice:default']")
            wait_for(lambda: "Documents" in browser.text("#main"), 10, "the shared container's top folder")
            browser.click("a[href='/web/c/alice:default?folder=Documents%2F']")
            wait_for(lambda: "Trip.pkg" in browser.text("#listing"), 10, "Documents/ of the shared container")
            local = os.path.join(work, "from-bob.txt")
            with open(local, "w") as f:
                f.write("a reader's upload\n")
            browser.script("document.querySelector('details.tools').open = true")
            element = browser.find("#upload-file")
            browser.call("POST", browser.s(f"/element/{element}/value"), {"text": local})
            browser.click("#upload")
            wait_for(lambda: "may not change" in browser.text("body"), 10, "the reader's upload to be refused")
            shot("member-refused")
            assert cli("pull", "Documents/from-bob.txt", os.path.join(work, "nothing"), check=False).returncode != 0, \
                "a reader's upload reached the container"

        def no_console_errors():
            errors = [entry for entry in browser.console() if entry.get("level") == "SEVERE"]
            assert not errors, errors

        for name, body in [("sign in", sign_in), ("browse", browse), ("search", search), ("download a file", download_file),
                           ("download a package as tar", download_package), ("upload, then pull with the CLI", upload),
                           ("a push appears without a reload", live), ("delete and restore", delete_and_restore),
                           ("resolve a conflict", conflict), ("open a share link signed out", share),
                           ("no errors in the console (CSP included)", no_console_errors),
                           ("a member's view of a shared container; a reader's upload refused", member)]:
            step(name, body)
        browser.quit()
    finally:
        server.stop()
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if args.keep or failures:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} step(s) failed: {', '.join(failures)}")
        sys.exit(1)
    print("web view: every step passed in headless Chromium")


def _ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as response:
            return json.loads(response.read())["value"]["ready"]
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":
    main()
