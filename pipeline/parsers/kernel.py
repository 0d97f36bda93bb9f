"""Kernel logs (syslog, journal, dmesg, /dev/kmsg) to events: ``parse(text, ctx)``.

Line shapes, decided per line (files may mix them); ``FileParse.shape`` is the most
common one:

=========  ===========================================================================
rfc3339    ``2024-07-01T12:00:00.123456+00:00 node0042 kernel: MSG`` (rsyslog, journalctl
           ``-o short-iso[-precise]``); any program tag; a zone-less time is local.
rfc3164    ``Jul  1 12:00:00 node0042 kernel: [1234567.123456] MSG`` (also journalctl
           ``short``/``short-precise``); no year, see *Years* below.
dmesg_t    ``[Mon Jul  1 12:00:00 2024] MSG`` (``dmesg -T``, local time, host from the path).
iso        ``2024-07-01T12:00:00,123456+00:00 MSG`` (``dmesg --time-format=iso``; with
           ``--decode`` a ``kern  :warn  : `` prefix comes first).
kmsg       ``4,1234,123456789,-;MSG`` (/dev/kmsg; microseconds since boot) followed by
           `` SUBSYSTEM=...``/`` DEVICE=...`` continuation lines that belong to the record.
dmesg      ``[  123.456789] MSG``, optionally ``<6>``-prefixed (``dmesg -r``, pstore) and
           with a ``[ T1946]`` caller id; seconds since boot. ``[  123.456789] host
           kernel: MSG`` (journalctl ``-o short-monotonic``) gives the host and tag too
           (only a ``kernel`` or ``name[pid]`` tag: ``usb 1-1: ...`` stays a message).
reltime    ``[Dec07 10:31] MSG`` then ``[  +0.000123] MSG`` (``dmesg -H``/``--reltime``):
           the wall clock to the minute, then the time since the previous message;
           no year (as rfc3164), ts_quality ``inferred_year``.
=========  ===========================================================================

Syslog lines without a host field (``Jul  1 12:00:00 kernel: MSG``, journalctl
``--no-hostname``, some rsyslog templates) have their tag where the host would be; host
names never end in a colon, so such a line's host comes from the path.

Blank lines, pstore part headers (``Panic#1 Part2``) and journalctl's markers
(``-- Reboot --``, ``-- Boot <id> --``, ``-- Logs begin at ... --``) are routine. A line of no shape
is a reject (``unrecognized kernel line``, or ``nul bytes``), unless its text is a
kernel message that matters: then it is an event whose time is inherited from the
nearest earlier line that has one.

Multi-line records: kmsg continuation lines belong to their record (an event's
``line_end`` covers them; ``DEVICE=+pci:...`` fills a missing device). A rule of
:mod:`kernel_messages` with ``absorb`` also takes the following lines of the same report
(AER header + ``PCIe Bus Error`` + detail lines, an APEI ``{n}[Hardware Error]`` record, an
MCE report, ``GPU at PCI`` + ``Board Serial Number``, ``oom-kill:`` summary + ``Killed
process``, SXid + its ``Severity``/``Data`` lines) when they have the head's shape, host
and program and a time within one second of it.

Speed: the whole file (with :func:`parse_many`, every file of a batch) goes into one
polars Series; one ``str.contains`` of the union of line shapes finds the rejects and
one of :data:`kernel_messages.SELECT_PATTERN` finds the candidate lines. Python regexes
run on candidates only (and on the few lines an event absorbs). Years and boot anchors
are computed with vectorized polars passes, once per batch, and only when a candidate
needs them. Batches under ``_SMALL_FILE`` lines take the same steps with Python's re
(polars' fixed cost per call dominates there); the tests check that both paths give
identical results.

Years (rfc3164): the year of the file's *first* rfc3164 line is ``ctx.year``; without it,
the year of the first line in the same file that carries one (rfc3339, iso, dmesg_t),
and without that the lines are ``untimed``. A month that goes back by six or more
(Dec -> Jan) starts the next year, a month that jumps forward by six or more (a late
Dec line after Jan) goes back one: rollovers never jump back in time. ts_quality is
``inferred_year``.

Boot-relative times (kmsg, dmesg): a file is cut into boots where the time since boot
drops by more than a second. A boot is anchored by lines that carry both a wall clock
and the time since boot: syslog lines with a ``kernel: [secs]`` stamp, and kernel audit
records ``audit(<epoch>.<ms>:<serial>)``; the anchor is the median of
``wall - uptime`` over the first 16 such lines of the boot. Anchored lines get
``boot_relative``; without an anchor they are ``untimed`` (order is kept by line_no) and
carry ``attrs.boot_seq`` (which boot of the file), so that the loader can anchor them
from the rest of the corpus (``pipeline/load.py``: ``anchor_boots``).

Structured logs (journal JSON/export, JSON lines from log stores) are read by this
parser too, through :mod:`structured`.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import kernel_messages as km
from faultline.pipeline.pci import normalize_pci
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import OUT_OF_RANGE, in_range, local_to_utc_us, parse_iso

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

_DEC = r"(?:[a-z0-9]+ *:[a-z]+ *: )?"  # dmesg --decode facility:level prefix
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_WDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_HMS = r"[0-2]\d:[0-5]\d:[0-6]\d"
_ZONE = r"(?:Z|[+-][0-2]\d:?[0-5]\d)"
_DATE = r"\d{4}-[01]\d-[0-3]\d"

# (name, head, tail, check) in the order the per-line parser tries them. A line has a
# shape when it matches head + tail; the vectorized validity check uses head + check,
# which accepts the same lines without scanning to the end of each one (``(?: (.*))?$``
# and ``(?: |$)`` accept the same single lines). The patterns use only syntax that
# Python's re and Rust's regex read alike, so both stages agree on what a valid line is.
_TO_END = r"(?: (?P<msg>.*))?$"
_LOOSE_TO_END = r"(?: ?(?P<msg>.*))?$"
SHAPES: tuple[tuple[str, str, str, str], ...] = (
    ("iso", rf"^(?P<decode>{_DEC})(?P<ts>{_DATE}T{_HMS},\d{{1,9}}{_ZONE}?)", _TO_END, "(?: |$)"),
    ("rfc3339", rf"^(?P<ts>{_DATE}T{_HMS}(?:\.\d{{1,9}})?{_ZONE}?) (?P<host>[^ ]+)",
     r"(?: (?P<rest>.*))?$", "(?: |$)"),
    ("rfc3164",
     rf"^(?P<mon>{_MON}) (?P<day>[ 0-3]?\d) (?P<hms>{_HMS})(?:\.(?P<frac>\d{{1,9}}))? "
     r"(?P<host>[^ ]+)", r"(?: (?P<rest>.*))?$", "(?: |$)"),
    ("dmesg_t",
     rf"^(?P<decode>{_DEC})\[{_WDAY} (?P<mon>{_MON}) +(?P<day>\d{{1,2}}) (?P<hms>{_HMS}) "
     r"(?P<year>\d{4})\]", _LOOSE_TO_END, ""),
    ("kmsg", r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),(?P<flags>[^;]*);", r"(?P<msg>.*)$", ""),
    # dmesg -H / --reltime: the wall clock to the minute when a minute starts, then
    # the time since the previous message
    ("reltime", rf"^\[(?P<mon>{_MON})(?P<day>[ 0-3]\d) (?P<hm>[0-2]\d:[0-5]\d)\]",
     _LOOSE_TO_END, ""),
    ("reltime_delta", r"^\[ *\+(?P<sec>\d+)\.(?P<frac>\d+)\]", _LOOSE_TO_END, ""),
    ("dmesg",
     rf"^(?P<decode>{_DEC})(?:<(?P<prio>\d+)>)?\[ *(?P<sec>\d+)\.(?P<frac>\d+)\]"
     r"(?: \[ *(?P<caller>[CT]\d+)\])?", _LOOSE_TO_END, ""),
    ("kmsg_cont", r"^ [A-Za-z0-9_]+=", r".*$", ""),
    ("blank", r"^[ \t\f\v]*$", "", ""),
    # journalctl's own lines between entries: "-- Reboot --", "-- Boot <id> --",
    # "-- Logs begin at ... --", "-- Journal begins at ... --", "-- No entries --"
    ("journal_marker",
     r"^-- (?:Reboot|No entries|Boot [0-9a-f]{32}|(?:Logs|Journal) begins? at .*) --$", "",
     ""),
    ("pstore_header",
     r"^(?:Panic|Oops|Emergency|Shutdown|Halt|Poweroff|Restart|Unknown)#\d+ Part\d+$", "", ""),
)
_SHAPE_RES = tuple((name, re.compile(head + tail)) for name, head, tail, _ in SHAPES)
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")

#: One vectorized check of every line shape: lines that fail it are rejects.
SHAPE_PATTERN: str = "|".join(
    f"(?:{_NAMED_GROUP.sub('(?:', head + check)})" for _, head, _, check in SHAPES
)

# Each shape's vectorized check (head + check, as in SHAPE_PATTERN), in SHAPES' order.
_SHAPE_CHECKS: tuple[str, ...] = tuple(_NAMED_GROUP.sub("(?:", head + check)
                                       for _, head, _, check in SHAPES)

FILE_SHAPES = ("rfc3339", "rfc3164", "dmesg_t", "iso", "kmsg", "dmesg", "reltime",
               "reltime_delta")
_NO_MESSAGE = frozenset({"kmsg_cont", "blank", "pstore_header", "journal_marker"})
_TIMED_SHAPES = frozenset(FILE_SHAPES)

_TAG = re.compile(r"^(?P<tag>[^\s\[\]:]+)(?:\[(?P<pid>[^\]]*)\])?: ?(?P<msg>.*)$")
_UPTIME = re.compile(r"^\[ *(\d+)\.(\d+)\] ?")
# journalctl -o short-monotonic: "[  123.456789] host kernel: msg" (dmesg's shape, then a
# host and a tag; only "kernel" or "name[pid]" tags, so "usb 1-1: ..." stays a message)
_MONOTONIC_REST = re.compile(r"^(?P<host>[^ \[\]:]+) (?P<tag>kernel|[^\s\[\]:]+\[\d+\]): ?"
                             r"(?P<msg>.*)$")
_KMSG_CONT = re.compile(r"^ [A-Za-z0-9_]+=")
_KMSG_DEVICE = re.compile(r"^ DEVICE=\+pci:(\S+)")

# Vectorized helpers (only run when a candidate needs them).
_RFC3164_MON = (rf"^\[?({_MON})(?: [ 0-3]?\d {_HMS}(?:\.\d+)? [^ ]"
                rf"|[ 0-3]\d [0-2]\d:[0-5]\d\])")  # rfc3164, or a dmesg --reltime minute
_DATED = rf"^{_DEC}{_DATE}T{_HMS}|^{_DEC}\[{_WDAY} {_MON} +\d{{1,2}} {_HMS} \d{{4}}\]"
# ASCII digits ([0-9], not \d) in the groups that are cast to integers: Rust's \d is
# Unicode-aware like Python's, but only Python's int() reads "٣" as 3; polars' cast
# fails on it.
_REL = (
    rf"^{_DEC}(?:<\d+>)?\[ *(?P<ds>[0-9]+)\.(?P<df>[0-9]+)\]"
    r"|^\d+,\d+,(?P<ku>[0-9]+),[^;]*;"
    rf"|^(?:{_MON} [ 0-3]?\d {_HMS}(?:\.\d+)?|{_DATE}T[^ ]+) (?:[^ ]+ )?kernel: "
    r"\[ *(?P<ss>[0-9]+)\.(?P<sf>[0-9]+)\]"
)
_AUDIT = r"audit\((?P<aus>[0-9]{9,11})\.(?P<auf>[0-9]{1,6}):"
_ANCHORS_PER_BOOT = 16
_NEW_BOOT_DROP_US = 1_000_000
_INHERIT_LOOKBACK = 1000
_SAMPLE_LINES = 200
# Digits of the seconds of an uptime stamp: 10 is 317 years. Longer stamps are
# garbage, read as no uptime by every path (they would overflow int64 otherwise).
_UPTIME_DIGITS = 10


@dataclass(slots=True)
class KernelLine:
    """One line read by shape: what :func:`parse_line` returns."""

    shape: str  # one of SHAPES' names
    message: str  # text after the time/host/tag prefix
    host: str | None = None  # from the line (rfc3339, rfc3164), else None
    program: str | None = None  # syslog tag; None for dmesg/kmsg text
    ts: int | None = None  # epoch microseconds UTC, when the line alone (plus year) gives it
    ts_quality: str = "untimed"
    uptime_us: int | None = None  # time since boot, when the line carries it
    error: str | None = None  # "bad timestamp"
    delta_us: int | None = None  # dmesg --reltime: time since the previous message


def _frac_us(frac: str | None) -> int:
    return int((frac or "0")[:6].ljust(6, "0"))


def _split_syslog(rest: str | None) -> tuple[str | None, str, int | None]:
    """program, message, uptime_us from the part after the host."""
    rest = rest or ""
    m = _TAG.match(rest)
    if m is None:
        return "", rest, None
    program, msg = m.group("tag"), m.group("msg")
    uptime = None
    if program == "kernel":
        u = _UPTIME.match(msg)
        if u:
            uptime = int(u.group(1)) * 1_000_000 + _frac_us(u.group(2))
            msg = msg[u.end():]
    return program, msg, uptime


def _host_rest(g: dict) -> tuple[str | None, str | None]:
    """(host, rest) of a syslog line; a line without a host field (``Jul  1 12:00:00
    kernel: msg``, as journalctl writes a single host's lines and some rsyslog templates
    do) has its tag where the host would be: host names never end in a colon."""
    host, rest = g["host"], g["rest"]
    if host.endswith(":"):
        return None, host if rest is None else f"{host} {rest}"
    return host, rest


def _wall(y: int, mon: int, day: int, hms: str, us: int, zone: ZoneInfo) -> int:
    h, mi, s = (int(x) for x in hms.split(":"))
    return local_to_utc_us(dt.datetime(y, mon, day, h, mi, s, us), zone)


def _match_shape(line: str) -> tuple[str, re.Match] | None:
    for name, rx in _SHAPE_RES:
        m = rx.match(line)
        if m is not None:
            return name, m
    return None


def parse_line(
    line: str,
    ctx: ParseContext,
    *,
    year: int | None = None,
    boot_us: int | None = None,
    zone: ZoneInfo | None = None,
) -> KernelLine | None:
    """Read one line's shape, time and message; None if it has no known shape.

    ``year`` is the year of an rfc3164 line (default ``ctx.year``); ``boot_us`` the
    epoch time of boot for kmsg/dmesg lines, when the file gave one.
    """
    found = _match_shape(line)
    if found is None:
        return None
    name, m = found
    zone = zone or ctx.zone
    g = m.groupdict()
    if name in _NO_MESSAGE:
        return KernelLine(name, "")
    if name == "iso" or name == "rfc3339":
        got = parse_iso(g["ts"], zone)
        if name == "iso":
            kl = KernelLine(name, g["msg"] or "")
        else:
            host, rest = _host_rest(g)
            program, msg, uptime = _split_syslog(rest)
            kl = KernelLine(name, msg, host=host, program=program, uptime_us=uptime)
        if got is None:
            kl.error = "bad timestamp"
        elif not in_range(got[0]):
            kl.error = OUT_OF_RANGE
        else:
            kl.ts, kl.ts_quality = got[0], ("exact" if got[1] else "assumed_tz")
        return kl
    if name == "rfc3164" or name == "reltime":
        if name == "rfc3164":
            host, rest = _host_rest(g)
            program, msg, uptime = _split_syslog(rest)
            kl = KernelLine(name, msg, host=host, program=program, uptime_us=uptime)
            hms, frac = g["hms"], g["frac"]
        else:
            kl = KernelLine(name, g["msg"] or "")
            hms, frac = g["hm"] + ":00", None
        y = year if year is not None else ctx.year
        mon, day = MONTHS[g["mon"]], int(g["day"])
        try:
            dt.date(2000, mon, day)  # a leap year: is the day valid in some year?
        except ValueError:
            kl.error = "bad timestamp"
            return kl
        if y is not None:
            try:
                ts = _wall(y, mon, day, hms, _frac_us(frac), zone)
            except ValueError:  # Feb 29 in an inferred non-leap year, second 60
                ts = None
            # an inferred year outside the plausible range is no year at all: the line
            # itself is fine, so it stays untimed rather than rejected
            if ts is not None and in_range(ts):
                kl.ts, kl.ts_quality = ts, "inferred_year"
        return kl
    if name == "dmesg_t":
        kl = KernelLine(name, g["msg"] or "")
        try:
            ts = _wall(int(g["year"]), MONTHS[g["mon"]], int(g["day"]), g["hms"], 0, zone)
        except ValueError:
            kl.error = "bad timestamp"
            return kl
        if in_range(ts):
            kl.ts, kl.ts_quality = ts, "assumed_tz"
        else:
            kl.error = OUT_OF_RANGE
        return kl
    if name == "reltime_delta":
        return KernelLine(name, g["msg"] or "", delta_us=_uptime_us(g["sec"], g["frac"]))
    if name == "kmsg":
        kl = KernelLine(name, g["msg"], uptime_us=_uptime_us(g["usec"], None))
    else:  # dmesg
        kl = KernelLine(name, g["msg"] or "", uptime_us=_uptime_us(g["sec"], g["frac"]))
        mono = _MONOTONIC_REST.match(kl.message)
        if mono is not None:  # journalctl -o short-monotonic
            kl.host, kl.program, kl.message = mono.group("host", "tag", "msg")
            kl.program = kl.program.split("[")[0]
    if kl.uptime_us is None:
        kl.error = OUT_OF_RANGE
    elif boot_us is not None:
        _set_boot_relative(kl, boot_us)
    return kl


def _uptime_us(whole: str, frac: str | None) -> int | None:
    """Time since boot in microseconds: ``whole`` seconds and ``frac`` (dmesg), or
    ``whole`` microseconds (kmsg, ``frac`` None). None for more digits than any uptime
    has (:data:`_UPTIME_DIGITS`): such a stamp is garbage, and reading it would
    overflow the 64-bit columns."""
    if frac is None:
        return int(whole) if len(whole) <= _UPTIME_DIGITS + 6 else None
    return int(whole) * 1_000_000 + _frac_us(frac) if len(whole) <= _UPTIME_DIGITS else None


def _set_boot_relative(kl: KernelLine, boot_us: int) -> None:
    """Wall time from the boot anchor; a result outside the plausible range means the
    anchor came from a broken clock, so the line stays untimed."""
    assert kl.uptime_us is not None
    ts = boot_us + kl.uptime_us
    if in_range(ts):
        kl.ts, kl.ts_quality = ts, "boot_relative"


_SMALL_FILE = 256  # lines; below this Python regexes beat polars' per-call overhead


@functools.lru_cache(maxsize=64)
def _rx(pattern: str) -> re.Pattern:
    return re.compile(pattern)


# Lines from which a file's months get a polars pass of their own (_Shared.months).
_OWN_MONTHS_PASS = 4096


def _months(lines: pl.Series) -> np.ndarray:
    """Month numbers of ``_RFC3164_MON``'s lines (its group: the month name at the
    line's start, after an optional ``[``), 0 on the others.

    A match test and a lookup of the first four characters (:data:`_MONTH_HEADS`), not
    ``str.extract``: a capture group makes polars run the slower engine on every row,
    and a syslog file's rows nearly all match (30 -> 20 ms for 252k rfc3164 lines of
    ``medium``)."""
    hit = lines.str.contains(_RFC3164_MON).to_numpy()
    month = (lines.str.slice(0, 4)
             .replace_strict(_MONTH_HEADS, default=0, return_dtype=pl.Int8).to_numpy())
    return np.where(hit, month, np.int8(0))


# The first four characters of a line ``_RFC3164_MON`` matches, to its month: "[" and
# the month, or the month and what may follow it (a space, or a --reltime day's digit).
_MONTH_HEADS: dict[str, int] = {
    head: n for mon, n in MONTHS.items()
    for head in ("[" + mon, *(mon + c for c in " 0123"))}


class _Shared:
    """Per-line columns of a whole batch of files (a :class:`LineBatch` of at least
    ``_SMALL_FILE`` lines), each computed with polars once, on first use."""

    def __init__(self, batch: LineBatch) -> None:
        self.batch = batch
        self._cache: dict[object, object] = {}

    def _get(self, key: object, compute):
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = compute()
        return got

    def contains(self, pattern: str) -> np.ndarray:
        return self._get(pattern, lambda: self.batch.series.str.contains(pattern).to_numpy())

    def _matching(self, pattern: str) -> tuple[np.ndarray, pl.Series]:
        """The rows ``pattern`` matches and their lines. A match test needs no capture
        positions: one pass of the regex's DFA. An extraction with groups runs a much
        slower engine on every row, so the sparse ones (uptimes, audit stamps) extract
        from these rows only; every other row extracts nothing, which each column's
        default stands for. On 2.67 M real and simulated kernel lines: uptimes 1.01 ->
        0.47 CPU s, audit stamps 0.22 -> 0.14 (months match most lines of a syslog
        file: no gain, left as they were; the select pattern is a match test already)."""
        idx = self.batch.series.str.contains(pattern).arg_true()
        return idx.to_numpy(), self.batch.series.gather(idx)

    def months(self, a: int, b: int) -> np.ndarray:
        """Month numbers of the batch's rows ``a:b`` (one file's), 0 off rfc3164 lines.

        Only the files that need years ask (those with rfc3164 or ``--reltime``
        candidates), and a batch mixes them with files of other shapes: a large file
        gets its own pass over its own rows, the small ones share one pass over the
        whole batch (a polars call's fixed cost). The same pattern on the same rows
        either way. The pass costs ~0.1 CPU us a line; a third of ``medium``'s
        kern.log files are rfc3164, the others' lines are spared it."""
        if b - a < _OWN_MONTHS_PASS:
            return self._get("months", lambda: _months(self.batch.series))[a:b]
        return self._get(("months", a), lambda: _months(self.batch.series.slice(a, b - a)))

    def sample_shapes(self) -> list[Counter]:
        """Per file, the shapes of its first :data:`_SAMPLE_LINES` lines as
        :func:`parse_lines` counts them: each line's first matching shape of
        :data:`SHAPES`, in the order of their first line (``Counter.most_common``
        breaks ties by it). One polars pass per shape over the lines no earlier shape
        took, instead of up to 13 Python matches a line (small x4's 600 kernel logs:
        0.088 -> 0.022 CPU s for their 120k sample lines)."""
        def compute() -> list[Counter]:
            starts = self.batch.starts
            n_files = len(starts) - 1
            size = np.minimum(np.diff(starts), _SAMPLE_LINES)
            file_of = np.repeat(np.arange(n_files, dtype=np.int64), size)
            first = np.repeat(starts[:-1], size)
            rows = first + (np.arange(len(file_of), dtype=np.int64)
                            - np.repeat(np.cumsum(size) - size, size))
            sample = self.batch.series.gather(pl.Series(rows, dtype=pl.UInt32))
            shape = np.full(len(rows), -1, dtype=np.int64)
            left = np.arange(len(rows), dtype=np.int64)
            for s, check in enumerate(_SHAPE_CHECKS):
                if not len(left):
                    break
                hit = sample.gather(pl.Series(left, dtype=pl.UInt32)).str.contains(
                    check).to_numpy()
                shape[left[hit]] = s
                left = left[~hit]
            got = np.flatnonzero(shape >= 0)  # rows in order: a pair's first is its first
            pair = file_of[got] * len(SHAPES) + shape[got]
            pairs, at, counts = np.unique(pair, return_index=True, return_counts=True)
            out: list[Counter] = [Counter() for _ in range(n_files)]
            for j in np.argsort(at, kind="stable").tolist():
                k, s = divmod(int(pairs[j]), len(SHAPES))
                out[k][SHAPES[s][0]] = int(counts[j])
            return out
        return self._get("sample_shapes", compute)

    def uptimes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            idx, lines = self._matching(_REL)
            g = lines.str.extract_groups(_REL).struct.unnest()

            def seconds(whole: str, frac: str) -> pl.Expr:
                # too many digits: no uptime (as _uptime_us); slice so the cast of the
                # rows the condition drops cannot overflow either
                us = pl.col(frac).str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64)
                digits = pl.col(whole).str.len_chars() <= _UPTIME_DIGITS
                return pl.when(digits).then(
                    pl.col(whole).str.slice(0, _UPTIME_DIGITS).cast(pl.Int64) * 1_000_000
                    + us)

            usec_ok = pl.col("ku").str.len_chars() <= _UPTIME_DIGITS + 6
            kmsg = pl.when(usec_ok).then(
                pl.col("ku").str.slice(0, _UPTIME_DIGITS + 6).cast(pl.Int64))
            ds, ku, ss = seconds("ds", "df"), kmsg, seconds("ss", "sf")
            cols = g.select(
                rel=pl.coalesce(ds, ku, ss).fill_null(-1),
                boot=ds.is_not_null() | ku.is_not_null(),
                syslog=ss.is_not_null(),
            )
            n = len(self.batch.series)  # a row _REL does not match: no uptime
            rel, boot, syslog = (np.full(n, -1, np.int64), np.zeros(n, bool),
                                 np.zeros(n, bool))
            rel[idx] = cols["rel"].to_numpy()
            boot[idx] = cols["boot"].to_numpy()
            syslog[idx] = cols["syslog"].to_numpy()
            return rel, boot, syslog
        return self._get("uptimes", compute)

    def audit_walls(self) -> np.ndarray:
        def compute() -> np.ndarray:
            idx, lines = self._matching(_AUDIT)
            g = lines.str.extract_groups(_AUDIT).struct.unnest()
            frac = pl.col("auf").str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64)
            out = np.full(len(self.batch.series), -1, np.int64)  # no audit stamp: -1
            out[idx] = g.select(
                (pl.col("aus").cast(pl.Int64) * 1_000_000 + frac).fill_null(-1)
            ).to_series().to_numpy()
            return out
        return self._get("audit", compute)


