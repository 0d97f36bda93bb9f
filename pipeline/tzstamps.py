"""The stamps of the zone sample's lines, read many chunks at a time.

:func:`faultline.pipeline.tzevidence.gather` reads some 30,000 kernel lines and 20,000
job-log lines on the driver, before the parse; one by one, their regexes and
arithmetic were a third of the zone decision. Here the lines of all sampled chunks go
through polars together: its regex (Rust's) reads these patterns as Python's ``re``
does on ASCII text (they use only ``\\d``, ``[a-z]`` and literals, no ``\\s`` or
``\\w``), so ASCII lines are read vectorized and any other line by Python's ``re``,
with the same arithmetic, and the results come back in line order.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

import polars as pl

from faultline.pipeline.timeutil import TS_MAX_US, TS_MIN_US, in_range, parse_iso
from faultline.pipeline.tzinfer import Observation

OFFSET_STAMP = re.compile(
    r"^(?:[a-z]+ *:[a-z]+ *: )?"  # dmesg --decode: "kern  :warn  : "
    r"\[?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)([+-]\d\d:?\d\d)[\] ]")
Z_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z) ")
LOCAL_AFTER_Z = re.compile(
    r"(?:\[(?:rank|default)\d+\]:\[?)?"
    r"(?:[EWIF](\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d{1,9})?)"  # glog: MMDD, no year
    r"|\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]"  # NCCL >= 2.26 WARN stamp
    r"|(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} )")  # Python logging
# Z_STAMP's match is the only one it has (its end is fixed), so a line has both stamps
# exactly when it matches the two patterns in a row.
_PAIRED = Z_STAMP.pattern + "(?:" + LOCAL_AFTER_Z.pattern + ")"
_US = 1_000_000
_UTC = ZoneInfo("UTC")


def offsets_many(chunks: list[list[str]]) -> list[list[Observation]]:
    """:func:`~faultline.pipeline.tzevidence.offsets_in` of each chunk."""
    flat = [line for lines in chunks for line in lines]
    owner = [n for n, lines in enumerate(chunks) for _ in lines]  # line -> its chunk
    alike = [i for i, line in enumerate(flat) if line.isascii()]
    rows, ats, offs = _offsets_vectorized([flat[i] for i in alike]) if alike else ([], [], [])
    found = [(alike[k], Observation(at, off, "offset"))
             for k, at, off in zip(rows, ats, offs, strict=True)]
    if len(alike) < len(flat):  # any other line by Python's re, then all in line order
        days: dict[str, int | None] = {}
        offsets: dict[str, int | None] = {}
        found += [(i, o) for i, line in enumerate(flat) if not line.isascii()
                  and (o := offset_one(line, days, offsets)) is not None]
        found.sort(key=lambda io: io[0])
    out: list[list[Observation]] = [[] for _ in chunks]
    for i, o in found:
        out[owner[i]].append(o)
    return out


def offset_one(line: str, days: dict[str, int | None], offsets: dict[str, int | None]
                ) -> Observation | None:
    """One line's offset observation, by Python's ``re`` (``days``, ``offsets``: what
    dates and offsets read as, filled in as they are met).

    The wall time read as UTC, less the offset: what ``parse_iso`` gives the stamp with
    its offset (the same checks: a real date and time, an offset under 24 h), without a
    datetime; a date is read by ``parse_iso`` (its calendar check), the time of day
    checked as ``parse_iso`` checks it."""
    m = OFFSET_STAMP.match(line)
    if not m:
        return None
    stamp, off = m.group(1, 2)
    if (day := days.get(stamp[:10], -1)) == -1:
        day = days[stamp[:10]] = _midnight(stamp[:10])
    if (off_s := offsets.get(off, -1)) == -1:
        off_s = offsets[off] = offset_s(off)
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    if day is None or off_s is None or hour > 23 or minute > 59 or second > 59:
        return None
    frac = stamp[20:26]  # after [.,]: up to 9 digits, of which microseconds the first 6
    at = (day + ((hour * 60 + minute) * 60 + second - off_s) * _US
          + (int(frac.ljust(6, "0")) if frac else 0))
    return Observation(at, off_s, "offset") if in_range(at) else None


def _offsets_vectorized(lines: list[str]) -> tuple[list[int], list[int], list[int]]:
    """(row, instant, offset) of the ASCII ``lines`` with an offset stamp, in order:
    :func:`offset_one`'s arithmetic as columns, each distinct date and offset read
    once by the same functions."""
    got = (pl.Series("line", lines, dtype=pl.String).str.extract_groups(OFFSET_STAMP.pattern)
           .struct.unnest().rename({"1": "stamp", "2": "off"}).with_row_index("row")
           .filter(pl.col("stamp").is_not_null()))
    if got.is_empty():
        return [], [], []
    dates = got["stamp"].str.slice(0, 10)
    day_of = {d: _midnight(d) for d in dates.unique().to_list()}
    off_of = {o: offset_s(o) for o in got["off"].unique().to_list()}

    def part(start: int, length: int) -> pl.Expr:
        return pl.col("stamp").str.slice(start, length).cast(pl.Int64)

    got = got.with_columns(
        day=dates.replace_strict(day_of, return_dtype=pl.Int64),
        off_s=pl.col("off").replace_strict(off_of, return_dtype=pl.Int64),
        hour=part(11, 2), minute=part(14, 2), second=part(17, 2),
        frac=pl.col("stamp").str.slice(20, 6).str.pad_end(6, "0").cast(pl.Int64),
    ).filter(pl.col("day").is_not_null() & pl.col("off_s").is_not_null()
             & (pl.col("hour") <= 23) & (pl.col("minute") <= 59) & (pl.col("second") <= 59))
    got = got.with_columns(at=pl.col("day") + ((pl.col("hour") * 60 + pl.col("minute")) * 60
                                               + pl.col("second") - pl.col("off_s")) * _US
                           + pl.col("frac")
                           ).filter((pl.col("at") >= TS_MIN_US) & (pl.col("at") < TS_MAX_US))
    return got["row"].to_list(), got["at"].to_list(), got["off_s"].to_list()


def _midnight(date: str) -> int | None:
    """``YYYY-MM-DD``'s midnight UTC in epoch us, None if there is no such date."""
    got = parse_iso(date + "T00:00:00Z", _UTC)
    return got[0] if got else None


def offset_s(text: str) -> int | None:
    """``-08:00`` / ``+0530`` in seconds; None for 24 h or more (no such offset)."""
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:])
    return None if minutes >= 24 * 60 else sign * minutes * 60


def maybe_paired(chunks: list[list[str]]) -> list[list[str]]:
    """The lines of each chunk that may carry a collector's UTC stamp and a local one
    (:func:`~faultline.pipeline.tzevidence.paired_in` reads nothing else): the ASCII
    lines that do, and every other line."""
    flat = [line for lines in chunks for line in lines]
    keep = [not line.isascii() for line in flat]
    alike = [i for i, k in enumerate(keep) if not k]
    if alike:
        hit = pl.Series([flat[i] for i in alike], dtype=pl.String).str.contains(_PAIRED)
        for i in hit.arg_true().to_list():
            keep[alike[i]] = True
    out, pos = [], 0
    for lines in chunks:
        out.append([ln for ln, k in zip(lines, keep[pos:pos + len(lines)], strict=True) if k])
        pos += len(lines)
    return out
