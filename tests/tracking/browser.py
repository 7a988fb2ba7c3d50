"""A headless Chromium page driven over the DevTools protocol (websockets comes with trackio's uvicorn):
open an address, evaluate JavaScript (a click, a read of what the page shows), take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect


class Page:
    def __init__(self, chromium: str, profile: Path, width: int = 1400, height: int = 1100):
        self._proc = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in self._proc.stderr:
            found = re.search(r"DevTools listening on ws://([^/]+)/", line)
            if found:
                break
        else:
            raise RuntimeError("chromium exited before it listened for DevTools")
        threading.Thread(target=self._proc.stderr.read, daemon=True).start()  # drained: a full pipe blocks it
        with urllib.request.urlopen(f"http://{found[1]}/json/list", timeout=30) as answer:
            target = next(t for t in json.load(answer) if t["type"] == "page")
        self._stack = contextlib.ExitStack()  # connect() is a context manager
        self._ws = self._stack.enter_context(connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self._ids = itertools.count(1)

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        call = next(self._ids)
        self._ws.send(json.dumps({"id": call, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=120))
            if message.get("id") == call:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def open(self, url: str) -> None:
        self._call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self._call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout_ms: int = 60000) -> None:
        """Until the JavaScript ``condition`` is true (polled every 100 ms), else an error."""
        ok = self.evaluate(
            f"new Promise(done => {{ const t0 = Date.now(); const poll = () => {{ if ({condition}) done(true);"
            f" else if (Date.now() - t0 > {timeout_ms}) done(false); else setTimeout(poll, 100); }}; poll(); }})"
        )
        if not ok:
            raise TimeoutError(f"the page never showed: {condition}")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self._stack.close()
        self._proc.terminate()
        self._proc.wait(timeout=30)