class _Columns:
    """Per-line columns of one file as numpy arrays.

    Large files, and files parsed in a large batch, get theirs from a :class:`_Shared`
    (one vectorized polars pass per column over the whole batch); small files compute
    them with the same patterns through Python's re, which is faster below a few hundred
    lines. Both paths give the same arrays; the logic on them is shared.
    """

    def __init__(self, lines: list[str], shared: _Shared | None = None, k: int = 0) -> None:
        self.lines = lines
        if shared is None and len(lines) >= _SMALL_FILE:
            shared = _Shared(LineBatch([lines]))
        self.shared = shared
        if shared is not None:
            self._a, self._b = int(shared.batch.starts[k]), int(shared.batch.starts[k + 1])
            self._k = k

    def contains(self, pattern: str) -> np.ndarray:
        if self.shared is not None:
            return self.shared.contains(pattern)[self._a:self._b]
        rx = _rx(pattern)
        return np.fromiter((rx.search(x) is not None for x in self.lines), bool, len(self.lines))

    def selected(self, rules: km.RuleSet = km.DEFAULT) -> np.ndarray:
        """Lines matching the rule set's select pattern (small files: needles first)."""
        if self.shared is not None:
            return self.contains(rules.select_pattern)
        rx, needles = _rx(rules.select_pattern), rules.needles
        return np.fromiter(
            (any(nd in x for nd in needles) and rx.search(x) is not None for x in self.lines),
            bool,
            len(self.lines),
        )

    def first(self, pattern: str) -> int | None:
        if self.shared is not None:
            hits = np.flatnonzero(self.contains(pattern))
            return int(hits[0]) if len(hits) else None
        rx = _rx(pattern)
        return next((i for i, x in enumerate(self.lines) if rx.search(x)), None)

    def months(self) -> np.ndarray:
        """Month number of rfc3164-shaped lines, 0 elsewhere."""
        if self.shared is not None:
            return self.shared.months(self._a, self._b)
        rx = _rx(_RFC3164_MON)
        out = np.zeros(len(self.lines), dtype=np.int8)
        for i, x in enumerate(self.lines):
            m = rx.search(x)
            if m:
                out[i] = MONTHS[m.group(1)]
        return out

    def sample_shapes(self) -> Counter:
        """The shapes of the file's first :data:`_SAMPLE_LINES` lines, counted in the
        order of their first line."""
        if self.shared is not None:
            return Counter(self.shared.sample_shapes()[self._k])  # counted on: a copy
        shapes: Counter = Counter()
        for line in self.lines[:_SAMPLE_LINES]:
            found = _match_shape(line)
            if found is not None:
                shapes[found[0]] += 1
        return shapes

    def uptimes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(uptime_us or -1, line is kmsg/dmesg text, line is a syslog ``kernel: [secs]``)."""
        if self.shared is not None:
            a, b = self._a, self._b
            rel, boot, syslog = self.shared.uptimes()
            return rel[a:b], boot[a:b], syslog[a:b]
        n = len(self.lines)
        rel = np.full(n, -1, dtype=np.int64)
        boot = np.zeros(n, dtype=bool)
        syslog = np.zeros(n, dtype=bool)
        rx = _rx(_REL)
        for i, x in enumerate(self.lines):
            m = rx.search(x)
            if m is None:
                continue
            ds, df, ku, ss, sf = m.group("ds", "df", "ku", "ss", "sf")
            if ds is not None:
                up, flags = _uptime_us(ds, df), boot
            elif ku is not None:
                up, flags = _uptime_us(ku, None), boot
            else:
                up, flags = _uptime_us(ss, sf), syslog
            if up is not None:
                rel[i], flags[i] = up, True
        return rel, boot, syslog

    def audit_walls(self) -> np.ndarray:
        """Epoch microseconds of a kernel audit record's ``audit(<epoch>.<ms>:``, or -1."""
        if self.shared is not None:
            return self.shared.audit_walls()[self._a:self._b]
        out = np.full(len(self.lines), -1, dtype=np.int64)
        rx = _rx(_AUDIT)
        for i, x in enumerate(self.lines):
            if "audit(" in x:
                m = rx.search(x)
                if m:
                    out[i] = int(m.group("aus")) * 1_000_000 + _frac_us(m.group("auf"))
        return out


