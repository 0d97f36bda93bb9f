"""Fast lanes of the job-log parser: the five line shapes that are most of its events.

A training job's logs are mostly routine, and most of their event lines are of a few
kinds, written by NCCL, PyTorch and Slurm in one fixed shape each (``small`` x4: 199k
of 199k job-log events but 150, one line in four; the first three below 188k)::

    <stamp> gpu-027:213456:213516 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.37<0>
    <stamp> [rank216]:[E1030 10:29:55.756324000 ProcessGroupNCCL.cpp:632] [Rank 216] Watchdog
        caught collective operation timeout: WorkNCCL(SeqNum=400000, OpType=ALLREDUCE,
        NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600093 milliseconds
        before timing out.
    <stamp> [rank216]:[E1030 10:29:55.756324000 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg)
        Rank 216] Exception (either an error or timeout) detected by watchdog at work:
        400000, last enqueued NCCL work: 400000, last completed NCCL work: 399999.
    <stamp> slurmstepd: error: *** JOB 1274608 ON gpu-061 CANCELLED AT 2024-11-12T17:04:43
        DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
    <stamp> E1124 01:45:17.546722 323471 torch/distributed/elastic/multiprocessing/api.py:869]
        failed (exitcode: -6) local_rank: 0 (pid: 323472) of binary: /usr/bin/python3

(shapes as in PyTorch's ``ProcessGroupNCCL.cpp`` and ``elastic/multiprocessing/api.py``,
NCCL's ``bootstrap.cc`` and slurmstepd's; real lines: tests/test_parse_joblog.py,
tests/test_joblog_lanes.py and, for the cancel and elastic lanes with the shapes they
leave to the general path, tests/test_joblog_real_lines.py). The general path reads each
such line with several Python regexes (prefixes, then every rule in order, then the
kind's fields): about 16 us a line. Here one polars ``extract_groups`` per shape, over
the candidate lines of the whole batch, takes every field at once, and the lanes' events
are built there as columns (:func:`lane_frame`): time, message and the attrs JSON are
polars expressions (:mod:`faultline.pipeline.colexpr`), no Python object per event.

Exactness: each lane's pattern matches the WHOLE line (``^...$``), with every free field
narrowed to characters the general path reads the same way (ASCII digits, no ``<``,
no spaces), and a line that also holds a literal of an earlier rule of
:data:`joblog.RULES` is left to the general path. For a line a lane takes, the general
path's prefixes, first matching rule and attributes are therefore determined, and the
lane gives exactly them; a line whose stamp ``parse_iso`` would not read (or
``in_range`` refuse, or that needs a zone's rules) is left to the general path too
(the zone-less time a cancel line names is read by ``parse_iso`` itself)
(``tests/test_joblog_lanes.py`` checks both paths agree on
every line shape, hostile variants included). Anything else (a labelled or
unstamped file, a file without a host of its own, an odd variant) goes the general way.
"""

from __future__ import annotations

import functools
import json
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from faultline.pipeline.colexpr import json_object, with_iso_us
from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.records import COLUMN_EVENTS, FileParse, ParseContext, ParsedEvent
from faultline.pipeline.timeutil import in_range, parse_iso

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
# slurmstepd's cancellation (``*** JOB 12 ON gpu-1 CANCELLED AT <local time> ***``,
# Slurm's src/slurmd/slurmstepd/req.c), with or without ``DUE TO <reason>``
CANCELLED = (
    "^" + _STAMP
    + r"slurmstepd: error: \*\*\* (?P<scope>JOB|STEP) (?P<job>[0-9][0-9.]{0,30})"
    r" ON (?P<host>[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}) CANCELLED AT"
    r" (?P<at>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})"
    r"(?: DUE TO (?P<due>[A-Z][A-Z ]{0,62}[A-Z])(?:, SEE SLURMCTLD LOG FOR DETAILS)?)?"
    r" \*\*\*$"
)
# torch elastic's agent on a worker's death (torch/distributed/elastic/multiprocessing/api.py)
ELASTIC_FAILED = (
    "^" + _STAMP
    + r"[EWIF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})? [0-9]{1,18}"
    r" [A-Za-z0-9_./\-]{1,200}\.py:[0-9]{1,6}\] failed \(exitcode: (?P<code>-?[0-9]{1,9})\)"
    rf" local_rank: (?P<lr>[0-9]{{1,9}}) \(pid: (?P<pid>{_INT})\)"
    r" of binary: (?P<bin>[!-~]{1,200})$"
)
MAX_LINE = 1000  # well under joblog.MESSAGE_LIMIT and the 400-character prefix window


