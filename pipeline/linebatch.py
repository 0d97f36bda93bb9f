"""The lines of many files as one column: the unit of vectorized work in a batch.

A batch of files of one source (a few hundred job logs, say) is parsed together: their
lines are concatenated, in file order, into one polars Series, each vectorized pass
(a select regex, a shape check, a column extraction) runs once over all of them, and
every file gets back its own slice. A polars call costs ~0.1-1 ms whatever its size,
so one call per batch instead of one per file is what makes a corpus of a million
small files fast. File ``k`` holds the global rows ``starts[k]:starts[k + 1]``.

Below a few dozen lines in all, Python's ``re`` beats one polars call; parsers keep such
batches on their Python path (their patterns read the same in both engines).

Pure: no IO, no global state; the Series is built on first use only.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

import numpy as np
import polars as pl


@functools.lru_cache(maxsize=128)
def py_regex(pattern: str) -> re.Pattern[str]:
    """Python's compiled form of a pattern (compiled once per process)."""
    return re.compile(pattern)


class LineBatch:
    """The lines of several files, concatenated (see the module docstring)."""

    def __init__(self, files: Sequence[list[str]]) -> None:
        self.files = list(files)
        sizes = np.fromiter((len(f) for f in self.files), dtype=np.int64,
                            count=len(self.files))
        self.starts = np.zeros(len(self.files) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.starts[1:])
        self.total = int(self.starts[-1])
        self._series: pl.Series | None = None

    @property
    def series(self) -> pl.Series:
        """Every line of every file, in order, as one String Series."""
        if self._series is None:
            self._series = pl.Series(
                "line", list(itertools.chain.from_iterable(self.files)), dtype=pl.String)
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
