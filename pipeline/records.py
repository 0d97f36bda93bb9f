"""What parsers return: typed records, free of IO and of Beam.

Every parser is a pure function from text (plus the file's path, host and the user's
time settings) to a :class:`FileParse`: events, rejects and the count of routine lines.
The pipeline turns these into ``events``/``rejects`` rows (adding the file's sha256 and
the deterministic ``event_id``); parsers never see a database or a runner.

Times travel as integer microseconds since the Unix epoch, UTC (see
:mod:`faultline.schemas.types`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    import polars as pl

from faultline.schemas.event_kinds import EVENT_KINDS
from faultline.schemas.tables import TS_QUALITIES

RAW_LIMIT = 512  # characters of a rejected line kept in rejects.raw
INT32_MAX = 2**31 - 1  # the rank, xid and gpu_index columns are 32-bit


def rank_of(digits: str) -> int | None:
    """A training rank as written, or None when it cannot be one (wider than the 32-bit
    ``rank`` column: a damaged line, which must not fail the whole batch's table)."""
    n = int(digits)
    return n if 0 <= n <= INT32_MAX else None


@dataclass(frozen=True, slots=True)
class ParseContext:
    """The facts a parser may need beyond the text: all immutable, all picklable."""

    path: str
    host: str | None = None  # from the path (hosts/<host>/..., jobs/<id>/<host>.log)
    job_id: str | None = None  # from the path (jobs/<jobid>/...)
    tz: str = "UTC"  # zone of times that carry none
    year: int | None = None  # year for syslog lines that carry none
    # a site's kernel rules (``--rules``): (file name, TOML text) pairs, tried before
    # the built-in ones; the text travels, not the path, so every worker reads the same
    rules: tuple[tuple[str, str], ...] = ()
    # (start, end) epoch us of the file's job from sacct: the year of job-log stamps
    # that carry none, and the time of lines before the job's first stamp
    job_window: tuple[int, int] | None = None
    host_from: str = "none"  # how ``host`` was decided (faultline.pipeline.hostpath)
    # user-named JSON fields of structured logs: (("message", "log"), ("host", "node"))
    json_fields: tuple[tuple[str, str], ...] = ()

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)


@dataclass(slots=True)
class ParsedEvent:
    """One relevant record found in a file (one or more lines)."""

    line_no: int
    kind: str
    message: str
    ts: int | None = None  # epoch microseconds, UTC
    ts_quality: str = "untimed"
    host: str | None = None
    line_end: int | None = None  # defaults to line_no
    xid: int | None = None
    device: str | None = None  # normalized PCI address (0000:3b:00.0) or device name
    job_id: str | None = None
    rank: int | None = None
    attrs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.line_end is None:
            self.line_end = self.line_no
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}")
        if self.ts_quality not in TS_QUALITIES:
            raise ValueError(f"unknown ts_quality {self.ts_quality!r}")
        if (self.ts is None) != (self.ts_quality == "untimed"):
            raise ValueError("ts is None exactly when ts_quality is 'untimed'")


@dataclass(frozen=True, slots=True)
class Reject:
    """A line that could not be read, and why."""

    line_no: int
    reason: str
    raw: str

    @classmethod
    def of(cls, line_no: int, reason: str, raw: str) -> Reject:
        return cls(line_no, reason, raw[:RAW_LIMIT])


# The columns of the events a parser gives as a frame (``FileParse.columns``): the
# ``events`` columns a file's parse decides (``attrs`` as its JSON text).
COLUMN_EVENTS = ("line_no", "kind", "ts", "ts_quality", "host", "rank", "message", "attrs",
                 "job_id")


@dataclass(slots=True)
class FileParse:
    """Everything one parser found in one file.

    Accounting: ``lines == routine_lines + event_lines + reject_lines`` where
    ``event_lines`` counts each line covered by some event's ``line_no..line_end``
    once, however many events cover it.
    """

    lines: int
    events: list[ParsedEvent] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    shape: str | None = None  # e.g. rfc3339, rfc3164, dmesg_t, iso, kmsg
    # Rejected lines left out of ``rejects``: a file of no known source keeps only a
    # sample of its lines there (INTERFACE.md), but all of them count as rejected.
    unsampled_rejects: int = 0
    # More events, as columns (:data:`COLUMN_EVENTS`; one line each, in line order,
    # no two on a line; on a line ``events`` also has, the column event comes first):
    # the job-log lanes' and the trainer's ``train_step``
    columns: pl.DataFrame | None = None
    # whether a column event may share its line with one of ``events`` (the trainer's
    # ``nonfinite_loss`` on a step line; never a job-log lane's)
    shared_lines: bool = False
    # (batch frame, offset, slice) when ``columns`` is that slice of a batch's frame
    # (the job-log lanes'), and only while ``columns`` is that very slice: the rows of
    # a batch's files are then taken back by slicing the batch frame once, not by
    # concatenating a thousand frames (:func:`faultline.pipeline.eventcols.gathered`)
    column_span: tuple[pl.DataFrame, int, pl.DataFrame] | None = None

    @property
    def event_lines(self) -> int:
        covered: set[int] = set()
        multi = False
        for e in self.events:
            end = e.line_end or e.line_no
            if end == e.line_no:
                covered.add(end)
            else:
                multi = True
                covered.update(range(e.line_no, end + 1))
        if self.columns is None or not self.columns.height:
            return len(covered)
        if not covered or not (multi or self.shared_lines):  # no line counted twice
            return len(covered) + self.columns.height
        # a lane line may lie inside a traceback event's lines (another rank's)
        import numpy as np

        lane = self.columns["line_no"].to_numpy()  # increasing
        lines = np.fromiter(covered, dtype=np.int64, count=len(covered))
        at = np.minimum(np.searchsorted(lane, lines), len(lane) - 1)
        return len(covered) + len(lane) - int((lane[at] == lines).sum())

    @property
    def reject_lines(self) -> int:
        return len({r.line_no for r in self.rejects}) + self.unsampled_rejects

    @property
    def routine_lines(self) -> int:
        return self.lines - self.event_lines - self.reject_lines
