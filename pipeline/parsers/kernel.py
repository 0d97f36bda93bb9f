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
polars Series (a large file as its text, split there: its lines become Python strings
only where the parser reads them); one ``str.contains`` of the union of line shapes
finds the rejects and
one of :data:`kernel_messages.SELECT_PATTERN` finds the candidate lines. Python regexes
run on candidates only (and on the few lines an event absorbs). Years and boot anchors
are computed with vectorized polars passes, once per batch, and only when a candidate
needs them. Batches under ``_SMALL_FILE`` lines take the same steps with Python's re
(polars' fixed cost per call dominates there); the tests check that both paths give
identical results.

Where it lives: the shapes and the per-line reading in :mod:`kernel_shapes`, the
vectorized columns of a batch in :mod:`kernel_columns`, and here what puts a file's
lines together (its clock: years and boots; multi-line records; the events).

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

import re
from collections import Counter
from collections.abc import Sequence
from statistics import median
from zoneinfo import ZoneInfo

import numpy as np

from faultline.pipeline.linebatch import FileLines, LineBatch
from faultline.pipeline.parsers import kernel_columns
from faultline.pipeline.parsers import kernel_messages as km
from faultline.pipeline.parsers.kernel_columns import (
    _Columns,
    _Shared,
)
from faultline.pipeline.parsers.kernel_shapes import (
    _ANCHORS_PER_BOOT,
    _DATED,
    _HMS,
    _INHERIT_LOOKBACK,
    _KMSG_CONT,
    _KMSG_DEVICE,
    _NEW_BOOT_DROP_US,
    _NO_MESSAGE,
    _SAMPLE_LINES,
    _TIMED_SHAPES,
    SHAPE_PATTERN,
    KernelLine,
    _match_shape,
    _set_boot_relative,
    _uptime_us,
    parse_line,
)
from faultline.pipeline.pci import normalize_pci
from faultline.pipeline.records import FileParse, ParseContext, ParsedEvent, Reject
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import in_range


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


def parse_many(files: Sequence[tuple[FileLines, ParseContext]]) -> list[FileParse]:
    """Parse many kernel logs, given as their lines or whole texts: each vectorized
    column (shape check, selection, months, boot times) is computed once over the lines
    of all of them (see :mod:`faultline.pipeline.linebatch`); each file's result is what
    :func:`parse` gives for it alone."""
    batch = LineBatch([lines for lines, _ in files])
    shared = _Shared(batch) if batch.total >= kernel_columns._SMALL_FILE else None
    return [parse_lines(lines, ctx, _Columns(lines, shared, k))
            for k, (lines, (_, ctx)) in enumerate(zip(batch.files, files, strict=True))]


def parse_lines(lines: Sequence[str], ctx: ParseContext, cols: _Columns | None = None
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
    lines: Sequence[str], i: int, mm: km.MessageMatch, ctx: ParseContext, zone: ZoneInfo,
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
