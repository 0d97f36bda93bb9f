"""Times of a job log's lines: the stamp a line carries, else one it inherits.

:class:`Clock` is the collector-stamped file's (a line without a stamp takes the one
above it); :class:`ForwardClock` the one of a file without collector stamps (a
``slurm-<jobid>.out``: the one below it). Both read candidate lines in increasing line
order and look at every line at most once in each direction.
"""

from __future__ import annotations

from collections.abc import Callable

from faultline.pipeline.records import ParseContext
from faultline.pipeline.timeutil import in_range, parse_iso

_ASK = object()


class Clock:
    """Times of candidate lines, read in increasing line order.

    A line with a stamp of its own is ``exact`` (zone carried) or ``assumed_tz``; a
    line without one takes the nearest stamped line above it (``inherited``), found by
    looking back no further than the previous query: every line is examined at most once.
    """

    def __init__(self, lines: list[str], ctx: ParseContext,
                 stamp: Callable[[str], str | tuple[str, str] | None]) -> None:
        self.lines = lines
        self.zone = ctx.zone
        self.stamp = stamp
        self.pos = -1
        self.last: int | None = None

    def _parse(self, text: str | tuple[str, str]) -> tuple[int, str] | None:
        """A stamp's time; None if unreadable or out of range (a broken clock's stamp
        is no better than none: the line inherits, like an unstamped one). A stamp
        given as (text, ts_quality) keeps that quality (``inferred_year``)."""
        quality = None
        if isinstance(text, tuple):
            text, quality = text
        got = parse_iso(text, self.zone)
        if got is None or not in_range(got[0]):
            return None
        return got[0], quality or ("exact" if got[1] else "assumed_tz")

    def at(self, i: int, own: str | tuple[str, str] | None = None, *, stamp: object = _ASK
           ) -> tuple[int | None, str]:
        """(ts, ts_quality) of line ``i``; ``own`` is a fallback stamp of the line itself;
        ``stamp``, when given, is what the stamp function says of line ``i``."""
        text = self.stamp(self.lines[i]) if stamp is _ASK else stamp
        if text is not None and (got := self._parse(text)) is not None:
            self.pos, self.last = i, got[0]
            return got
        for j in range(i - 1, self.pos, -1):
            t = self.stamp(self.lines[j])
            if t is not None and (got := self._parse(t)) is not None:
                self.last = got[0]
                break
        self.pos = max(self.pos, i)
        if own is not None and (got := self._parse(own)) is not None:
            return got
        if self.last is None:
            return None, "untimed"
        return self.last, "inherited"


class ForwardClock(Clock):
    """The clock of a file without collector stamps (a ``slurm-<jobid>.out``): a line
    without a stamp of its own was written no later than the next stamped line below
    it, and that time is the one it takes (``inherited``). Its symptoms then never sort
    before the exact times of the other logs' causes, which the time above (often a
    trainer step minutes before a hang) would do. A line with no stamp below it takes
    the one above. Each line is examined at most once forwards, once backwards."""

    def __init__(self, lines: list[str], ctx: ParseContext,
                 stamp: Callable[[str], str | tuple[str, str] | None]) -> None:
        super().__init__(lines, ctx, stamp)
        self.ahead = -1  # lines[:ahead + 1] were scanned forwards
        self.next: tuple[int, int, str] | None = None  # (line, ts, quality) found there

    def at(self, i: int, own: str | tuple[str, str] | None = None, *, stamp: object = _ASK
           ) -> tuple[int | None, str]:
        ts, quality = super().at(i, own, stamp=stamp)
        if quality != "inherited":
            return ts, quality
        if self.next is None or self.next[0] <= i:
            self.next = None
            for j in range(max(i + 1, self.ahead + 1), len(self.lines)):
                self.ahead = j
                t = self.stamp(self.lines[j])
                if t is not None and (got := self._parse(t)) is not None:
                    self.next = (j, got[0], got[1])
                    break
        if self.next is not None:
            return self.next[1], "inherited"
        return ts, quality
