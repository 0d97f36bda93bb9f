"""Shared test helpers: the line-accounting invariant every parser must keep, and an
independent way to compute expected timestamps."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from faultline.pipeline.records import FileParse
from faultline.schemas.event_kinds import EVENT_KINDS


def us(text: str, tz: str = "UTC") -> int:
    """Epoch microseconds of an ISO time (zone-less: in ``tz``), computed independently."""
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=ZoneInfo(tz))
    return round(t.timestamp() * 1_000_000)


def check_accounting(fp: FileParse) -> None:
    """Every line is an event line, a reject or routine, never two of them."""
    covered: set[int] = set()
    for e in fp.events:
        assert 1 <= e.line_no <= e.line_end <= fp.lines
        covered.update(range(e.line_no, e.line_end + 1))
        assert e.kind in EVENT_KINDS
        assert (e.ts is None) == (e.ts_quality == "untimed")
    rejected = {r.line_no for r in fp.rejects}
    assert all(1 <= n <= fp.lines for n in rejected)
    assert not covered & rejected, "a line is both an event and a reject"
    assert fp.lines == fp.routine_lines + fp.event_lines + fp.reject_lines
    assert fp.routine_lines >= 0
