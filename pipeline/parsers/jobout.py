"""Slurm job output as it really is (``slurm-<jobid>.out``): one file for every rank.

A batch script's output holds the lines of all its tasks, usually with no collector
stamp, each task's lines prefixed by ``srun --label`` (``-l``: ``<task>: ``, see
https://slurm.schedmd.com/srun.html#OPT_label) and torchrun's ``[rank12]:``::

    0: node0042:2231:2290 [3] NCCL INFO comm 0x55a7be569d00 rank 3 nRanks 16 nNodes 2 ...
    1: [rank12]:[E701 12:10:00.523400000 ProcessGroupNCCL.cpp:632] [Rank 12] Watchdog caught ...
    1: E0701 12:10:02.000000 2231 torch/distributed/elastic/multiprocessing/api.py:869] failed ...

:mod:`faultline.pipeline.parsers.joblog` parses such a file like any job log; this module
holds what is particular to it, all pure functions of the file's lines:

- whether the file is labelled (most of its first lines carry a task label), and whether
  it has collector stamps at all (any of its first lines starts with one);
- :func:`own_stamp`: the time a line carries itself when there is no collector stamp: an
  ISO stamp (a trainer's, NCCL >= 2.26's ``[2025-03-01 12:00:00]``) or a glog stamp
  (``E0701 12:10:00.523400``, PyTorch's C++ and Python loggers), which has neither year
  nor zone: the zone is ``ctx.tz`` (glog writes local time) and the year the one that
  puts the day inside the job's sacct window (``inferred_year``); without a window the
  line has no time of its own. A line without a time of its own takes the next stamped
  line's (``jobclock.ForwardClock``), before any stamp the job's sacct start;
- :func:`identities`: who a line is: task label -> host and rank -> (host, GPU) from
  NCCL's init lines (``host:pid:tid [cudaDev] NCCL INFO comm 0x.. rank R nRanks N ...
  localRank L`` and, from NCCL 2.19 on, ``... busId 9c000 ... Init COMPLETE``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from faultline.pipeline.pci import normalize_pci
from faultline.pipeline.records import ParseContext
from faultline.pipeline.timeutil import choose_year

SAMPLE_LINES = 40  # the first non-blank lines that decide a file's collector stamps
LABEL_SAMPLE_LINES = 400  # ... and its labels (a batch script may print before srun runs)
LABEL_RE = re.compile(r"^ *(\d{1,7}): ")
# A collector's stamp (ISO with ``T``; a trainer's own stamps have a space there).
COLLECTOR_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
_ISO_HEAD = re.compile(
    r"^\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"(?:\]|\s|$)")
_GLOG = re.compile(r"^\[?[EWIF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)(?:\s|\])")
# The lines identities() reads (Rust regex syntax too: it runs vectorized).
IDENTITY_RE = r"NCCL INFO (?:comm 0x|Bootstrap|Init COMPLETE)"
_NCCL_HOST = re.compile(r"(?:^|\s)([A-Za-z0-9][\w.\-]*):\d+:\d+ \[(\d+)\] NCCL ")
_COMM = re.compile(r"NCCL INFO comm 0x[0-9a-fA-F]+ rank (\d+) n[Rr]anks (\d+)")
_LOCAL_RANK = re.compile(r"\blocalRank (\d+)")
_BUS_ID = re.compile(r"\bbusId ([0-9a-fA-F]{1,12})\b")


def is_labelled(lines: list[str]) -> bool:
    """Whether the file's lines carry ``srun --label`` prefixes: a fifth of its first
    non-blank lines at least (the batch script's own output before ``srun`` has none),
    and more than two (a stray ``1: `` is no label)."""
    sample = list(islice((ln for ln in lines if ln.strip()), LABEL_SAMPLE_LINES))
    n = sum(1 for ln in sample if LABEL_RE.match(ln))
    return n > 2 and n * 5 >= len(sample)


def has_collector_stamps(lines: list[str]) -> bool:
    """Whether the file's first lines carry a collector's ISO stamp (its unstamped lines
    are continuations: traceback bodies, wrapped text)."""
    match = COLLECTOR_RE.match  # stops at the first stamp (a collector's first line)
    return any(match(ln) for ln in islice(filter(str.strip, lines), SAMPLE_LINES))


def split_label(line: str) -> tuple[str | None, str]:
    """``12: text`` -> (``"12"``, ``text``); a line without a label -> (None, line)."""
    m = LABEL_RE.match(line)
    return (m.group(1), line[m.end():]) if m else (None, line)


def _body(line: str, labelled: bool) -> str:
    body = split_label(line)[1] if labelled else line
    for _ in range(2):  # ``[default3]:[rank3]:`` may stack
        if not body.startswith(("[rank", "[default")):
            break
        m = _RANK_PREFIX.match(body)
        if m is None:
            break
        body = body[m.end():]
    return body


def glog_year(month: int, day: int, ctx: ParseContext) -> int | None:
    """The year of a glog stamp's day: inside the job's window, else ``ctx.year``."""
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    if ctx.job_window is not None:
        return choose_year(month, day, *ctx.job_window)
    return ctx.year


def own_stamp(line: str, labelled: bool, ctx: ParseContext) -> str | tuple[str, str] | None:
    """The time ``line`` carries itself, as ISO text (or (text, ts_quality) when its year
    is inferred); None when it carries none (see the module docstring)."""
    body = _body(line, labelled)
    c = body[:2]
    if not c or not (c[0].isdigit() or c[0] in "[EWIF"):
        return None  # most lines: no stamp can start here
    if m := _ISO_HEAD.match(body):
        return m.group(1)
    if m := _GLOG.match(body):
        month, day = int(m.group(1)), int(m.group(2))
        year = glog_year(month, day, ctx)
        if year is None:
            return None
        return f"{year:04d}-{month:02d}-{day:02d}T{m.group(3)}", "inferred_year"
    return None


@dataclass(frozen=True, slots=True)
class RankPlace:
    """Where a rank ran, from its NCCL init lines."""

    host: str
    cuda_dev: int
    local_rank: int | None = None
    nranks: int | None = None
    device: str | None = None  # the GPU's PCI address, from busId


def nccl_bus_id(text: str) -> str | None:
    """NCCL's ``busId`` (its int64 form, ``9c000``) as a PCI address (``0000:9c:00.0``):
    domain = id >> 20, bus = id >> 12 & 0xff, device = id >> 4 & 0xff, function = id & 0xf
    (``int64ToBusId`` in NCCL's src/misc/utils.cc)."""
    try:
        n = int(text, 16)
    except ValueError:
        return None
    return normalize_pci(f"{n >> 20:04x}:{n >> 12 & 0xff:02x}:{n >> 4 & 0xff:02x}.{n & 0xf:x}")


def identities(lines: list[str], indices: Iterable[int], labelled: bool
               ) -> tuple[dict[str, str], dict[int, RankPlace]]:
    """(task label -> host, rank -> :class:`RankPlace`) from the NCCL lines at ``indices``
    (0-based; those matching :data:`IDENTITY_RE`). The first claim wins: a label or a
    rank that two hosts claim keeps the first one's."""
    label_host: dict[str, str] = {}
    ranks: dict[int, RankPlace] = {}
    for i in indices:
        line = lines[i]
        label, rest = split_label(line) if labelled else (None, line)
        m = _NCCL_HOST.search(rest, 0, 400)
        if m is None:
            continue
        host, dev = m.group(1), int(m.group(2))
        if label is not None:
            label_host.setdefault(label, host)
        cm = _COMM.search(rest, m.start())
        if cm is None:
            continue
        rank = int(cm.group(1))
        if rank in ranks:
            continue
        lm = _LOCAL_RANK.search(rest, cm.end())
        bm = _BUS_ID.search(rest, cm.end())
        ranks[rank] = RankPlace(host=host, cuda_dev=dev,
                                local_rank=int(lm.group(1)) if lm else None,
                                nranks=int(cm.group(2)),
                                device=nccl_bus_id(bm.group(1)) if bm else None)
    return label_host, ranks


class Who:
    """Host, rank and GPU of the lines of a job log that has no host of its own (a
    ``slurm-<jobid>.out``): a line's host is its task label's, else its rank's."""

    def __init__(self, lines: list[str], labelled: bool) -> None:
        indices = [i for i, ln in enumerate(lines) if "NCCL INFO" in ln]
        self.label_host, self.ranks = identities(lines, indices, labelled)

    def place(self, label: str | None, rank: int | None) -> tuple[str | None, RankPlace | None]:
        """(host, the rank's place) of a line with this task label and rank."""
        place = self.ranks.get(rank) if rank is not None else None
        host = self.label_host.get(label) if label is not None else None
        return host or (place.host if place else None), place
