"""Kernel log lines in columns: what a file's lines give when read all at once.

:class:`_Shared` holds one batch's vectorized passes (polars, over the lines of every
file of the batch at once: shapes, months, uptimes, audit stamps), each computed on
first use; :class:`_Columns` is one file's window of them. Files of fewer than
:data:`_SMALL_FILE` lines take the same steps with Python's ``re``, which beats polars'
per-call overhead there. :mod:`kernel` reads a file's years and boots from these.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import kernel_messages as km
from faultline.pipeline.parsers.kernel_shapes import (
    _AUDIT,
    _REL,
    _RFC3164_MON,
    _SAMPLE_LINES,
    _SHAPE_CHECKS,
    _UPTIME_DIGITS,
    MONTHS,
    SHAPES,
    _frac_us,
    _match_shape,
    _uptime_us,
)

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

    def __init__(self, lines: Sequence[str], shared: _Shared | None = None, k: int = 0) -> None:
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
