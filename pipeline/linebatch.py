"""The lines of many files as one column: the unit of vectorized work in a batch.

A batch of files of one source (a few hundred job logs, say) is parsed together: their
lines are concatenated, in file order, into one polars Series, each vectorized pass
(a select regex, a shape check, a column extraction) runs once over all of them, and
every file gets back its own slice. A polars call costs ~0.1-1 ms whatever its size,
so one call per batch instead of one per file is what makes a corpus of a million
small files fast. File ``k`` holds the global rows ``starts[k]:starts[k + 1]``.

Below a few dozen lines in all, Python's ``re`` beats one polars call; parsers keep such
batches on their Python path (their patterns read the same in both engines).

A file may come as its whole text instead of its lines (:data:`FileLines`): polars
splits the texts into the Series, and the file's lines are read back from it only where
a parser looks (:class:`SeriesLines`). Splitting a large kernel log into a Python list
of every line, then copying that list into a Series, cost ~0.30 CPU us a line in a
batch of llama3's kern.log files; the split in polars costs ~0.16, and a parser reads
back only its candidate lines and the few around them.

Pure: no IO, no global state; the Series of lines given as lists is built on first use.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl


@functools.lru_cache(maxsize=128)
def py_regex(pattern: str) -> re.Pattern[str]:
    """Python's compiled form of a pattern (compiled once per process)."""
    return re.compile(pattern)


# A file's lines, or its whole text (split by :class:`LineBatch` the way
# :func:`faultline.pipeline.text.split_lines` splits it).
FileLines = list[str] | str


class SeriesLines(Sequence[str]):
    """One file's lines inside a batch's Series, as a read-only sequence of str.

    Lines become Python strings a block at a time, on first access: a parser that
    reads a few hundred candidate lines of a 100k-line file converts those blocks
    only. Iterating converts the whole file once."""

    __slots__ = ("_blocks", "_n", "_series", "_start")

    BLOCK = 64

    def __init__(self, series: pl.Series, start: int, n: int) -> None:
        self._series, self._start, self._n = series, start, n
        self._blocks: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # int -> str; slice -> list[str]
        if isinstance(i, slice):
            a, b, step = i.indices(self._n)
            if step == 1:
                return self._series.slice(self._start + a, max(b - a, 0)).to_list()
            return [self[j] for j in range(a, b, step)]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("line index out of range")
        b, r = divmod(i, self.BLOCK)
        block = self._blocks.get(b)
        if block is None:
            a = b * self.BLOCK
            block = self._blocks[b] = self._series.slice(
                self._start + a, min(self.BLOCK, self._n - a)).to_list()
        return block[r]

    def __iter__(self) -> Iterator[str]:
        return iter(self[:])


def _split(texts: list[str]) -> tuple[pl.Series, np.ndarray]:
    """The lines of ``texts`` (non-empty) as one Series, and each text's line count.

    A text's final newline ends its last line: the empty piece after it is dropped
    from the exploded Series (a filter copies 16-byte views; stripping the newline off
    every text first copied all of their bytes once more: 225 -> 157 ns a line)."""
    parts = pl.Series(texts, dtype=pl.String).str.split("\n")
    sizes = parts.list.len().to_numpy().astype(np.int64)
    lines = parts.explode()
    ends = np.fromiter((t.endswith("\n") for t in texts), dtype=bool, count=len(texts))
    if ends.any():
        keep = np.ones(len(lines), dtype=bool)
        keep[np.cumsum(sizes)[ends] - 1] = False
        lines = lines.filter(keep)
        sizes -= ends
    if any("\r" in t for t in texts):  # a \r\n ending is one line end
        lines = lines.str.strip_suffix("\r")
    return lines, sizes


def _joined(files: Sequence[Sequence[str]]) -> pl.Series:
    """The lines of files given as lines, concatenated into one String Series."""
    return pl.Series("line", list(itertools.chain.from_iterable(files)), dtype=pl.String)


def _series_of(items: list[FileLines]) -> tuple[pl.Series, np.ndarray]:
    """The lines of ``items`` as one Series, in file order (each run of texts split in
    one polars call, each run of line lists copied in one), and each item's line count."""
    sizes = np.zeros(len(items), dtype=np.int64)
    parts: list[pl.Series] = []
    k = 0
    for is_text, group in itertools.groupby(items, key=lambda f: isinstance(f, str)):
        run = list(group)
        if is_text:
            full = [j for j, t in enumerate(run) if t]  # an empty text has no lines
            if full:
                lines, got = _split([run[j] for j in full])
                sizes[np.asarray(full, dtype=np.int64) + k] = got
                parts.append(lines)
        else:
            sizes[k:k + len(run)] = [len(f) for f in run]
            parts.append(_joined(run))
        k += len(run)
    series = pl.concat(parts) if parts else pl.Series([], dtype=pl.String)
    return series.alias("line"), sizes


class LineBatch:
    """The lines of several files, concatenated (see the module docstring)."""

    def __init__(self, files: Sequence[FileLines]) -> None:
        items = list(files)
        self._series: pl.Series | None = None
        if any(isinstance(f, str) for f in items):
            self._series, sizes = _series_of(items)
        else:
            sizes = np.fromiter((len(f) for f in items), dtype=np.int64, count=len(items))
        self.starts = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.starts[1:])
        self.total = int(self.starts[-1])
        self.files: list[Sequence[str]] = items if self._series is None else [
            f if isinstance(f, list) else SeriesLines(self._series, a, n)
            for f, a, n in zip(items, self.starts[:-1].tolist(), sizes.tolist(), strict=True)]

    @property
    def series(self) -> pl.Series:
        """Every line of every file, in order, as one String Series."""
        if self._series is None:
            self._series = _joined(self.files)
        return self._series

    def file_ids(self) -> np.ndarray:
        """For every global row, the index of its file."""
        return np.repeat(np.arange(len(self.files), dtype=np.int32), np.diff(self.starts))

    def split_indices(self, idx: np.ndarray) -> list[list[int]]:
        """Sorted global row numbers -> each file's local (0-based) row numbers."""
        idx = np.asarray(idx, dtype=np.int64)
        cuts = np.searchsorted(idx, self.starts)
        return [(idx[cuts[k]:cuts[k + 1]] - self.starts[k]).tolist()
                for k in range(len(self.files))]

    def contains(self, pattern: str, python_below: int = 0) -> np.ndarray:
        """Bool per global row: the line contains a match of ``pattern``. Batches of
        fewer than ``python_below`` lines use Python's ``re``."""
        if self.total < python_below:
            search = py_regex(pattern).search
            return np.fromiter(
                (search(ln) is not None for f in self.files for ln in f),
                dtype=bool, count=self.total)
        if self.total == 0:
            return np.zeros(0, dtype=bool)
        return self.series.str.contains(pattern).to_numpy()

    def match_indices(self, pattern: str, python_below: int = 0) -> list[list[int]]:
        """Each file's local row numbers of the lines containing a match of ``pattern``."""
        if self.total < python_below:
            search = py_regex(pattern).search
            return [[i for i, ln in enumerate(f) if search(ln)] for f in self.files]
        if self.total == 0:
            return [[] for _ in self.files]
        hits = self.series.str.contains(pattern).arg_true().to_numpy()
        return self.split_indices(hits)
