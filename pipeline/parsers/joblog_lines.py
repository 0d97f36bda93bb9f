"""Job-log lines: the prefixes a line may carry (collector stamp, ``srun --label``
task label, ``[rankN]:``, NCCL's ``host:pid:tid [cudaDev]``) and the content after them.

Split from :mod:`faultline.pipeline.parsers.joblog`, which (with its rules and its
tracebacks) reads every candidate line through :func:`line_info`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultline.pipeline.parsers import jobout
from faultline.pipeline.records import rank_of

MESSAGE_LIMIT = 4096  # characters of an event's message kept

# --- line prefixes ---------------------------------------------------------------------

# The collector's stamp: ISO-8601 with a zone (``Z``); zone-less stamps read in ctx.tz.
STAMP_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?)(?: |\t|$)"
)
# torchrun/PyTorch rank prefixes: ``[rank3]:`` (c10d) and ``[default3]:`` (torchrun --tee).
RANK_PREFIX_RE = re.compile(r"^\[(rank|default)(\d+)\]:\s?")
# NCCL >= 2.26 stamps its WARN lines itself (zone-less, seconds).
NCCL_STAMP_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\] ")
# ``host:pid:tid [cudaDev]`` that opens every NCCL debug line.
NCCL_PREFIX_RE = re.compile(r"(?:^|\s)([A-Za-z0-9][\w.\-]*):(\d+):(\d+) \[(\d+)\] ")
# A cheap necessary condition of NCCL_PREFIX_RE (its tail): most lines fail it fast.
_NCCL_PREFIX_TAIL = re.compile(r":\d+:\d+ \[\d+\] ")
# ``[Rank 27]``, ``[PG 0 Rank 1]``, ``[PG 0 (default_pg) Rank 1]``, ``[PG ID 2 PG GUID 3 Rank 3]``.
PG_RANK_RE = re.compile(r"\[(?:PG (?:ID )?(\w+)[^\]]*?)?\bRank (\d+)\]")

def cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one line's structure -----------------------------------------------------------------


@dataclass(slots=True)
class LineInfo:
    """What a job-log line's prefixes say, and the content that follows them."""

    stamp: str | None  # the collector's timestamp text
    content: str  # the line after the collector stamp (rank/NCCL prefixes kept)
    body: str  # content after the label and rank prefix(es): what a traceback sees
    rank: int | None = None
    rank_key: str | None = None  # "rank3" / "default3": which stream the line belongs to
    nccl_stamp: str | None = None
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    cuda_dev: int | None = None
    label: str | None = None  # ``srun --label``'s task number (labelled files only)


def line_info(line: str, labelled: bool = False) -> LineInfo:
    """Split a job-log line into its prefixes (collector stamp, ``srun --label`` task
    label when the file is ``labelled``, rank, NCCL) and content."""
    m = STAMP_RE.match(line)
    if m:
        stamp: str | None = m.group(1)
        content = line[m.end():]
    else:
        stamp, content = None, line
    body = content
    label = None
    if labelled:
        label, body = jobout.split_label(body)
    rank = rank_key = None
    for _ in range(2):  # ``[default3]:[rank3]:`` may stack
        if not body.startswith(("[rank", "[default")):  # what RANK_PREFIX_RE opens with
            break
        rm = RANK_PREFIX_RE.match(body)
        if not rm:
            break
        if rank_key is None:
            rank_key = rm.group(1) + rm.group(2)
        rank = rank_of(rm.group(2))
        body = body[rm.end():]
    info = LineInfo(stamp=stamp, content=content, body=body, rank=rank, rank_key=rank_key,
                    label=label)
    sm = NCCL_STAMP_RE.match(body) if body[1:2].isdecimal() else None  # ``[2025-...``
    if sm:
        info.nccl_stamp = sm.group(1)
    nm = NCCL_PREFIX_RE.search(body, 0, 400) if _NCCL_PREFIX_TAIL.search(body, 0, 400) else None
    if nm:
        info.host = nm.group(1)
        info.pid, info.tid, info.cuda_dev = int(nm.group(2)), int(nm.group(3)), int(nm.group(4))
    if info.rank is None and "Rank " in body:
        pm = PG_RANK_RE.search(body)
        if pm:
            info.rank = rank_of(pm.group(2))
    return info
