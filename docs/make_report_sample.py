"""Regenerate docs/report-sample.png: the HTML report of the bundled sample, full page.

Run from the repository root, with Chromium installed (``apt-get install chromium``):

    .venv/bin/python docs/make_report_sample.py

It ingests fixtures/sample/corpus into a temporary database with ``faultline ingest``,
writes the page with ``faultline report --html`` and takes a 1280-pixel-wide
screenshot of the whole page with headless Chromium (faultline.html_report.browser).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from faultline.html_report import browser

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "report-sample.png"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="faultline-report-sample-") as tmp:
        db, page = Path(tmp) / "sample.duckdb", Path(tmp) / "report.html"
        cli = [sys.executable, "-m", "faultline"]
        subprocess.run([*cli, "ingest", str(ROOT / "fixtures/sample/corpus"), "--db",
                        str(db)], check=True)
        subprocess.run([*cli, "report", "--db", str(db), "--html", str(page)],
                       check=True, stdout=subprocess.DEVNULL)
        browser.screenshot(page, OUT)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
