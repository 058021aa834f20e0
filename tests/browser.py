"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages
ended by NUL on file descriptors 3 and 4), with the standard library only: open a page, wait for its scripts,
read its DOM, its console errors and every URL it asked for, and take a screenshot.

Used by tests/test_report.py and benchmarks/report_pages.py."""

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

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _high(pipe: tuple[int, int]) -> tuple[int, int]:
    """The pipe's ends moved to descriptors from 10 up, so that putting them on 3 and 4 clobbers neither."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in pipe)
    for fd in pipe:
        os.close(fd)
    return moved


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page; ``with Browser() as b: b.open(path)``."""

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 900, timeout: float = 60.0):
        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError("no Chromium on PATH")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ks-chromium-")
        to_browser_read, self._to_browser = _high(os.pipe())
        self._from_browser, from_browser_write = _high(os.pipe())

        # the browser reads commands on fd 3 and writes answers on fd 4: bash puts the pipes there (dash reads
        # no descriptor over 9)
        redirect = f'exec "$0" "$@" 3<&{to_browser_read} 4>&{from_browser_write}'
        self.process = subprocess.Popen(
            ["bash", "-c", redirect, executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(to_browser_read, from_browser_write),
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        try:
            target = self.command("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.command("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network", "Performance"):
                self.command(f"{domain}.enable", session=True)
            self.resize(width, height)
        except BaseException:
            self.close()
            raise

    def _send(self, message: dict) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed the pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def command(self, method: str, session: bool = False, **params) -> dict:
        """Send one command and wait for its answer, keeping the events that come in the meantime."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serializable values only; a promise is awaited)."""
        result = self.command(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def resize(self, width: int, height: int) -> None:
        self.command(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def open(self, path: Path, ready: str = "window.ksReady === true") -> float:
        """Load a local file and wait until ``ready`` holds; returns the seconds from navigation to ready."""
        self.events.clear()
        start = time.monotonic()
        self.command("Page.navigate", session=True, url=Path(path).resolve().as_uri())
        deadline = start + self.timeout
        while not self.evaluate(f"Boolean({ready})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"{path}: the page was not ready within {self.timeout:g} s")
            time.sleep(0.02)
        return time.monotonic() - start

    def console_errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and failed loads, since the page was opened."""
        self.command("Runtime.evaluate", session=True, expression="0")  # collect the events still in the pipe
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(params["entry"].get("text", ""))
            elif method == "Network.loadingFailed":
                found.append(f"failed to load: {params.get('errorText')}")
        return found

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, width: int = 1400, height: int | None = None) -> None:
        """A PNG of the page at ``width`` CSS pixels: its top ``height`` pixels, or all of it."""
        height = height or int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        self.resize(width, height)
        self.evaluate("new Promise(done => setTimeout(done, 500))")  # charts that follow the window's size redraw
        data = self.command("Page.captureScreenshot", session=True, format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def metrics(self) -> dict[str, float]:
        """Chromium's counters for the page (ScriptDuration, TaskDuration…: seconds of main-thread work)."""
        return {m["name"]: m["value"] for m in self.command("Performance.getMetrics", session=True)["metrics"]}

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self._send({"id": 0, "method": "Browser.close", "params": {}})
                    self.process.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.process.kill()
                    self.process.wait()
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