class _Clock:
    """Years and boot anchors of one file, computed lazily from :class:`_Columns`."""

    def __init__(self, cols: _Columns, ctx: ParseContext) -> None:
        self.cols = cols
        self.lines = cols.lines
        self.ctx = ctx
        self.zone = ctx.zone
        self._years: tuple[np.ndarray, np.ndarray, int | None] | None = None
        self._boots: tuple[np.ndarray, dict[int, int]] | None = None

    # -- rfc3164 years ------------------------------------------------------------------
    def year_for(self, i: int) -> int | None:
        if self._years is None:
            self._years = self._compute_years()
        idx, off, base = self._years
        if base is None:
            return None
        pos = int(np.searchsorted(idx, i, side="right")) - 1
        return base + (int(off[pos]) if pos >= 0 else 0)

    def _compute_years(self) -> tuple[np.ndarray, np.ndarray, int | None]:
        mon = self.cols.months()
        idx = np.flatnonzero(mon)
        nums = mon[idx].astype(np.int32)
        d = np.diff(nums, prepend=nums[:1])
        off = np.cumsum((d <= -6).astype(np.int32) - (d >= 6).astype(np.int32))
        base = self.ctx.year
        if base is None:
            j = self.cols.first(_DATED)
            shown = _line_year(self.lines[j]) if j is not None else None
            if shown is not None:
                pos = int(np.searchsorted(idx, j, side="right")) - 1
                base = shown - (int(off[pos]) if pos >= 0 else 0)
        return idx, off, base

    # -- boot anchors ----------------------------------------------------------------------
    def segment(self, i: int) -> int:
        """Which boot of the file line ``i`` belongs to (0 for the first)."""
        if self._boots is None:
            self._boots = self._compute_boots()
        return int(self._boots[0][i])

    def boot_for(self, i: int) -> int | None:
        if self._boots is None:
            self._boots = self._compute_boots()
        seg, anchors = self._boots
        return anchors.get(int(seg[i]))

    def _compute_boots(self) -> tuple[np.ndarray, dict[int, int]]:
        rel, boot_text, syslog = self.cols.uptimes()
        n = len(rel)
        has = rel >= 0
        last = np.maximum.accumulate(np.where(has, np.arange(n), -1))
        ff = np.where(last >= 0, rel[np.maximum(last, 0)], -1)
        prev = np.concatenate(([-1], ff[:-1]))
        new_boot = (ff >= 0) & (prev >= 0) & (ff < prev - _NEW_BOOT_DROP_US)
        seg = np.cumsum(new_boot)
        audit = self.cols.audit_walls() if boot_text.any() else np.full(n, -1, np.int64)
        anchor_idx = np.flatnonzero(syslog | ((audit >= 0) & boot_text))
        if len(anchor_idx) == 0:
            return seg, {}
        segs = seg[anchor_idx]
        uniq, first = np.unique(segs, return_index=True)
        rank = np.arange(len(segs)) - first[np.searchsorted(uniq, segs)]
        per_seg: dict[int, list[int]] = {}
        for j in anchor_idx[rank < _ANCHORS_PER_BOOT].tolist():
            if syslog[j]:
                kl = self._parse_dated(j)
                if kl is None or kl.ts is None:
                    continue
                wall = kl.ts
            else:
                wall = int(audit[j])
            per_seg.setdefault(int(seg[j]), []).append(wall - int(rel[j]))
        return seg, {k: int(median(v)) for k, v in per_seg.items()}

    # -- one line's time ---------------------------------------------------------------------
    def _parse_dated(self, i: int) -> KernelLine | None:
        """``parse_line`` of line ``i`` with its rfc3164 year (:meth:`year_for`).

        Only the shapes without a year of their own read it, so the years (a polars
        pass, :meth:`_Shared.months`) are computed for those alone, not for an RFC 3339
        file's ``kernel: [secs]`` boot anchors."""
        text = self.lines[i]
        kl = parse_line(text, self.ctx, zone=self.zone, year=self.ctx.year)
        if kl is not None and kl.shape in ("rfc3164", "reltime") and kl.error is None:
            y = self.year_for(i)
            if y != self.ctx.year:
                kl = parse_line(text, self.ctx, zone=self.zone, year=y)
        return kl

    def line(self, i: int) -> KernelLine | None:
        """parse_line with this file's year and boot anchor."""
        kl = self._parse_dated(i)
        if kl is None:
            return None
        if kl.shape == "reltime_delta" and kl.delta_us is not None:
            base = self._reltime_base(i)
            if base is not None and in_range(base + kl.delta_us):
                kl.ts, kl.ts_quality = base + kl.delta_us, "inferred_year"
        elif kl.shape in ("kmsg", "dmesg"):
            boot = self.boot_for(i)
            if boot is not None and kl.error is None:
                _set_boot_relative(kl, boot)
        return kl

    def _reltime_base(self, i: int) -> int | None:
        """The time of the message before line ``i`` of a ``dmesg --reltime`` file: the
        nearest earlier minute line plus the deltas in between (None without one)."""
        total = 0
        for j in range(i - 1, max(-1, i - 1 - _INHERIT_LOOKBACK), -1):
            found = _match_shape(self.lines[j])
            if found is None:
                continue
            if found[0] == "reltime_delta":
                d = _uptime_us(found[1].group("sec"), found[1].group("frac"))
                total += d or 0
            elif found[0] == "reltime":
                kl = self.line(j)
                return None if kl is None or kl.ts is None else kl.ts + total
            elif found[0] not in _NO_MESSAGE:
                return None
        return None

    def inherited(self, i: int) -> tuple[int | None, str]:
        """Time of the nearest earlier line that has a time shape."""
        for j in range(i - 1, max(-1, i - 1 - _INHERIT_LOOKBACK), -1):
            if not _could_be_timed(self.lines[j]):
                continue
            kl = self.line(j)
            if kl is None or kl.shape not in _TIMED_SHAPES or kl.error:
                continue
            return (kl.ts, "inherited") if kl.ts is not None else (None, "untimed")
        return None, "untimed"