@dataclass(frozen=True, slots=True)
class Lane:
    """One line shape a lane takes: the rule that decides its lines and how to read it."""

    kind: str  # its events' kind
    rule_id: str
    pattern: str  # the whole line, named groups (``stamp`` first)
    anchor: str  # a literal every line it takes holds: a cheap first cut of the rows
    ints: tuple[str, ...] = ()  # groups read as integers
    host: bool = False  # group ``host`` is the event's host (else the file's)
    rank: bool = False  # group ``rank`` is the event's rank (else none)
    # a group holding a zone-less time the line names (slurmstepd's local time): read
    # in the file's zone by ``parse_iso`` itself, once per distinct (time, zone) of the
    # batch (:func:`_local_times`): zoneinfo's rules stay with Python
    local_time: str | None = None


LANES: dict[str, Lane] = {
    "nccl_bootstrap": Lane("nccl_bootstrap", "nccl.bootstrap", BOOTSTRAP,
                           " NCCL INFO Bootstrap", ("pid", "tid", "dev"), host=True),
    "nccl_watchdog": Lane(
        "nccl_watchdog", "c10d.watchdog_timeout", WATCHDOG,
        "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
        ("rank", "seq", "nin", "nout", "tmo", "ran"), rank=True),
    "nccl_watchdog_progress": Lane(
        "nccl_watchdog_progress", "c10d.watchdog_progress", PROGRESS,
        "] Exception (either an error or timeout) detected by watchdog",
        ("rank", "work", "enq", "done"), rank=True),
    "job_cancelled": Lane("job_cancelled", "slurm.job_cancelled", CANCELLED,
                          "slurmstepd: error: *** ", host=True, local_time="at"),
    "elastic_failed": Lane("process_exit", "elastic.failed", ELASTIC_FAILED,
                           "] failed (exitcode: ", ("code", "lr", "pid")),
}
# exit code -> the signal that killed the process (joblog_rules._signal_name's)
_SIGNALS = {-sig.value: sig.name for sig in signal.Signals}

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


@functools.lru_cache(maxsize=64)
def _earlier_pattern(rule_id: str, checks: tuple) -> str | None:
    """A regex matching where any of :func:`earlier_needles` occurs (None: there are
    none), made once per rule set: what ``str.contains_any`` tests, in half its time
    (8k bootstrap lines against 25 needles: 1.2 ms against 2.5; the regex engine's
    literal search beats the Aho-Corasick automaton polars builds on every call)."""
    needles = earlier_needles(rule_id, checks)
    return "|".join(pl.escape_regex(n) for n in needles) if needles else None


# The columns of :func:`lane_frame`, and what each event column takes from them.
FRAME_COLUMNS = ("file", "row", "kind", "ts", "ts_quality", "lane_host", "rank", "message",
                 "attrs")


def _attrs(lane: str) -> pl.Expr:
    """The attrs JSON of a lane's event: ``json.dumps(attrs, sort_keys=True)`` of the
    dict the general path builds for that rule (joblog_rules' ``_attrs_*`` and
    ``classify``)."""
    c = pl.col
    if lane == "nccl_bootstrap":
        fields = {"rule": ("str", pl.lit("nccl.bootstrap")), "ifname": ("str", c("ifname")),
                  "address": ("str", c("address")), "pid": ("int", c("pid")),
                  "tid": ("int", c("tid")), "cuda_dev": ("int", c("dev"))}
    elif lane == "nccl_watchdog":
        fields = {"rule": ("str", pl.lit("c10d.watchdog_timeout")),
                  "seq_num": ("int", c("seq")), "op_type": ("str", c("op")),
                  "numel_in": ("int", c("nin")), "numel_out": ("int", c("nout")),
                  "timeout_ms": ("int", c("tmo")), "ran_ms": ("int", c("ran"))}
    elif lane == "nccl_watchdog_progress":
        fields = {"rule": ("str", pl.lit("c10d.watchdog_progress")),
                  "what": ("str", pl.lit("exception")), "work": ("int", c("work")),
                  "last_enqueued": ("int", c("enq")), "last_completed": ("int", c("done")),
                  "pg": ("str", c("pg"))}
    elif lane == "job_cancelled":
        fields = {"rule": ("str", pl.lit("slurm.job_cancelled")),
                  "scope": ("str", pl.when(c("scope") == "JOB").then(pl.lit("job"))
                            .otherwise(pl.lit("step"))),
                  "slurm_job": ("str", c("job")), "cancelled_at": ("int?", c("at_us")),
                  "due_to": ("str?", c("due"))}
    else:
        fields = {"rule": ("str", pl.lit("elastic.failed")), "exitcode": ("int", c("code")),
                  "local_rank": ("int", c("lr")), "pid": ("int", c("pid")),
                  "binary": ("str", c("bin")),
                  "signal": ("str-", c("code").replace_strict(
                      list(_SIGNALS), list(_SIGNALS.values()), default=None,
                      return_dtype=pl.String))}
    return json_object(fields)


