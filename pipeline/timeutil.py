"""Timestamps to UTC epoch microseconds, with zone rules applied once, here.

Local (zone-less) times go through :func:`local_to_utc_us`: an ambiguous wall time in
the repeated hour of a daylight-saving change resolves to its first occurrence
(``fold=0``) and a time in the skipped hour is shifted forward, both as the zone
database defines them; the caller flags such times ``assumed_tz``.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from zoneinfo import ZoneInfo

UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()

TS_MIN_US = 946_684_800_000_000  # 2000-01-01T00:00:00Z
TS_MAX_US = 4_102_444_800_000_000  # 2100-01-01T00:00:00Z
OUT_OF_RANGE = "timestamp out of range"

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$"
)


def to_us(t: dt.datetime) -> int:
    """Aware datetime to epoch microseconds."""
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def in_range(us: int) -> bool:
    """Whether epoch microseconds ``us`` is a plausible log time (see module docstring)."""
    return TS_MIN_US <= us < TS_MAX_US


def from_us(us: int) -> dt.datetime:
    """Epoch microseconds to an aware UTC datetime."""
    return _EPOCH + dt.timedelta(microseconds=us)


def local_to_utc_us(naive: dt.datetime, zone: ZoneInfo) -> int:
    """A wall-clock time in ``zone`` to epoch microseconds (see module docstring)."""
    aware = naive.replace(tzinfo=zone, fold=0)
    # A wall time in a DST gap does not exist; round-tripping through UTC moves it
    # forward by the gap, which is what a clock that jumped would have shown.
    try:
        return to_us(aware.astimezone(UTC))
    except OverflowError as exc:  # 9999-12-31 west of UTC, 0001-01-01 east of it
        raise ValueError(f"{naive} in {zone} is outside the datetime range") from exc


@functools.lru_cache(maxsize=4096)
def _days_since_epoch(y: str, mo: str, d: str) -> int | None:
    """Days from 1970-01-01 to a calendar date (None if there is no such date)."""
    try:
        return dt.date(int(y), int(mo), int(d)).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None


def _utc_micro(text: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (27 characters) as :func:`parse_iso` reads it,
    without its regex; None when ``text`` is not exactly that layout, or not a valid
    time (then :func:`parse_iso` decides as usual). Every field is checked with
    ``isdecimal`` (what the regex's ``\\d`` matches), so nothing ``int`` alone would
    accept (signs, spaces, underscores) gets through."""
    if text[4] != "-" or text[7] != "-" or text[10] not in "T " or text[13] != ":" \
            or text[16] != ":" or text[19] not in ".,":
        return None
    y, mo, d, h, mi, s, frac = (text[0:4], text[5:7], text[8:10], text[11:13], text[14:16],
                                text[17:19], text[20:26])
    if not (y.isdecimal() and mo.isdecimal() and d.isdecimal() and h.isdecimal()
            and mi.isdecimal() and s.isdecimal() and frac.isdecimal()):
        return None
    days = _days_since_epoch(y, mo, d)
    hour, minute, second = int(h), int(mi), int(s)
    if days is None or hour > 23 or minute > 59 or second > 59:
        return None
    return ((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + int(frac)


def parse_iso(text: str, zone: ZoneInfo) -> tuple[int, bool] | None:
    """Parse an ISO-8601-like time (``T`` or space, ``.`` or ``,`` fraction, ``Z``,
    ``+00:00`` or ``+0000``). Returns (epoch_us, had_zone) or None if not a time."""
    if len(text) == 27 and text[26] == "Z":  # a collector's stamp: most of every corpus
        got = _utc_micro(text)
        if got is not None:
            return got, True
    m = _ISO.match(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s, frac, tz = m.groups()
    us = int((frac or "0")[:6].ljust(6, "0"))
    if tz == "Z":  # UTC: no datetime needed (the checks are datetime's own)
        days = _days_since_epoch(y, mo, d)
        hour, minute, second = int(h), int(mi), int(s)
        if days is None or hour > 23 or minute > 59 or second > 59:
            return None
        return ((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + us, True
    try:
        naive = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), us)
    except ValueError:
        return None
    try:
        if tz is None:
            return local_to_utc_us(naive, zone), False
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        offset = sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        return to_us(naive.replace(tzinfo=dt.timezone(offset))), True
    except ValueError:  # an offset of 24 h or more, or a time outside datetime's range
        return None


def choose_year(month: int, day: int, start_us: int, end_us: int) -> int:
    """The year that puts month/day inside (or nearest to) the corpus window."""
    start = dt.datetime.fromtimestamp(start_us / 1e6, dt.UTC)
    end = dt.datetime.fromtimestamp(end_us / 1e6, dt.UTC)
    best, best_gap = start.year, None
    for year in range(start.year - 1, end.year + 2):
        try:
            t = dt.datetime(year, month, min(day, 28 if month == 2 else day), tzinfo=dt.UTC)
        except ValueError:
            continue
        gap = max((start - t).total_seconds(), (t - end).total_seconds(), 0)
        if best_gap is None or gap < best_gap:
            best, best_gap = year, gap
    return best
