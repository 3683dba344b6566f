"""Open a page in headless Debian chromium and inspect it over the DevTools protocol.

The protocol runs over a pipe (``--remote-debugging-pipe``: chromium reads JSON messages
ended by NUL from fd 3 and writes them to fd 4), so no port, no websocket client and no
chromedriver are needed. ``inspect_page`` navigates to a file, waits for the load event,
evaluates a script, takes a full-page screenshot and returns every console message,
uncaught exception and log entry the page produced.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1200,900",
         "--remote-debugging-pipe"]


def chromium_path() -> str | None:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium")


class DevToolsPipe:
    def __init__(self, binary: str, user_data_dir: str, timeout: float = 60.0):
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # the child's ends go to free fds >= 10, then onto 3 and 4 in the child
        child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def child_fds():
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(3, 4, child_r, child_w), preexec_fn=child_fds)
        os.close(child_r)
        os.close(child_w)
        self.wfd, self.rfd = to_chrome_w, from_chrome_r
        self.buf = b""
        self.next_id = 0
        self.events: list = []
        self.timeout = timeout

    def _read_message(self, deadline: float):
        while self.buf.startswith(b"\0"):  # tolerate empty messages
            self.buf = self.buf[1:]
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self.rfd], [], [], left)
            if ready:
                chunk = os.read(self.rfd, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe: "
                                       + self.proc.stderr.read().decode(errors="replace")[-2000:])
                self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        if not raw.strip():
            return self._read_message(deadline)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method:
                return m
            self.events.append(m)

    def close(self):
        try:
            os.write(self.wfd, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass


def inspect_page(page: Path, script: str, screenshot: Path, *, settle_s: float = 0.5) -> dict:
    """Load ``page`` in headless chromium; return {"value": result of ``script`` (JSON-decoded),
    "console": [messages of level error/warning...], "exceptions": [...], "log": [...]}
    and write a full-page PNG screenshot to ``screenshot``."""
    binary = chromium_path()
    if not binary:
        raise FileNotFoundError("chromium is not installed")
    with tempfile.TemporaryDirectory(prefix="airlink-chromium-") as profile:
        dt = DevToolsPipe(binary, profile)
        try:
            targets = dt.send("Target.getTargets")["targetInfos"]
            page_target = next(t for t in targets if t["type"] == "page")
            session = dt.send("Target.attachToTarget", {"targetId": page_target["targetId"],
                                                        "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                dt.send(f"{domain}.enable", session=session)
            dt.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            dt.wait_event("Page.loadEventFired")
            time.sleep(settle_s)
            res = dt.send("Runtime.evaluate", {"expression": script, "returnByValue": True,
                                               "awaitPromise": True}, session=session)
            value = res.get("result", {}).get("value")
            shot = dt.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                           session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            # drain anything still queued (late console messages)
            try:
                dt.send("Runtime.evaluate", {"expression": "1"}, session=session)
            except Exception:
                pass
        finally:
            dt.close()
    console, exceptions, log = [], [], []
    for e in dt.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled":
            console.append({"type": p.get("type"),
                            "text": " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))})
        elif m == "Runtime.exceptionThrown":
            exceptions.append(p.get("exceptionDetails", {}).get("text"))
        elif m == "Log.entryAdded":
            entry = p.get("entry", {})
            log.append({"level": entry.get("level"), "text": entry.get("text"), "url": entry.get("url")})
    return {"value": json.loads(value) if isinstance(value, str) else value, "console": console,
            "exceptions": exceptions, "log": log}
