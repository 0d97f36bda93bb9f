"""Open a report in headless Chromium: the DOM after the charts are drawn, or a PNG.

The page's charts are drawn by JavaScript, so what a reader sees is only known after a
browser ran it. The tests use this to check the drawn SVG, and
``docs/make_report_sample.py`` to take the screenshot in the README.

Flags (https://developer.chrome.com/docs/automation-and-testing/headless-cli):
``--dump-dom`` prints the DOM after the page's scripts ran; ``--virtual-time-budget``
fast-forwards the page's timers so Vega finishes drawing first; the ``--disable-*``
flags keep the browser from calling home on its own, and the resolver rule
``MAP * ~NOTFOUND`` answers every host-name lookup with "not found", so a page that
draws here needs no network; ``--no-sandbox`` because CI runs as root, where
Chromium's sandbox refuses to start.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

WIDTH = 1280
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update",
          "--disable-sync", "--hide-scrollbars", "--virtual-time-budget=10000",
          "--host-resolver-rules=MAP * ~NOTFOUND")
_HEIGHT = re.compile(r'data-page-height="(\d+)"')


def chromium() -> str | None:
    """The Chromium executable on PATH (Debian's package names it ``chromium``)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, *extra: str, timeout: float = 120) -> str:
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="faultline-chromium-") as profile:
        done = subprocess.run(
            [exe, *_FLAGS, f"--user-data-dir={profile}", *extra,
             page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def dump_dom(page: Path, width: int = WIDTH) -> str:
    """The page's DOM, serialized, after its scripts ran, laid out ``width`` pixels wide
    (the height a screenshot needs depends on the width)."""
    return _run(page, f"--window-size={width},900", "--dump-dom")


def screenshot(page: Path, png: Path, height: int | None = None) -> Path:
    """A PNG of the page, WIDTH pixels wide; the whole page unless ``height`` is given.

    The page records its drawn height in ``data-page-height`` once every chart is
    drawn, so one DOM dump first gives the height of a full-page shot."""
    if height is None:
        found = _HEIGHT.search(dump_dom(page))
        if not found:
            raise RuntimeError("the page did not report its height (charts not drawn?)")
        height = int(found.group(1))
    _run(page, f"--window-size={WIDTH},{height}", f"--screenshot={png.resolve()}")
    return png
