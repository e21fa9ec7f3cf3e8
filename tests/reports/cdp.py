"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe, for looking at reports in headless Chromium."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium speaking CDP over fds 3 (commands in) and 4 (replies and events out).

    The pipe avoids ports and websockets: nothing listens on the network, and the browser dies
    with the test.
    """

    def __init__(self, executable: str, user_data_dir: Path, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        to_browser_read, self._to_browser = (_above_four(fd) for fd in os.pipe())
        self._from_browser, from_browser_write = (_above_four(fd) for fd in os.pipe())

        def map_protocol_fds() -> None:
            # In the child, before exec: the protocol fixes fd 3 (commands in) and fd 4 (messages out).
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        # close_fds=False is safe: Python's own fds are close-on-exec; only 0-4 reach Chromium.
        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
            preexec_fn=map_protocol_fds,
            close_fds=False,  # the test process forks no threads here
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        # The browser may already be gone; it is killed below either way.
        with contextlib.suppress(OSError, TimeoutError, ConnectionError, RuntimeError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send one command and wait for its reply (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._read()
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, remaining))
            if not ready:
                raise TimeoutError(f"no message from Chromium within {self.timeout_s:.0f} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError(f"Chromium closed the pipe (exit code {self.process.poll()})")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)


def _above_four(fd: int) -> int:
    """Move a pipe end above fd 4, so mapping our ends onto 3 and 4 in the child cannot clobber one."""
    if fd > 4:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Page:
    """One tab of a Browser: navigate, evaluate JavaScript, click like a mouse, take screenshots."""

    def __init__(self, browser: Browser, width: int = 1280, height: int = 1000) -> None:
        self.browser = browser
        self.width = width
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=self.session)
        self.resize(width, height)

    def resize(self, width: int, height: int = 1000) -> None:
        self.width = width
        self.browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            self.session,
        )

    def open(self, url: str) -> None:
        self.browser.send("Page.navigate", {"url": url}, self.session)
        self.browser.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        reply = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:60]!r} threw: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    def click(self, selector: str) -> None:
        """A real left click (press and release) at the centre of the first element matching `selector`."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()"
        )
        if box is None:
            raise LookupError(f"no element matches {selector!r}")
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
                self.session,
            )

    def screenshot(self, path: Path, max_height: int = 12000) -> int:
        """The whole page (up to `max_height` px) as a PNG; returns its height."""
        metrics = self.browser.send("Page.getLayoutMetrics", session=self.session)
        height = int(min(metrics["cssContentSize"]["height"], max_height))
        shot = self.browser.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1},
            },
            self.session,
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return height

    @property
    def requests(self) -> list[str]:
        """Every URL the page asked for so far (the page itself included)."""
        return [
            e["params"]["request"]["url"]
            for e in self.browser.events
            if e["method"] == "Network.requestWillBeSent"
        ]

    @property
    def errors(self) -> list[str]:
        return _errors(self.browser.events)


@contextlib.contextmanager
def open_page(executable: str, url: str, user_data_dir: Path, width: int = 1280) -> Iterator[Page]:
    """A loaded page in a fresh headless Chromium, closed afterwards."""
    with Browser(executable, user_data_dir) as browser:
        page = Page(browser, width)
        page.open(url)
        yield page


def inspect_page(
    executable: str, url: str, user_data_dir: Path, screenshot: Path, width: int = 1280
) -> dict[str, Any]:
    """Load `url`, wait for load, and return what a reviewer checks: errors, requests, charts, a screenshot."""
    with open_page(executable, url, user_data_dir, width) as page:
        charts = page.evaluate(_CHART_PROBE)
        height = page.screenshot(screenshot)
        return {"charts": charts, "requests": page.requests, "errors": page.errors, "height": height}


def _errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(
                "console: "
                + " ".join(str(arg.get("value", arg.get("description"))) for arg in params.get("args", []))
            )
        elif event["method"] == "Runtime.exceptionThrown":
            errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
        elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append("log: " + str(params["entry"].get("text")))
    return errors


# Every chart container, the size its SVG or image actually got, and how many shapes it drew.
_CHART_PROBE = """
JSON.parse(JSON.stringify(Array.from(document.querySelectorAll('.chart')).map(chart => {
  const graphic = chart.querySelector('svg, img');
  const box = graphic ? graphic.getBoundingClientRect() : {width: 0, height: 0};
  return {tag: graphic ? graphic.tagName.toLowerCase() : null, width: box.width, height: box.height,
          shapes: graphic ? graphic.querySelectorAll('path, use, rect').length : 0,
          label: graphic ? graphic.getAttribute('aria-label') : null};
})))
"""
