#!/usr/bin/python3
"""The report and the status page in a real browser (headless Chromium, over
the DevTools protocol):

  1. a store written by report_test_fixture; `anvil report` writes the job's
     report; the HTML is validated (html5lib, strict); opened from disk, every
     chart is drawn, nothing is fetched from the network, the console has no
     error; a full-page screenshot is saved;
  2. the status page served by report_test_fixture (token required) updates
     without a reload while the job progresses; screenshot saved;
  3. with --test-server (anvil serve over the coordinator's test doubles):
     the same page on the real server's metrics port, behind its token.

Usage: browser_test.py --anvil BIN --fixture BIN --out DIR
       browser_test.py --screenshot REPORT.html --out DIR   (a report's PNG, checked the same way)
Needs Debian's chromium, python3-html5lib and python3-websocket (setup.sh).
Exit 0 when every check passes; 77 (skipped) when Chromium is missing.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import html5lib
import websocket

CHARTS = ["speedups", "curve-tried", "curve-time", "roofline", "failures", "rewards"]
TOKEN = "status-test-token"


class Browser:
    """Headless Chromium with one page, driven over CDP."""

    def __init__(self, workdir):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
                break
            time.sleep(0.1)
        port = open(port_file).read().split("\n")[0]
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60)
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return r.get("result", {}).get("value")

    def open(self, url, ready, timeout=60):
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.eval(ready):
                return
            time.sleep(0.25)
        raise AssertionError(f"{url}: not ready after {timeout}s ({ready})")

    def console_errors(self):
        errors = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"].get("text", "") + " " +
                              str(p["exceptionDetails"].get("exception", {}).get("description", "")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(p["entry"]["text"] + " " + p["entry"].get("url", ""))
        return errors

    def requested_urls(self):
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path, width=1400):
        height = self.eval("Math.ceil(document.documentElement.scrollHeight)")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=min(int(height), 8000),
                  deviceScaleFactor=1, mobile=False)
        time.sleep(0.5)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def validate_html(path):
    parser = html5lib.HTMLParser(strict=True)
    with open(path, "rb") as f:
        parser.parse(f)  # raises ParseError on the first error
    check(not parser.errors, f"{os.path.basename(path)} is valid HTML5 (html5lib, strict)")


def test_report(args, browser):
    db = os.path.join(args.out, "report-test.db")
    html = os.path.join(args.out, "report.html")
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    subprocess.run([args.fixture, "write", db], check=True)
    subprocess.run([args.anvil, "--db", db, "report", "--job", "job-report-test", "--out", html], check=True)
    check_report_page(html, browser, CHARTS)
    rows = browser.eval("document.querySelectorAll('#table-problems tbody tr').length")
    check(rows == 3, f"the problem table has 3 rows ({rows})")
    bars = browser.eval("document.querySelectorAll('#chart-speedups .bars .point').length")
    check(bars > 0, f"the speedup chart has bars ({bars})")
    browser.screenshot(os.path.join(args.out, "report.png"))


def check_report_page(html, browser, charts):
    validate_html(html)
    browser.open("file://" + os.path.abspath(html), "document.body && document.body.dataset.charts !== undefined")
    drawn = browser.eval("Array.from(document.querySelectorAll('.js-plotly-plot')).map(e => e.dataset.chart)")
    check(sorted(drawn) == sorted(charts), f"every chart drawn: {drawn}")
    check(browser.eval("document.body.dataset.charts") == str(len(charts)), "the page counted its charts")
    remote = [u for u in browser.requested_urls() if not u.startswith(("file:", "data:", "blob:"))]
    check(not remote, f"nothing fetched from the network {remote}")
    errors = browser.console_errors()
    check(not errors, f"no console errors {errors}")


def shoot_report(html, out, browser):
    charts = CHARTS if '"rewards":[{' in open(html, encoding="utf-8").read() else CHARTS[:-1]
    check_report_page(html, browser, charts)
    png = os.path.join(out, os.path.splitext(os.path.basename(html))[0] + ".png")
    browser.screenshot(png)
    print("screenshot:", png)


def fetch_status(port, query=""):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json{query}").status
    except urllib.error.HTTPError as e:
        return e.code


def test_status(args, browser):
    db = os.path.join(args.out, "status-test.db")
    port_file = os.path.join(args.out, "status-test.port")
    for f in (db, db + "-wal", db + "-shm", port_file):
        if os.path.exists(f):
            os.remove(f)
    env = dict(os.environ, ANVIL_TEST_TOKEN=TOKEN)
    server = subprocess.Popen([args.fixture, "serve", db, port_file], env=env)
    try:
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        port = open(port_file).read().strip()
        check(fetch_status(port) == 401, "status.json without the token is 401")
        check(fetch_status(port, "?token=" + TOKEN) == 200, "status.json with the token is 200")
        browser.open(f"http://127.0.0.1:{port}/status?token={TOKEN}",
                     "document.body && Number(document.body.dataset.polls || 0) >= 1")
        text = "document.querySelector('#jobs tbody tr td:nth-child(6)').textContent"
        first = int(browser.eval(text))
        check(browser.eval("document.querySelectorAll('#workers tbody tr').length") == 1, "the worker is listed")
        check(browser.eval("document.querySelectorAll('#winners tbody tr').length") >= 3, "the winners are listed")
        deadline = time.time() + 20
        later = first
        while later <= first and time.time() < deadline:
            time.sleep(0.5)
            later = int(browser.eval(text))
        check(later > first, f"the page updated without a reload as the job progressed ({first} -> {later})")
        polls = int(browser.eval("document.body.dataset.polls"))
        check(polls >= 2, f"the page polled {polls} times")
        errors = browser.console_errors()
        check(not errors, f"no console errors {errors}")
        browser.screenshot(os.path.join(args.out, "status.png"), width=1280)
    finally:
        server.terminate()
        server.wait(timeout=10)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_status(args, browser):
    db = os.path.join(args.out, "serve-test.db")
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    port_file = os.path.join(args.out, "serve-test.port")
    metrics = free_port()
    env = dict(os.environ, ANVIL_AUTH_TOKEN=TOKEN, ANVIL_TEST_MEASURE_MS="150", ANVIL_TEST_CANDIDATES="40")
    log = open(os.path.join(args.out, "serve-test.log"), "w")
    server = subprocess.Popen([args.test_server, "--server-listen", "127.0.0.1:0", "--server-db", db,
                               "--server-port-file", port_file, "--metrics-listen", f"127.0.0.1:{metrics}"],
                              env=env, stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        code = None
        for _ in range(100):  # the metrics port opens beside the gRPC one
            try:
                code = fetch_status(metrics)
                break
            except urllib.error.URLError:
                time.sleep(0.2)
        check(code == 401, "anvil serve: status.json without the token is 401")
        browser.open(f"http://127.0.0.1:{metrics}/status?token={TOKEN}",
                     "document.body && Number(document.body.dataset.polls || 0) >= 1")
        check(browser.eval("document.getElementById('conn').className") == "ok",
              "anvil serve: the page reads status.json on the metrics port with the token")
        errors = browser.console_errors()
        check(not errors, f"no console errors {errors}")
        browser.screenshot(os.path.join(args.out, "status-serve.png"), width=1280)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anvil")
    ap.add_argument("--fixture")
    ap.add_argument("--test-server", help="anvil_test_server: also check the page on a real server")
    ap.add_argument("--screenshot", help="only open this report and save its PNG under --out")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not args.screenshot and not (args.anvil and args.fixture):
        ap.error("--anvil and --fixture are required (or --screenshot)")
    if shutil.which("chromium") is None:
        print("SKIPPED: chromium is not installed (scripts/setup.sh installs it)")
        return 77
    os.makedirs(args.out, exist_ok=True)
    browser = Browser(args.out)
    try:
        if args.screenshot:
            shoot_report(args.screenshot, args.out, browser)
            return 0
        test_report(args, browser)
        test_status(args, browser)
        if args.test_server:
            test_served_status(args, browser)
    finally:
        browser.close()
    print("browser test passed; screenshots in", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
