"""Which IANA zone a corpus's zone-less times are in, from the times that carry one.

Sacct, slurmctld, RFC 3164 syslog, ``dmesg -T``, trainer and BMC logs write local wall
times without a zone. Read in the wrong zone they move by hours against the sources
that do carry one (RFC 3339 kernel lines, collector ``...Z`` stamps), and cascades fall
apart. The same corpus usually says which zone it is in: an RFC 3339 offset is the
host's offset at that instant; a collector's UTC stamp in front of a glog or NCCL
local stamp pairs one instant in both; a job's sacct Start (local) is seconds before
the first collector-stamped line of its job log (UTC).

Each such pairing is an :class:`Observation` (instant, local minus UTC). This module
is pure: it turns observations into a :class:`ZoneFit` naming every zone of the zone
database whose offset matches the evidence, and says whether that choice is
unambiguous over the whole corpus period (daylight-saving changes included). Reading
files for the observations is :mod:`faultline.pipeline.tzevidence`'s job.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, available_timezones

OFFSET_STEP_S = 900  # every UTC offset in use today is a multiple of 15 minutes
TOLERANCE_S = 300  # start-up lag allowed between sacct's Start and a job log's first line
JITTER_S = 60  # disagreement allowed between two clocks stamping the same instant
NOISE_SHARE = 0.02  # share of hour buckets a fitting zone may disagree with (odd jobs)
HOUR_US = 3_600_000_000
PAD_US = 14 * HOUR_US  # the window of zone-less times is itself read in an unknown zone

# What an observation pairs, in the words of the summary line.
KIND_WORDS = {"offset": "RFC 3339 offsets", "line": "lines stamped in UTC and local time",
              "job start": "job starts"}

# When several zones give the same offsets over the corpus period, any of them reads
# the corpus the same way; name the one people use (not a backward-compatible alias
# like US/Pacific, nor a fixed-offset Etc/GMT+8).
PREFERRED = (
    "UTC", "America/Los_Angeles", "America/Denver", "America/Phoenix", "America/Chicago",
    "America/New_York", "America/Halifax", "America/Sao_Paulo", "America/Mexico_City",
    "America/Toronto", "America/Vancouver", "Europe/London", "Europe/Dublin",
    "Europe/Lisbon", "Europe/Paris", "Europe/Berlin", "Europe/Amsterdam", "Europe/Zurich",
    "Europe/Helsinki", "Europe/Athens", "Europe/Moscow", "Europe/Istanbul", "Asia/Dubai",
    "Asia/Kolkata", "Asia/Singapore", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei",
    "Asia/Tokyo", "Asia/Seoul", "Australia/Perth", "Australia/Adelaide",
    "Australia/Brisbane", "Australia/Sydney", "Australia/Melbourne", "Pacific/Auckland",
    "Africa/Johannesburg", "Asia/Jerusalem",
)
_REGIONS = ("Africa/", "America/", "Antarctica/", "Asia/", "Atlantic/", "Australia/",
            "Europe/", "Indian/", "Pacific/")


@dataclass(frozen=True, slots=True)
class Observation:
    """One instant seen in UTC and in the corpus's local time."""

    at_us: int  # the instant, epoch microseconds UTC
    offset_s: float  # local wall clock minus UTC at that instant, as measured
    kind: str  # a key of KIND_WORDS
    # what votes together (a job: its hosts' logs); None: the UTC hour of ``at_us``
    group: str | None = None