def _local_times(got: pl.DataFrame, column: str, zones: pl.Series) -> pl.DataFrame:
    """``got`` with ``at_us``: the epoch us of its zone-less times ``column`` read in
    their file's zone (``zones[file]``) as the general path reads them
    (``parse_iso``, then ``in_range``; null where either refuses)."""
    got = got.with_columns(zones.gather(got["file"]).alias("tz"))
    pairs = got.select(column, "tz").unique()
    values = []
    for text, tz in pairs.iter_rows():
        when = parse_iso(text, ZoneInfo(tz))
        values.append(when[0] if when and in_range(when[0]) else None)
    pairs = pairs.with_columns(pl.Series("at_us", values, dtype=pl.Int64))
    return got.join(pairs, on=[column, "tz"], how="left", maintain_order="left")


def _lane_rows(frame: pl.DataFrame, name: str, lane: Lane, checks: tuple, short: pl.Expr,
               zones: pl.Series) -> pl.DataFrame | None:
    """The rows of ``frame`` (candidate lines) lane ``name`` takes, read: the stamp
    still as text (:func:`lane_frame` reads all lanes' at once). None when no line
    holds the lane's anchor: most batches have lines of two or three lanes, and an
    empty lane's reading and attrs still cost 1.5-3 ms a batch (llama3's job logs:
    about 5 us a file)."""
    got = frame.filter(pl.col("line").str.contains(lane.anchor, literal=True))
    if not got.height:
        return None
    earlier = _earlier_pattern(lane.rule_id, checks)
    keep = short & ~pl.col("line").str.contains(earlier) if earlier else short
    got = (got.with_columns(pl.col("line").str.extract_groups(lane.pattern).alias("g"))
           .filter(pl.col("g").struct.field("stamp").is_not_null() & keep)
           .unnest("g").with_columns(pl.col(c).cast(pl.Int64) for c in lane.ints))
    if lane.local_time and got.height:
        got = _local_times(got, lane.local_time, zones)
    elif lane.local_time:
        got = got.with_columns(pl.lit(None, pl.Int64).alias("at_us"))
    return got.select(
        "file", "row", "line", "stamp", "utc", pl.lit(lane.kind).alias("kind"),
        (pl.col("host") if lane.host else pl.lit(None, pl.String)).alias("lane_host"),
        (pl.col("rank").cast(pl.Int32) if lane.rank else pl.lit(None, pl.Int32))
        .alias("rank"),
        _attrs(name).alias("attrs"),
    )


