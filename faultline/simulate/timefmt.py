"""Time as each log source writes it, vectorized where the volume is.

Routine kernel lines are the bulk of a corpus, so their time prefixes are built from
numpy arrays (``np.datetime_as_string``) rather than one ``datetime`` per line. The
wall-clock offset of a zone is taken per line from its UTC offset at that instant, so a
daylight-saving change inside a file is written the way the host's clock showed it.
"""

from __future__ import annotations

import datetime as dt
import time
from functools import lru_cache
from zoneinfo import ZoneInfo

import numpy as np

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
          "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def offsets(ts: np.ndarray, zone: ZoneInfo) -> np.ndarray:
    """UTC offset in seconds at each epoch second of ``ts`` (float seconds)."""
    if zone.key == "UTC":
        return np.zeros(len(ts), dtype=np.int64)
    lo, hi = float(ts.min()), float(ts.max())
    off_lo = _off(lo, zone)
    if off_lo == _off(hi, zone) and _no_transition(lo, hi, zone):
        return np.full(len(ts), off_lo, dtype=np.int64)
    return np.array([_off(t, zone) for t in ts], dtype=np.int64)


def _off(t: float, zone: ZoneInfo) -> int:
    return int(dt.datetime.fromtimestamp(t, zone).utcoffset().total_seconds())


def _no_transition(lo: float, hi: float, zone: ZoneInfo) -> bool:
    # Offsets change at most twice a year: sampling every 6 hours finds any change.
    t = lo
    first = _off(lo, zone)
    while t < hi:
        if _off(t, zone) != first:
            return False
        t += 6 * 3600
    return True


def iso_local(ts: np.ndarray, zone: ZoneInfo) -> tuple[np.ndarray, np.ndarray]:
    """(``YYYY-MM-DDTHH:MM:SS.ffffff`` local wall strings, offsets in seconds)."""
    off = offsets(ts, zone)
    us = np.round((ts + off) * 1e6).astype("int64").astype("datetime64[us]")
    return np.datetime_as_string(us, unit="us"), off


def offset_str(off: int, colon: bool = True) -> str:
    sign = "-" if off < 0 else "+"
    h, m = divmod(abs(off) // 60, 60)
    return f"{sign}{h:02d}{':' if colon else ''}{m:02d}"


def rfc3339(ts: np.ndarray, zone: ZoneInfo) -> list[str]:
    """``2024-07-01T12:00:00.123456+00:00`` (journalctl short-iso-precise, rsyslog)."""
    wall, off = iso_local(ts, zone)
    return [f"{w}{offset_str(int(o))}" for w, o in zip(wall, off, strict=True)]


def rfc3164(ts: np.ndarray, zone: ZoneInfo) -> list[str]:
    """``Jul  1 12:00:00`` (traditional syslog: no year, no zone)."""
    wall, _ = iso_local(ts, zone)
    return [f"{MONTHS[int(w[5:7]) - 1]} {int(w[8:10]):>2} {w[11:19]}" for w in wall]


def dmesg_t(ts: np.ndarray, zone: ZoneInfo) -> list[str]:
    """``[Mon Jul  1 12:00:00 2024]`` (dmesg -T)."""
    wall, off = iso_local(ts, zone)
    days = ((ts + off) // 86400).astype(np.int64)
    wd = (days + 3) % 7  # 1970-01-01 was a Thursday
    return [f"[{DAYS[int(d)]} {MONTHS[int(w[5:7]) - 1]} {int(w[8:10]):>2} {w[11:19]} "
            f"{w[:4]}]" for w, d in zip(wall, wd, strict=True)]


def one(t: float, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, zone)


def slurm(t: float, zone: ZoneInfo) -> str:
    """sacct / slurmctld: ``2024-07-01T12:00:00`` local, no zone."""
    return one(t, zone).strftime("%Y-%m-%dT%H:%M:%S")


def slurmctld(t: float, zone: ZoneInfo) -> str:
    d = one(t, zone)
    return f"[{d.strftime('%Y-%m-%dT%H:%M:%S')}.{d.microsecond // 1000:03d}]"


@lru_cache(maxsize=1 << 16)
def _utc_second(s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s))


@lru_cache(maxsize=1 << 16)
def _local_second(s: int, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(s, zone)


def _split(t: float) -> tuple[int, int]:
    s = int(t)
    return s, min(round((t - s) * 1e6), 999_999)


def collector(t: float) -> str:
    """Job-log collector stamp: ``2024-07-01T12:00:00.123456Z`` (UTC)."""
    s, us = _split(t)
    return f"{_utc_second(s)}.{us:06d}Z"


def trainer(t: float, zone: ZoneInfo) -> str:
    """Python logging: ``2024-07-01 11:58:00,004`` local."""
    s, us = _split(t)
    return f"{_local_second(s, zone):%Y-%m-%d %H:%M:%S},{us // 1000:03d}"


def glog(t: float, zone: ZoneInfo) -> str:
    """c10d glog prefix time: ``0701 12:10:00.523400000`` (MMDD, no year)."""
    s, us = _split(t)
    return f"{_local_second(s, zone):%m%d %H:%M:%S}.{us:06d}000"


def sel(t: float, zone: ZoneInfo) -> tuple[str, str]:
    d = one(t, zone)
    return d.strftime("%m/%d/%Y"), d.strftime("%H:%M:%S")