def _could_be_timed(line: str) -> bool:
    return bool(line) and not line[0].isspace()


_SHOWN_YEAR = re.compile(r"(\d{4})-[01]\d-[0-3]\dT|" + _HMS + r" (\d{4})\]")


def _line_year(line: str) -> int | None:
    """The calendar year a dated line shows (its local year, not its UTC year)."""
    m = _SHOWN_YEAR.search(line)
    return int(m.group(1) or m.group(2)) if m else None


def _reject_reason(line: str) -> str:
    return "nul bytes" if "\x00" in line else "unrecognized kernel line"


def _dominant_shape(counts: Counter) -> str | None:
    merged: Counter = Counter()
    for k, n in counts.items():  # a --reltime file is its minute lines and their deltas
        merged["reltime" if k == "reltime_delta" else k] += n
    for shape, _n in merged.most_common():
        if shape in _TIMED_SHAPES:
            return shape
    return None


def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse a kernel log file (any mix of the shapes above) into events and rejects."""
    return parse_many([(split_lines(text), ctx)])[0]


def parse_many(files: Sequence[tuple[list[str], ParseContext]]) -> list[FileParse]:
    """Parse many kernel logs, given as their lines: each vectorized column (shape
    check, selection, months, boot times) is computed once over the lines of all of
    them (see :mod:`faultline.pipeline.linebatch`); each file's result is what
    :func:`parse` gives for it alone."""
    batch = LineBatch([lines for lines, _ in files])
    shared = _Shared(batch) if batch.total >= _SMALL_FILE else None
    return [parse_lines(lines, ctx, _Columns(lines, shared, k))
            for k, (lines, ctx) in enumerate(files)]


def parse_lines(lines: list[str], ctx: ParseContext, cols: _Columns | None = None
                ) -> FileParse:
    """Parse one kernel log's lines (``cols``: its columns, when parsed in a batch)."""
    n = len(lines)
    if n == 0:
        return FileParse(0)
    if cols is None:
        cols = _Columns(lines)
    rules = km.ruleset(ctx.rules)  # built-in, or a site's rules first: compiled once
    valid = cols.contains(SHAPE_PATTERN)
    selected = cols.selected(rules)
    reject_idx = np.flatnonzero(~valid & ~selected).tolist()
    orphans = set(np.flatnonzero(~valid & selected).tolist())
    candidates = np.flatnonzero(selected).tolist()

    clock = _Clock(cols, ctx)
    shapes = cols.sample_shapes()

    events: list[ParsedEvent] = []
    rejects: list[Reject] = [Reject.of(i + 1, _reject_reason(lines[i]), lines[i])
                             for i in reject_idx]
    consumed = -1
    for i in candidates:
        if i <= consumed:
            continue
        line = lines[i]
        if i in orphans:
            msg = line.replace("\x00", "").strip()
            mm = rules.classify(msg, None)
            if mm is None:
                rejects.append(Reject.of(i + 1, _reject_reason(line), line))
                continue
            ts, quality = clock.inherited(i)
            events.append(_event(i, i, mm, [msg], ts, quality, ctx.host, ctx, None))
            consumed = i
            continue
        kl = parse_line(line, ctx, zone=clock.zone)
        if kl is None:  # the two regex engines disagreed; count it, never lose it
            rejects.append(Reject.of(i + 1, _reject_reason(line), line))
            continue
        if i >= _SAMPLE_LINES:
            shapes[kl.shape] += 1
        mm = rules.classify(kl.message, kl.program)
        if mm is None:
            continue
        kl = clock.line(i)
        if kl.error:
            rejects.append(Reject.of(i + 1, kl.error, line))
            continue
        end, messages = _absorb(lines, i, mm, ctx, clock.zone, rules)
        events.append(
            _event(i, end, mm, messages, kl.ts, kl.ts_quality, kl.host or ctx.host, ctx, kl)
        )
        if kl.ts is None and kl.uptime_us is not None and kl.shape in ("kmsg", "dmesg"):
            # no anchor in the file: the loader may anchor this boot from the corpus
            # (pipeline/load.py: anchor_boots); boot_seq says which boot of the file
            events[-1].attrs["boot_seq"] = clock.segment(i)
        consumed = end

    if events and rejects:
        covered = {ln for e in events for ln in range(e.line_no, e.line_end + 1)}
        rejects = [r for r in rejects if r.line_no not in covered]
    rejects.sort(key=lambda r: r.line_no)
    return FileParse(n, events=events, rejects=rejects, shape=_dominant_shape(shapes))


