"""Fast lanes of the job-log parser: the three line shapes that are most of its events.

A training job's logs are mostly routine, and most of their event lines are of three
kinds, written by NCCL and PyTorch in one fixed shape each (``small`` x4: 188k
of 199k job-log events, one line in four)::

    <stamp> gpu-027:213456:213516 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.37<0>
    <stamp> [rank216]:[E1030 10:29:55.756324000 ProcessGroupNCCL.cpp:632] [Rank 216] Watchdog
        caught collective operation timeout: WorkNCCL(SeqNum=400000, OpType=ALLREDUCE,
        NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600093 milliseconds
        before timing out.
    <stamp> [rank216]:[E1030 10:29:55.756324000 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg)
        Rank 216] Exception (either an error or timeout) detected by watchdog at work:
        400000, last enqueued NCCL work: 400000, last completed NCCL work: 399999.

(shapes as in PyTorch's ``ProcessGroupNCCL.cpp`` and NCCL's ``bootstrap.cc``; real
lines: tests/test_parse_joblog.py). The general path reads each such line with
several Python regexes (prefixes, then every rule in order, then the kind's fields):
about 16 us a line. Here one polars ``extract_groups`` per shape, over the candidate
lines of the whole batch, takes every field at once.

Exactness: each lane's pattern matches the WHOLE line (``^...$``), with every free field
narrowed to characters the general path reads the same way (ASCII digits, no ``<``,
no spaces), and a line that also holds a literal of an earlier rule of
:data:`joblog.RULES` is left to the general path. For a line a lane takes, the general
path's prefixes, first matching rule and attributes are therefore determined, and the
lane gives exactly them (``tests/test_joblog_lanes.py`` checks both paths agree on
every line shape, hostile variants included). Anything else (a labelled or
unstamped file, a file without a host of its own, an odd variant) goes the general way.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch

# joblog.STAMP_RE's stamp, in ASCII digits, followed by the one space it consumes
_STAMP = (r"(?P<stamp>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
          r"(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?) ")
_INT = r"[0-9]{1,18}"  # fits int64 and reads the same in int() and polars
_C10D = (r"\[rank(?P<rank>[0-9]{1,9})\]:\[[EWI][0-9]{3,4} [0-9]{2}:[0-9]{2}:[0-9]{2}"
         r"(?:\.[0-9]{1,9})? ProcessGroupNCCL\.cpp:[0-9]{1,6}\] ")

BOOTSTRAP = (
    "^" + _STAMP
    + rf"(?P<host>[A-Za-z0-9][A-Za-z0-9_.\-]{{0,62}}):(?P<pid>{_INT}):(?P<tid>{_INT})"
    r" \[(?P<dev>[0-9]{1,9})\] NCCL INFO Bootstrap ?: Using"
    # the address: printable ASCII but ``<`` (Python's and Rust's \s differ beyond it)
    r" (?P<ifname>[A-Za-z0-9_][A-Za-z0-9_.\-]{0,31}):(?P<address>[!-;=-~]{1,64})"
    r"<[0-9]{1,9}>$"
)
WATCHDOG = (
    "^" + _STAMP + _C10D
    + r"\[Rank [0-9]{1,9}\] Watchdog caught collective operation timeout: "
    rf"WorkNCCL\(SeqNum=(?P<seq>{_INT}), OpType=(?P<op>[A-Z_]{{1,32}}), "
    rf"NumelIn=(?P<nin>{_INT}), NumelOut=(?P<nout>{_INT}), Timeout\(ms\)=(?P<tmo>{_INT})\)"
    rf" ran for (?P<ran>{_INT}) milliseconds before timing out\.$"
)
PROGRESS = (
    "^" + _STAMP + _C10D
    + r"\[PG (?P<pg>[A-Za-z0-9_]{1,20}) \([A-Za-z0-9_]{1,40}\) Rank [0-9]{1,9}\] "
    r"Exception \(either an error or timeout\) detected by watchdog at work: "
    rf"(?P<work>{_INT}), last enqueued NCCL work: (?P<enq>{_INT}), "
    rf"last completed NCCL work: (?P<done>{_INT})\.$"
)
MAX_LINE = 1000  # well under joblog.MESSAGE_LIMIT and the 400-character prefix window

# lane id -> (pattern, the rule that decides its lines, integer fields)
LANES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "nccl_bootstrap": (BOOTSTRAP, "nccl.bootstrap", ("pid", "tid", "dev")),
    "nccl_watchdog": (WATCHDOG, "c10d.watchdog_timeout",
                      ("rank", "seq", "nin", "nout", "tmo", "ran")),
    "nccl_watchdog_progress": (PROGRESS, "c10d.watchdog_progress",
                               ("rank", "work", "enq", "done")),
}

Lane = tuple  # (kind, stamp, fields...): see :func:`lanes`


def earlier_needles(rule_id: str, checks: tuple) -> list[str]:
    """The literals of every rule before ``rule_id`` in ``checks`` (joblog's
    ``_RULE_CHECKS``): a line holding none of them matches none of those rules."""
    out: list[str] = []
    for rid, _kind, _rx, needles in checks:
        if rid == rule_id:
            return out
        if needles is None:  # a rule without literals could match anything: no lane
            raise ValueError(f"rule {rid} has no literal needles; lanes need them")
        out.extend(needles)
    raise ValueError(f"no rule {rule_id}")


def lanes(batch: LineBatch, hits: np.ndarray, checks: tuple) -> list[dict[int, Lane]]:
    """For each file of ``batch``: local row -> the fields of a candidate line one of
    :data:`LANES` takes. ``hits`` are the batch's candidate rows (global, sorted)."""
    out: list[dict[int, Lane]] = [{} for _ in batch.files]
    if not len(hits):
        return out
    sub = batch.series.gather(pl.Series(hits, dtype=pl.UInt32))
    frame = sub.to_frame("line").with_columns(pl.Series("row", hits, dtype=pl.Int64))
    short = pl.col("line").str.len_chars() <= MAX_LINE
    for kind, (pattern, rule_id, ints) in LANES.items():
        needles = earlier_needles(rule_id, checks)
        keep = short & ~pl.col("line").str.contains_any(needles) if needles else short
        got = frame.filter(keep).select(
            "row", pl.col("line").str.extract_groups(pattern).alias("g"),
        ).filter(pl.col("g").struct.field("stamp").is_not_null())
        if not got.height:
            continue
        got = got.unnest("g").with_columns(pl.col(c).cast(pl.Int64) for c in ints)
        rows = got["row"].to_numpy()
        fields = [c for c in got.columns if c != "row"]
        values = [got[c].to_list() for c in fields]
        file_of = np.searchsorted(batch.starts, rows, side="right") - 1
        local = (rows - batch.starts[file_of]).tolist()
        for k, i, rec in zip(file_of.tolist(), local, zip(*values, strict=True),
                             strict=True):
            out[k][i] = (kind, *rec)
    return out
