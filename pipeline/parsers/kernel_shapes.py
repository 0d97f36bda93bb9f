"""Kernel log lines one at a time: the shapes a line may have, and the per-line parser.

Each shape (``iso``, ``rfc3339``, ``rfc3164``, ``dmesg -T``, ``kmsg``, ``dmesg -H``,
plain ``dmesg``, ...) is a head regex and a tail, in the order the parser tries them;
:data:`SHAPE_PATTERN` is their union, which the vectorized pass of
:mod:`kernel_columns` runs over every line of a file. The patterns use only syntax that
Python's ``re`` and Rust's ``regex`` read alike, so both stages agree on what a valid
line is. :func:`parse_line` reads one line (its time, host, tag and message);
:mod:`kernel` puts the lines of a file together (years, boots, multi-line records).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from faultline.pipeline.records import ParseContext
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