def _stamp(kl: KernelLine) -> int | None:
    return kl.uptime_us if kl.uptime_us is not None else kl.ts


def _absorb(
    lines: list[str], i: int, mm: km.MessageMatch, ctx: ParseContext, zone: ZoneInfo,
    rules: km.RuleSet,
) -> tuple[int, list[str]]:
    """Extend an event over the lines that belong to it; returns (last index, messages).

    kmsg continuation lines always belong to their record. Other lines join only if the
    rule's ``absorb`` accepts them, they have the head's shape, host and program, and
    their time is within a second of the head's (the kernel prints one report at once).
    """
    rule = rules.by_id[mm.rule_id]
    head = parse_line(lines[i], ctx, zone=zone)
    assert head is not None
    head_stamp = _stamp(head)
    messages = [head.message]
    end = i
    absorbed = 0
    j = i + 1
    n = len(lines)
    while j < n:
        nxt = lines[j]
        if head.shape == "kmsg" and _KMSG_CONT.match(nxt):
            dev = _KMSG_DEVICE.match(nxt)
            if dev and mm.device is None:
                mm.device = normalize_pci(dev.group(1))
            end = j
            j += 1
            continue
        if absorbed >= rule.max_absorb:
            break
        kl = parse_line(nxt, ctx, zone=zone)
        if (
            kl is None
            or kl.shape != head.shape
            or kl.host != head.host
            or kl.program != head.program
        ):
            break
        stamp = _stamp(kl)
        if head_stamp is not None and stamp is not None and abs(stamp - head_stamp) > 1_000_000:
            break
        if not rules.absorbs(mm, kl.message):
            break
        messages.append(kl.message)
        absorbed += 1
        end = j
        j += 1
    return end, messages


def _event(
    i: int,
    end: int,
    mm: km.MessageMatch,
    messages: list[str],
    ts: int | None,
    quality: str,
    host: str | None,
    ctx: ParseContext,
    kl: KernelLine | None,
) -> ParsedEvent:
    attrs = {"rule": mm.rule_id, **mm.attrs}
    if kl is not None:
        if kl.uptime_us is not None:
            attrs["uptime_us"] = kl.uptime_us
        if kl.program not in (None, "kernel"):
            attrs["program"] = kl.program
    return ParsedEvent(
        line_no=i + 1,
        line_end=end + 1,
        kind=mm.kind,
        message="\n".join(messages),
        ts=ts,
        ts_quality=quality if ts is not None else "untimed",
        host=host,
        xid=mm.xid,
        device=mm.device,
        job_id=ctx.job_id,
        attrs=attrs,
    )