def lane_frame(batch: LineBatch, hits: np.ndarray, checks: tuple, eligible: np.ndarray,
               utc_local: np.ndarray, zones: Sequence[str] | None = None) -> pl.DataFrame:
    """The events of the candidate lines one of :data:`LANES` takes, one row each
    (:data:`FRAME_COLUMNS`), sorted by file (its index in ``batch``) and local row.
    ``hits`` are the batch's candidate rows (global, sorted), of which only those of
    files where ``eligible`` (collector-stamped, a host of their own) are looked at;
    ``utc_local[k]`` says
    whether file ``k`` reads zone-less stamps as UTC (its zone is ``UTC``): other
    zones' zone-less stamps, like unreadable or out-of-range ones, leave the line to
    the general path. ``zones[k]`` is file ``k``'s zone (``ctx.tz``; default: UTC),
    for the times a line names (:attr:`Lane.local_time`)."""
    empty = pl.DataFrame(schema={"file": pl.Int64, "row": pl.Int64, "kind": pl.String,
                                 "ts": pl.Int64, "ts_quality": pl.String,
                                 "lane_host": pl.String, "rank": pl.Int32,
                                 "message": pl.String, "attrs": pl.String})
    hits = np.asarray(hits, dtype=np.int64)
    file_of = np.searchsorted(batch.starts, hits, side="right") - 1
    keep_rows = np.asarray(eligible, dtype=bool)[file_of]
    hits, file_of = hits[keep_rows], file_of[keep_rows]
    if not len(hits):
        return empty
    sub = batch.series.gather(pl.Series(hits, dtype=pl.UInt32))
    frame = pl.DataFrame({
        "line": sub, "file": file_of, "row": hits - batch.starts[file_of],
        "utc": np.asarray(utc_local, dtype=bool)[file_of],
    })
    short = pl.col("line").str.len_chars() <= MAX_LINE
    tz = pl.Series("tz", ["UTC"] * len(utc_local) if zones is None else list(zones),
                   dtype=pl.String)
    parts = [part for name, lane in LANES.items()
             if (part := _lane_rows(frame, name, lane, checks, short, tz)) is not None]
    got = pl.concat(parts) if parts else None
    if got is None or not got.height:
        return empty
    got = with_iso_us(got, "stamp", "utc").filter(pl.col("ts").is_not_null())
    return got.select(
        "file", "row", "kind", "ts",
        pl.when(pl.col("zoned")).then(pl.lit("exact")).otherwise(pl.lit("assumed_tz"))
        .alias("ts_quality"),
        "lane_host", "rank",
        # the content after the stamp and its one space (all ASCII: chars = bytes)
        pl.col("line").str.slice(pl.col("stamp").str.len_chars() + 1).alias("message"),
        "attrs",
    ).sort("file", "row")


# The columns of a file's lane events as :mod:`faultline.pipeline.fileparse` receives
# them (``FileParse.columns``)
EVENT_COLUMNS = COLUMN_EVENTS


def attach(frame: pl.DataFrame, inside: dict[int, set[int]], fps: list[FileParse],
           ctxs: list[ParseContext], columnar: bool) -> None:
    """Give each file of a batch its lane events (``frame``: :func:`lane_frame`'s),
    but those on lines of a traceback block the general path found (``inside``: file
    -> its block lines): as a frame of :data:`EVENT_COLUMNS` in ``fps[k].columns``
    when ``columnar``, else as :class:`ParsedEvent` objects merged into
    ``fps[k].events`` in line order (a lane line never holds another event)."""
    if inside and frame.height:
        drop = pl.DataFrame(
            [(k, r) for k, rows in inside.items() for r in rows],
            schema={"file": pl.Int64, "row": pl.Int64}, orient="row")
        frame = frame.join(drop, on=["file", "row"], how="anti", maintain_order="left")
    if not frame.height:
        return
    file_col = frame["file"]
    hosts = pl.Series([c.host for c in ctxs], dtype=pl.String)
    jobs = pl.Series([c.job_id for c in ctxs], dtype=pl.String)
    frame = frame.select(
        (pl.col("row") + 1).alias("line_no"), "kind", "ts", "ts_quality",
        pl.coalesce(pl.col("lane_host"), hosts.gather(file_col)).alias("host"),
        "rank", "message", "attrs", jobs.gather(file_col).alias("job_id"),
    )
    bounds = np.searchsorted(file_col.to_numpy(), np.arange(len(fps) + 1))
    for k in np.flatnonzero(np.diff(bounds)).tolist():
        part = frame.slice(int(bounds[k]), int(bounds[k + 1] - bounds[k]))
        if columnar:
            fps[k].columns = part
            fps[k].column_span = (frame, int(bounds[k]), part)
        else:
            fps[k].events = sorted([*fps[k].events, *as_events(part)],
                                   key=lambda e: e.line_no)


def as_events(part: pl.DataFrame) -> list[ParsedEvent]:
    """A frame of :data:`EVENT_COLUMNS` as the general path's event objects."""
    return [ParsedEvent(line_no=line_no, kind=kind, message=message, ts=ts,
                        ts_quality=quality, host=host, job_id=job_id, rank=rank,
                        attrs=json.loads(attrs))
            for line_no, kind, ts, quality, host, rank, message, attrs, job_id
            in part.select(EVENT_COLUMNS).iter_rows()]
