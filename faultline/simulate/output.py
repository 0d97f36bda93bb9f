"""Writing corpus files and recording their ground truth as they are written.

Writers stream lines (str, or bytes for deliberately broken ones) into a file, plain or
gzip, counting lines and remembering the line numbers of the marked ones, so the truth
files (``truth/files.csv``, ``truth/signals.csv``) are exact by construction.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from faultline.simulate.layouts import LAYOUTS, Layout
from faultline.simulate.model import Line

NO_FINAL_NEWLINE = object()  # yield last: the file ends in a truncated line


@dataclass(frozen=True)
class Marked:
    """A line whose position the truth must record."""

    text: str | bytes
    line: Line
    incident: int | None  # index of the interruption it belongs to (None: noise)


@dataclass
class FileTruth:
    path: str
    source: str
    lines: int
    bytes: int
    compressed: bool


class CorpusOutput:
    """The corpus directory and its truth, written together.

    ``layout`` routes each canonical file to its path (see
    :mod:`faultline.simulate.layouts`); a file routed to a path already written this
    run is appended to it, and its truth row (written at :meth:`close`) covers both.
    """

    def __init__(self, root: Path, layout: Layout | None = None,
                 zone: ZoneInfo | None = None, start: dt.datetime | None = None) -> None:
        self.root = root
        self.layout = layout or LAYOUTS["canonical"]
        self.zone = zone or ZoneInfo("UTC")  # the cluster's zone and the corpus start
        self.start = start  # (local wall time), for a layout's finish step
        self.written: dict[str, FileTruth] = {}
        # per path, the first line (0-based) of each write appended to it
        self.runs: dict[str, list[int]] = {}
        # truth/signals.csv rows, written at close (a layout may renumber them)
        self.signal_rows: list[list[object]] = []
        self._unterminated: set[str] = set()
        self.corpus = root / "corpus"
        self.truth_dir = root / "truth"
        self.corpus.mkdir(parents=True, exist_ok=True)
        self.truth_dir.mkdir(parents=True, exist_ok=True)
        self._files = (self.truth_dir / "files.csv").open("w", newline="", encoding="utf-8")
        self._sig = (self.truth_dir / "signals.csv").open("w", newline="", encoding="utf-8")
        self.files = csv.writer(self._files)
        self.files.writerow(["path", "source", "lines", "bytes", "compressed"])
        self.signals = csv.writer(self._sig)
        self.signals.writerow(["interruption", "path", "line_no", "role", "kind", "xid",
                               "host", "text"])
        self.total_lines = 0
        self.total_bytes = 0
        self.n_files = 0

    def write(self, rel: str, lines: Iterable[object], source: str,
              compress: bool = False, newline: bytes = b"\n",
              host: str | None = None) -> FileTruth:
        """Write one canonical file (``host``: the host it belongs to, for the layout)."""
        routed = self.layout.route(rel, source, host)
        if routed != rel:  # a routed name says itself whether it is gzip
            compress = compress and routed.endswith(".gz")
        rel = routed
        before = self.written.get(rel)
        if before is not None:
            compress = before.compressed  # appended: another gzip member, or plain
        path = self.corpus / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = path.open("ab" if before is not None else "wb")
        out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                            compresslevel=4) if compress else raw
        n = before.lines if before is not None else 0
        self.runs.setdefault(rel, []).append(n)
        buf: list[bytes] = []
        # appending after a file that ended without a newline: end its last line first
        pending_newline = rel in self._unterminated
        truncated = False
        for item in lines:
            if item is NO_FINAL_NEWLINE:
                truncated = True
                continue
            if isinstance(item, Marked):
                n += 1
                ln = item.line
                self.signal_rows.append([
                    "" if item.incident is None else item.incident, rel, n, ln.role,
                    ln.kind, "" if ln.xid is None else ln.xid, ln.host or "",
                    (item.text if isinstance(item.text, str)
                     else item.text.decode("utf-8", "replace"))[:200]])
                item = item.text
            else:
                n += 1
            if pending_newline:
                buf.append(newline)
            data = item.encode("utf-8") if isinstance(item, str) else item
            n += data.count(b"\n")  # free text with embedded newlines spans lines
            buf.append(data)
            pending_newline = True
            if len(buf) > 20000:
                out.write(b"".join(buf))
                buf.clear()
        if pending_newline and not truncated:
            buf.append(newline)
        if truncated and pending_newline:
            self._unterminated.add(rel)
        else:
            self._unterminated.discard(rel)
        out.write(b"".join(buf))
        if compress:
            out.close()
        raw.close()
        size = path.stat().st_size
        truth = FileTruth(rel, source, n, size, compress)
        if before is None:
            self.n_files += 1
        self.total_lines += n - (before.lines if before is not None else 0)
        self.total_bytes += size - (before.bytes if before is not None else 0)
        self.written[rel] = truth
        return truth

    def replace(self, rel: str, data: bytes, renumber: list[int]) -> None:
        """Rewrite a plain file with the same lines in another order (a layout's finish
        step): ``renumber[old_line_no - 1]`` is each line's new number."""
        path = self.corpus / rel
        path.write_bytes(data)
        old = self.written[rel]
        size = len(data)
        self.total_bytes += size - old.bytes
        self.written[rel] = FileTruth(rel, old.source, old.lines, size, False)
        for row in self.signal_rows:
            if row[1] == rel:
                row[2] = renumber[int(row[2]) - 1]

    def close(self) -> None:
        if self.layout.finish is not None:
            self.layout.finish(self)
        self.signals.writerows(self.signal_rows)
        for t in self.written.values():
            self.files.writerow([t.path, t.source, t.lines, t.bytes, int(t.compressed)])
        self._files.close()
        self._sig.close()