@dataclass(frozen=True)
class ZoneFit:
    """What the evidence says about the zone of zone-less times."""

    status: str  # "inferred", "none" (no evidence), "ambiguous", "no fit"
    zone: str | None = None  # the zone to read zone-less times in (status "inferred")
    candidates: tuple[str, ...] = ()  # every zone consistent with all the evidence
    # one zone per distinct reading of the period (status "ambiguous": more than one)
    readings: tuple[str, ...] = ()
    evidence: dict[str, int] = field(default_factory=dict)  # observations used, per kind
    offsets: tuple[int, ...] = ()  # distinct offsets observed (seconds)
    buckets: int = 0  # (kind, UTC hour) buckets the evidence fell into
    mismatched: int = 0  # buckets the best zone disagrees with

    def evidence_words(self) -> str:
        """``412 job starts, 37 RFC 3339 offsets`` (largest first)."""
        parts = sorted(self.evidence.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{n} {KIND_WORDS.get(k, k)}" for k, n in parts if n)

    def offsets_words(self) -> str:
        return ", ".join(format_offset(o) for o in self.offsets)


def format_offset(seconds: int) -> str:
    """``-07:00``, ``+05:45``."""
    sign = "-" if seconds < 0 else "+"
    h, m = divmod(abs(int(seconds)) // 60, 60)
    return f"{sign}{h:02d}:{m:02d}"


def rounded(offset_s: float, kind: str = "offset") -> int | None:
    """The zone offset a measured one stands for (a multiple of 15 minutes), or None.

    Two stamps of one line (``offset``, ``line``) agree to within :data:`JITTER_S`. A
    job log begins after sacct's Start, so a ``job start`` measurement is the offset
    minus a start-up lag of up to :data:`TOLERANCE_S`; a job log that began later than
    that says nothing reliable (and must not pass for the next quarter hour)."""
    if kind == "job start":
        step = math.ceil((offset_s - JITTER_S) / OFFSET_STEP_S) * OFFSET_STEP_S
        ok = step <= offset_s + TOLERANCE_S
    else:
        step = round(offset_s / OFFSET_STEP_S) * OFFSET_STEP_S
        ok = abs(offset_s - step) <= JITTER_S
    return int(step) if ok and abs(step) <= 18 * 3600 else None


def bucketize(obs: Iterable[Observation]) -> list[tuple[int, int]]:
    """(instant, offset) per (kind, group or UTC hour), in time order: the most common
    rounded offset of the bucket and the first instant that showed it. One bucket per
    hour keeps thousands of lines of one file from outvoting the rest, and a day with a
    daylight-saving change keeps both of its offsets; one bucket per job lets the
    hosts of a job outvote one whose clock is off (its stamps fall in other hours)."""
    obs = list(obs)
    return _bucketize(obs, [rounded(o.offset_s, o.kind) for o in obs])


def _bucketize(obs: list[Observation], offs: list[int | None]) -> list[tuple[int, int]]:
    """:func:`bucketize`, given each observation's :func:`rounded` offset."""
    groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for o, off in zip(obs, offs, strict=True):
        if off is not None:
            key = f"g{o.group}" if o.group is not None else f"h{o.at_us // HOUR_US}"
            groups[(o.kind, key)].append((o.at_us, off))
    out = []
    for key in sorted(groups):
        items = groups[key]
        top, _ = Counter(off for _, off in items).most_common(1)[0]
        out.append((min(t for t, off in items if off == top), top))
    return sorted(out)


@functools.lru_cache(maxsize=1)
def all_zones() -> tuple[str, ...]:
    """Every zone of the zone database, sorted (``posixrules``, ``localtime``: not)."""
    return tuple(sorted(z for z in available_timezones()
                        if z not in ("localtime", "posixrules", "Factory")))


@functools.lru_cache(maxsize=4096)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def offset_at(zone: str, at_us: int) -> int:
    """UTC offset of ``zone`` at an instant, in seconds."""
    return _offset(zone, _utc(at_us))


def _utc(at_us: int) -> dt.datetime:
    """The instant as :func:`offset_at` converts it: made once for the hundreds of
    zones tested at it (:func:`_misses`, :func:`readings`)."""
    return dt.datetime.fromtimestamp(at_us / 1e6, dt.UTC)


def _offset(zone: str, when: dt.datetime) -> int:
    """:func:`offset_at` of the instant :func:`_utc` made."""
    off = when.astimezone(_zone(zone)).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def canonical(zones: Iterable[str]) -> str:
    """The name to show among zones that read a corpus alike (see :data:`PREFERRED`)."""
    zs = set(zones)
    for z in PREFERRED:
        if z in zs:
            return z
    regional = sorted(z for z in zs if z.startswith(_REGIONS) and z.count("/") == 1)
    return (regional or sorted(zs))[0]


def readings(zones: Iterable[str], period: tuple[int, int]) -> dict[tuple[int, ...], list[str]]:
    """Zones grouped by the offsets they give every hour over ``period``: zones in one
    group read every zone-less time of the period the same way."""
    lo, hi = period
    steps = [_utc(t) for t in (*range(lo, hi + 1, HOUR_US), hi)]
    groups: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for z in zones:
        groups[tuple(_offset(z, t) for t in steps)].append(z)
    return groups


def infer_zone(obs: Iterable[Observation], window: tuple[int, int] | None = None,
               zones: Iterable[str] | None = None) -> ZoneFit:
    """Every zone consistent with the observations, and whether they agree.

    A zone fits when its offset matches every (kind, hour) bucket but at most
    :data:`NOISE_SHARE` of them; the candidates are the zones that disagree with the
    fewest. They are unambiguous when all give the same offsets over the period (the
    evidence's span and ``window``, the span of the job records, padded by the largest
    offset): then :func:`canonical` names the one to use.
    """
    obs = list(obs)
    offs = [rounded(o.offset_s, o.kind) for o in obs]  # once, for both
    evidence = Counter(o.kind for o, off in zip(obs, offs, strict=True) if off is not None)
    cells = _bucketize(obs, offs)
    if not cells:
        return ZoneFit("none", evidence=dict(evidence))
    offsets = tuple(sorted({off for _, off in cells}))
    names = tuple(zones) if zones is not None else all_zones()
    # Buckets of the same hour and offset test the same thing: test each once.
    weight = Counter((t // HOUR_US, off) for t, off in cells)
    at = {(t // HOUR_US, off): _utc(t) for t, off in cells}
    tried = _shuffled(weight)
    misses = {z: _misses(z, weight, at, int(NOISE_SHARE * len(cells)) + 1, tried)
              for z in names}
    best = min(misses.values())
    base = dict(evidence=dict(evidence), offsets=offsets, buckets=len(cells),
                mismatched=best)
    candidates = tuple(z for z in names if misses[z] == best)
    if best > NOISE_SHARE * len(cells):
        return ZoneFit("no fit", candidates=candidates, **base)
    lo, hi = cells[0][0], cells[-1][0]
    if window is not None:
        lo, hi = min(lo, window[0] - PAD_US), max(hi, window[1] + PAD_US)
    groups = readings(candidates, (lo, hi))
    shown = tuple(sorted((canonical(g) for g in groups.values()), key=lambda z: (
        z not in PREFERRED, z)))
    if len(groups) > 1:
        return ZoneFit("ambiguous", candidates=candidates, readings=shown, **base)
    return ZoneFit("inferred", zone=shown[0], candidates=candidates, readings=shown, **base)


def _shuffled(weight: Counter) -> list[tuple[int, int]]:
    """The buckets in the order :func:`_misses` tries them: shuffled, so a wrong zone
    meets its first disagreement early, even over a long corpus; seeded by their
    number, so every run and every zone tries them alike (shuffled once per corpus,
    not once per zone: 600 shuffles were a third of ``infer_zone``)."""
    keys = sorted(weight)
    random.Random(len(keys)).shuffle(keys)
    return keys


def _misses(zone: str, weight: Counter, at: dict[tuple[int, int], dt.datetime], limit: int,
            keys: list[tuple[int, int]]) -> int:
    """Buckets ``zone`` disagrees with, counting no further than ``limit`` (a zone
    that far off is out whatever the rest says), trying them in the order ``keys``
    (:func:`_shuffled`); ``at``: each bucket's first instant (:func:`_utc`)."""
    n = 0
    for key in keys:
        if _offset(zone, at[key]) != key[1]:
            n += weight[key]
            if n >= limit:
                return limit
    return n


def agreement(obs: Iterable[Observation], zone: str) -> tuple[int, int]:
    """(buckets ``zone`` disagrees with, buckets): how far a zone given with ``--tz`` is
    from the evidence."""
    cells = bucketize(obs)
    return sum(1 for t, off in cells if offset_at(zone, t) != off), len(cells)


class UnknownZone(ValueError):
    """A ``--tz`` that names no zone; the message lists close matches."""


def normalize_zone(name: str) -> str:
    """The zone database's spelling of ``name``: ``utc``/``z`` (any case) are UTC, a
    zone spelt in another case is accepted, anything else raises :class:`UnknownZone`
    naming the closest zones."""
    text = name.strip()
    if text.upper() in ("UTC", "Z", "ZULU", "GMT", "ETC/UTC"):
        return "UTC"
    zones = all_zones()
    if text in zones:
        return text
    folded = {z.casefold(): z for z in zones}
    if text.casefold() in folded:
        return folded[text.casefold()]
    # Compare case-folded, with spaces as the database writes them (New York: New_York).
    key = text.casefold().replace(" ", "_")
    close = difflib.get_close_matches(key, list(folded), n=4, cutoff=0.6)
    close += [k for k in folded if k.endswith("/" + key)]  # "tokyo": Asia/Tokyo
    hints = list(dict.fromkeys(folded[k] for k in close))
    hint = f"; did you mean {', '.join(hints)}?" if hints else \
        " (an IANA name such as America/Los_Angeles, or UTC)"
    raise UnknownZone(f"no time zone {name!r}{hint}")
