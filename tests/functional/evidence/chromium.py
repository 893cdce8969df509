"""Open a report page in Debian's headless chromium and measure its plots over the DevTools protocol.

The page has no script, so the measuring is done from outside: chromium starts headless with a
fresh user-data dir and a DevTools port on loopback (the port it picked is read from
`DevToolsActivePort`), and one websocket session sets the viewport, loads the page, reads each
plot's box from the layout (`Runtime.evaluate` runs in DevTools, not in the page), and takes
screenshots: the whole page (kept as a test artifact) and each plot alone (to see it is drawn).
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from PIL import Image
from websockets.sync.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("GCO_TEST_ARTIFACTS", ROOT / "test-artifacts"))
VIEWPORT = (1280, 900)
START_TIMEOUT_S = 60.0
MEASURE = """JSON.stringify({
  width: document.documentElement.clientWidth,
  scrollWidth: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
  plots: [...document.querySelectorAll('svg.plot')].map(e => {
    const r = e.getBoundingClientRect();
    return {name: e.dataset.plot, x: r.left + scrollX, y: r.top + scrollY, width: r.width,
            height: r.height, shapes: e.querySelectorAll('path, use, text').length};
  })
})"""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """One DevTools session on a page target."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            message = json.loads(self.socket.recv(timeout=START_TIMEOUT_S))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"]["value"]

    def screenshot(self, x: float, y: float, width: float, height: float) -> bytes:
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        return base64.b64decode(data["data"])


@contextmanager
def browser(user_data: Path) -> Iterator[DevTools]:
    """Headless chromium with a fresh profile in `user_data`, stopped (and its group gone) after."""
    binary = chromium_path()
    assert binary is not None
    argv = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={user_data}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "--no-first-run",
        "--hide-scrollbars",
        f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
        "about:blank",
    ]
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        port_file = user_data / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists() or not port_file.read_text().strip():
            assert process.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium wrote no DevToolsActivePort"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(t for t in targets if t["type"] == "page")
        socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        with socket:  # its __enter__ returns the socket, typed as the base class `Connection`
            yield DevTools(socket)
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=20)


def load(tools: DevTools, page: Path) -> dict[str, Any]:
    """Load `page` at the fixed viewport and return its layout measurements."""
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        width=VIEWPORT[0],
        height=VIEWPORT[1],
        deviceScaleFactor=1,
        mobile=False,
    )
    tools.call("Page.enable")
    tools.call("Page.navigate", url=page.resolve().as_uri())
    deadline = time.monotonic() + START_TIMEOUT_S
    while tools.evaluate("document.readyState") != "complete":
        assert time.monotonic() < deadline, "the page did not finish loading"
        time.sleep(0.1)
    return dict(json.loads(tools.evaluate(MEASURE)))


def drawn(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of non-white pixels) of a screenshot."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = [image.getpixel((x, y)) for x in range(0, image.width, 2) for y in range(0, image.height, 2)]
    inked = sum(1 for pixel in pixels if pixel != (255, 255, 255))
    return len(set(pixels)), inked / max(len(pixels), 1)


def inspect_page(page: Path, user_data: Path, artifact_name: str) -> dict[str, Any]:
    """Open `page`, keep a full-page screenshot under ARTIFACTS, and report each plot's box and ink."""
    with browser(user_data) as tools:
        layout = load(tools, page)
        for plot in layout["plots"]:
            plot["colours"], plot["ink"] = drawn(
                tools.screenshot(plot["x"], plot["y"], max(plot["width"], 1), max(plot["height"], 1))
            )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / artifact_name
        shot.write_bytes(tools.screenshot(0, 0, layout["width"], layout["height"]))
        layout["screenshot"] = str(shot)
    return layout
