"""Trainer logs: the training loop's own log (rank 0), Python ``logging`` shape.

::

    2024-07-01 11:58:00,004 INFO step=182311 loss=1.8412 grad_norm=0.41 tokens_per_s=2.9e7
    2024-07-01 11:45:00,010 INFO checkpoint saved step=182000 path=/ckpt/run7/step_182000 seconds=41
    2024-07-01 12:00:00,002 ERROR non-finite loss (nan) at step 182312
    2024-07-01 12:00:00,002 ERROR Traceback (most recent call last):

Times carry no zone: they are read in ``ctx.tz`` (``assumed_tz``); a line without a time
(a traceback line), or with one outside the plausible range of
:mod:`faultline.pipeline.timeutil`, inherits the one above it.

Speed: step lines are most of the file (millions in a long run), and the pipeline needs
every one of them (first/last step of an attempt, progress for lost work and effective
training time), so each gives a ``train_step`` event, but nothing about a step line is
read in Python: times (with the zone applied and forward-filled), step numbers and losses
come from vectorized polars expressions over the whole file (with :func:`parse_many`,
over every file of a batch at once, times carried forward within each file), and the
events are built from the resulting columns. Python reads only the few lines the union
regex :data:`CANDIDATE_RE` selects (errors, checkpoints, non-finite values, mismatches,
tracebacks).

A step line whose loss is NaN/Inf gives both its ``train_step`` (``loss`` None) and a
``nonfinite_loss`` event. Trainer logs never reject a line.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl

from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers.joblog_lines import MESSAGE_LIMIT, cap
from faultline.pipeline.parsers.joblog_traceback import (
    TRACEBACK_OPEN,
    collect_traceback,
    traceback_event,
)
from faultline.pipeline.records import (
    COLUMN_EVENTS,
    FileParse,
    ParseContext,
    ParsedEvent,
    rank_of,
)
from faultline.pipeline.text import split_lines
from faultline.pipeline.timeutil import TS_MAX_US, TS_MIN_US, local_to_utc_us

# Both Rust (polars) and Python regex syntax: keep to the common subset.
STAMP_RE = r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[,.](\d{1,9}))?"
STEP_RE = r"\b(?:step|iteration|iter)(?:=|:\s*|\s+)(\d+)"
LOSS_RE = r"\b(?:lm )?loss(?:=|:\s*)([-+]?(?:\d[\w.+-]*|(?i:nan|inf)))"
CHECKPOINT_RE = (
    r"(?i:checkpoint\s+(?:saved|written|stored|completed?|finished)"
    r"|saved\s+(?:a\s+)?checkpoint)"
)
_NONFINITE = (
    r"(?i:non-?finite|found (?:nan|inf)|(?:loss|grad_norm|grad norm)\s*[=:]\s*[-+]?(?:nan|inf)"
    r"|(?:loss|grad norm|gradient) is (?:nan|inf)|nan loss)"
)
_MISMATCH = r"(?i:mismatch|checksum|not match|differ|diverge|inconsistent)"
CANDIDATE_RE = "|".join((
    r"\b(?:ERROR|CRITICAL|FATAL)\b",
    CHECKPOINT_RE,
    r"Traceback \(most recent call last\)",
    _NONFINITE,
    _MISMATCH,
))

_PY_STAMP = re.compile(STAMP_RE)
_LEVEL = re.compile(r"\s*(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b[:\s]*")
_PY_STEP = re.compile(STEP_RE)
_PY_NONFINITE = re.compile(_NONFINITE)
_PY_CHECKPOINT = re.compile(CHECKPOINT_RE)
_CHECKSUM = re.compile(
    r"(?i)(?:checksum|parameter|param|weight|hash|replica|grad(?:ient)?(?: norm)?)s?\b.{0,80}?"
    r"(?:mismatch|differ|diverge|inconsistent|not (?:match|equal|identical|consistent)"
    r"|do(?:es)? not match)"
    r"|mismatch(?:ed|es)?\b.{0,80}?(?:checksum|parameter|param|weight|hash|replica|rank)"
)
_AT_STEP = re.compile(r"(?i)\b(?:at |in )?(?:step|iteration|iter)\s*[=:#]?\s*(\d+)")
_VALUE = re.compile(r"(?i)\b(nan|inf)\b")
_GRAD_VALUE = re.compile(r"(?i)grad(?:_norm| norm)?\s*[=:]\s*[-+]?(?:nan|inf)")
_LOSS_VALUE = re.compile(r"(?i)loss\s*[=:]\s*[-+]?(?:nan|inf)")
_GRAD = re.compile(r"(?i)grad")
_LOSS = re.compile(r"(?i)loss")
_PATH = re.compile(r"\bpath=(\S+)|\bto (/\S+)|\bat (/\S+)")
_SECONDS = re.compile(r"(?i)\bseconds=([\d.]+)|\bin ([\d.]+)\s*s(?:ec(?:onds?)?)?\b")
_RANK = re.compile(r"\b[Rr]ank[s]?\s*[=:]?\s*(\d+)")
_DEVICE = re.compile(r"Device: (\d+)")
_NODE = re.compile(r"\bnode: (\S+?)[.,]?(?:\s|$)")


def _content(line: str) -> tuple[str | None, str]:
    """(level, message) of a line: the text after its stamp and level, if any."""
    m = _PY_STAMP.match(line)
    if m is None:
        return None, line
    rest = line[m.end():]
    lm = _LEVEL.match(rest)
    if lm is None:
        return None, rest.lstrip()
    return lm.group(1), rest[lm.end():]


def _split(line: str) -> tuple[str | None, str]:
    return None, _content(line)[1]


# --- per-line rules (Python, candidates only) --------------------------------------------------


def classify(line: str) -> tuple[str, dict] | None:
    """Kind and attrs of one trainer line, for the non-step kinds (step lines are
    vectorized, see :func:`step_frame`); None if the line is routine."""
    level, msg = _content(line)
    low = msg.lower() if msg.isascii() else None  # None: no cheap pre-check
    if _may_match(low, _NONFINITE_NEEDLES) and _PY_NONFINITE.search(msg):
        attrs: dict = {"what": _nonfinite_what(msg)}
        if m := _VALUE.search(msg):
            attrs["value"] = m.group(1).lower()
        if m := _AT_STEP.search(msg):
            attrs["step"] = int(m.group(1))
        _rank_device(msg, attrs)
        return "nonfinite_loss", attrs
    if _may_match(low, _CHECKSUM_NEEDLES) and _CHECKSUM.search(msg):
        attrs = {}
        if m := _AT_STEP.search(msg):
            attrs["step"] = int(m.group(1))
        ranks = sorted({int(r) for r in _RANK.findall(msg)})
        if ranks:
            attrs["ranks"] = ranks
        return "checksum_mismatch", attrs
    if _PY_CHECKPOINT.search(msg) and level not in ("ERROR", "CRITICAL", "FATAL"):
        attrs = {}
        if m := _AT_STEP.search(msg):
            attrs["step"] = int(m.group(1))
        if m := _PATH.search(msg):
            attrs["path"] = next(g for g in m.groups() if g)
        if m := _SECONDS.search(msg):
            attrs["seconds"] = float(next(g for g in m.groups() if g))
        return "checkpoint", attrs
    if level in ("ERROR", "CRITICAL", "FATAL"):
        attrs = {"level": level}
        if m := _AT_STEP.search(msg):
            attrs["step"] = int(m.group(1))
        return "train_error", attrs
    return None


# Literals every match of _PY_NONFINITE, resp. _CHECKSUM, holds, lowercased: most
# candidate lines (checkpoint saves) hold none, and both case-insensitive searches fail
# slowly (``.{0,80}?``): 0.055 of classify's 0.060 CPU s on small x4's 4,342 candidates.
_NONFINITE_NEEDLES = ("finite", "nan", "inf")
_CHECKSUM_NEEDLES = ("mismatch", "differ", "diverge", "inconsistent", "not ")


def _may_match(low: str | None, needles: tuple[str, ...]) -> bool:
    """Whether a message (``low``: lowercased, None unless ASCII) may match a pattern
    all of whose matches hold one of ``needles``. Only for ASCII text: there ``re.I``
    folds case exactly as ``str.lower`` does (beyond it, e.g. the Kelvin sign folds to
    ``k``)."""
    return low is None or any(nd in low for nd in needles)


def _nonfinite_what(msg: str) -> str:
    """Which value went non-finite: ``loss`` or ``grad_norm``."""
    if _GRAD_VALUE.search(msg):
        return "grad_norm"
    if _LOSS_VALUE.search(msg):
        return "loss"
    return "grad_norm" if _GRAD.search(msg) and not _LOSS.search(msg) else "loss"


def _rank_device(msg: str, attrs: dict) -> None:
    if m := _RANK.search(msg):
        attrs["rank"] = rank_of(m.group(1))
    if m := _DEVICE.search(msg):
        attrs["device"] = int(m.group(1))
    if m := _NODE.search(msg):
        attrs["node"] = m.group(1)


# --- vectorized columns --------------------------------------------------------------------------


def line_frame(lines: pl.Series, tz: str, file_ids: np.ndarray | None = None
               ) -> pl.DataFrame:
    """Every column the parser needs, one row per line, in one parallel polars pass.

    ``ts`` (epoch us UTC, forward-filled) and its ``quality`` (``assumed_tz`` on a line
    with a time of its own, else ``inherited``, or ``untimed`` before the first time);
    ``step`` and ``loss`` (None unless finite) and ``message`` (the line after its stamp)
    on step lines, else null; ``is_step``; ``cand`` (Python must read the line).

    ``file_ids`` (one per line) says which file each line is from when ``lines`` holds
    several files: times are then carried forward within a file only.

    Wall times are read in ``tz`` with the rules of :mod:`faultline.pipeline.timeutil`:
    the repeated hour resolves to its first occurrence (polars ``earliest``); a time in
    the skipped hour (polars gives null) is computed by :func:`local_to_utc_us`.
    """
    line = pl.col("line")
    # Stage 1: every regex pass once, in parallel.
    frame = lines.to_frame("line").select(
        line,
        line.str.extract_groups(STAMP_RE).alias("stamp"),
        line.str.extract(STEP_RE, 1).cast(pl.Int64, strict=False).alias("step"),
        line.str.extract(LOSS_RE, 1).alias("loss_raw"),
        line.str.contains(CHECKPOINT_RE).alias("ckpt"),
        line.str.contains(CANDIDATE_RE).alias("cand"),
    ).unnest("stamp")
    frame.columns = ["line", "d", "t", "f", "step", "loss_raw", "ckpt", "cand"]
    # Stage 2: arithmetic on those columns.
    d, t, f = pl.col("d"), pl.col("t"), pl.col("f")
    naive = (d + pl.lit(" ") + t).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", time_unit="us", strict=False
    ) + pl.duration(
        microseconds=f.str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False)
        .fill_null(0)
    )
    if tz == "UTC":
        utc = naive.dt.replace_time_zone("UTC")
    else:
        utc = naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    stamp_len = (d.str.len_chars() + 1 + t.str.len_chars()
                 + (f.str.len_chars() + 1).fill_null(0)).fill_null(0)
    loss = pl.col("loss_raw").cast(pl.Float64, strict=False)
    is_step = (pl.col("step").is_not_null() & pl.col("loss_raw").is_not_null()
               & ~pl.col("ckpt"))
    frame = frame.select(
        naive.alias("naive"),
        utc.dt.epoch("us").alias("ts"),
        "step",
        pl.when(loss.is_finite()).then(loss).otherwise(None).alias("loss"),
        is_step.alias("is_step"),
        stamp_len.alias("stamp_len"),
        "cand",
        "line",
    )
    gap = frame.select(
        (pl.col("naive").is_not_null() & pl.col("ts").is_null()).arg_true()
    ).to_series()
    if gap.len():
        zone = ZoneInfo(tz)
        idx = gap.to_list()
        fixed = [_local_us(v, zone) for v in frame["naive"].gather(idx).to_list()]
        frame = frame.with_columns(frame["ts"].scatter(idx, fixed))
    # a time outside the plausible range (timeutil.in_range) is a broken clock: the line
    # inherits the time above it, like a line without a stamp
    frame = frame.with_columns(
        pl.when(pl.col("ts").is_between(TS_MIN_US, TS_MAX_US, closed="left"))
        .then(pl.col("ts")).alias("ts"))
    ts_filled = pl.col("ts").forward_fill()
    if file_ids is not None:
        frame = frame.with_columns(pl.Series("file", file_ids))
        ts_filled = ts_filled.over("file")
    message = pl.col("line").str.slice(pl.col("stamp_len")).str.strip_chars_start()
    return frame.select(
        ts_filled.alias("ts"),
        pl.when(pl.col("ts").is_not_null()).then(pl.lit("assumed_tz"))
        .when(ts_filled.is_not_null()).then(pl.lit("inherited"))
        .otherwise(pl.lit("untimed")).alias("quality"),
        "step",
        "loss",
        "is_step",
        "cand",
        pl.when("is_step").then(
            pl.when(message.str.len_chars() > MESSAGE_LIMIT)
            .then(message.str.slice(0, MESSAGE_LIMIT - 1) + pl.lit("…"))
            .otherwise(message)
        ).alias("message"),
    )


def _local_us(naive: dt.datetime, zone: ZoneInfo) -> int | None:
    """:func:`local_to_utc_us`, or None past the end of the calendar in ``zone``."""
    try:
        return local_to_utc_us(naive, zone)
    except ValueError:  # past the end of the calendar in this zone
        return None


# --- the parser -------------------------------------------------------------------------------

def parse(text: str, ctx: ParseContext) -> FileParse:
    """Parse one trainer log (see the module docstring)."""
    return parse_many([(split_lines(text), ctx)])[0]


def parse_many(files: Sequence[tuple[list[str], ParseContext]],
               columnar: bool = False) -> list[FileParse]:
    """Parse many trainer logs, given as their lines: :func:`line_frame` runs once over
    the lines of all files that share a time zone (see
    :mod:`faultline.pipeline.linebatch`); each file's result is what :func:`parse`
    gives for it alone. With ``columnar`` the ``train_step`` events stay columns
    (``FileParse.columns``, what :mod:`faultline.pipeline.fileparse` stores)."""
    out: list[FileParse | None] = [None] * len(files)
    by_tz: dict[str, list[int]] = {}
    for k, (_, ctx) in enumerate(files):
        by_tz.setdefault(ctx.tz, []).append(k)
    for tz, ks in by_tz.items():
        batch = LineBatch([files[k][0] for k in ks])
        ctxs = [files[k][1] for k in ks] if columnar else None
        for k, cols in zip(ks, _batch_columns(batch, tz, ctxs), strict=True):
            out[k] = fp = _parse_file(*files[k], cols)
            if cols.frame is not None and fp.lines:
                fp.columns, fp.shared_lines = cols.frame, True
    return out  # type: ignore[return-value]


@dataclass(slots=True)
class _FileColumns:
    """One file's share of the vectorized columns, as Python lists."""

    step_rows: list[int]  # 0-based rows of step lines
    steps: list
    losses: list
    messages: list
    step_ts: list
    step_quality: list
    cand_rows: list[int]  # 0-based rows Python must read
    cand_ts: list
    cand_quality: list
    frame: pl.DataFrame | None = None  # the train_step events as columns (columnar)


def _loss_json(loss: pl.Expr) -> pl.Expr:
    """A finite loss as ``json.dumps`` writes it (``repr``), null where polars' own
    text is not that: polars and ``repr`` agree from 1e-4 to 1e16 (and at zero),
    ``repr`` alone turns to exponents outside (``1e-05``, polars ``0.00001``); a
    missing loss is ``null``."""
    size = loss.abs()
    return (pl.when(loss.is_null()).then(pl.lit("null"))
            .when((size == 0) | ((size >= 1e-4) & (size < 1e16)))
            .then(loss.cast(pl.String)))


def _step_frame(steps: pl.DataFrame, rows: np.ndarray, batch: LineBatch,
                ctxs: Sequence[ParseContext]) -> pl.DataFrame:
    """The ``train_step`` events of a batch's step lines (``steps``, at global
    ``rows``) as columns (:data:`records.COLUMN_EVENTS`), with their file's index."""
    file_of = np.searchsorted(batch.starts, rows, side="right") - 1
    files = pl.Series(file_of)
    hosts = pl.Series([c.host for c in ctxs], dtype=pl.String).gather(files)
    jobs = pl.Series([c.job_id for c in ctxs], dtype=pl.String).gather(files)
    frame = steps.select(
        pl.Series("line_no", rows - batch.starts[file_of] + 1),
        pl.lit("train_step").alias("kind"), "ts", pl.col("quality").alias("ts_quality"),
        hosts.alias("host"), pl.lit(None, pl.Int32).alias("rank"), "message",
        _loss_json(pl.col("loss")).alias("_loss"), pl.col("step").cast(pl.String),
        pl.Series("file", file_of), "loss", jobs.alias("job_id"),
    )
    odd = frame["_loss"].is_null().arg_true()
    if odd.len():  # a loss polars writes otherwise than repr: written by repr
        texts = [repr(v) for v in frame["loss"].gather(odd).to_list()]
        frame = frame.with_columns(frame["_loss"].scatter(odd, texts))
    return frame.with_columns(pl.concat_str(
        pl.lit('{"loss": '), pl.col("_loss"), pl.lit(', "step": '), pl.col("step"),
        pl.lit("}")).alias("attrs")).select(*COLUMN_EVENTS, "file")


def _batch_columns(batch: LineBatch, tz: str, ctxs: Sequence[ParseContext] | None = None
                   ) -> list[_FileColumns]:
    """Each file's share of :func:`line_frame`; with ``ctxs`` (columnar) its
    ``train_step`` events as a frame instead of lists."""
    n = len(batch.files)
    if batch.total == 0:
        return [_FileColumns([], [], [], [], [], [], [], [], []) for _ in range(n)]
    frame = line_frame(batch.series, tz, batch.file_ids() if n > 1 else None)
    steps = frame.with_row_index("row").filter("is_step")
    step_rows = steps["row"].to_numpy().astype(np.int64)
    cand = frame["cand"].arg_true()
    cand_rows = cand.to_numpy().astype(np.int64)
    step_frame = None
    if ctxs is not None:
        step_frame = _step_frame(steps, step_rows, batch, ctxs)
        steps = steps.clear()
    step_cols = [steps[c].to_list() for c in ("step", "loss", "message", "ts", "quality")]
    cand_cols = [frame["ts"].gather(cand).to_list(), frame["quality"].gather(cand).to_list()]
    starts = batch.starts
    step_cut = np.searchsorted(step_rows, starts).tolist()
    cand_cut = np.searchsorted(cand_rows, starts).tolist()
    step_local = batch.split_indices(step_rows if step_frame is None else step_rows[:0])
    cand_local = batch.split_indices(cand_rows)
    out = []
    for k in range(n):
        a, b = step_cut[k], step_cut[k + 1]
        c, d = cand_cut[k], cand_cut[k + 1]
        if step_frame is None:
            out.append(_FileColumns(step_local[k], *(col[a:b] for col in step_cols),
                                    cand_local[k], *(col[c:d] for col in cand_cols)))
        else:
            part = step_frame.slice(a, b - a).drop("file") if b > a else None
            out.append(_FileColumns([], [], [], [], [], [], cand_local[k],
                                    *(col[c:d] for col in cand_cols), part))
    return out


def _parse_file(lines: list[str], ctx: ParseContext, cols: _FileColumns) -> FileParse:
    fp = FileParse(lines=len(lines), shape="python_logging")
    if not lines:
        return fp
    host, job_id = ctx.host, ctx.job_id
    events = fp.events
    events.extend(
        ParsedEvent(row + 1, "train_step", msg, ts, quality, host, None, None, None,
                    job_id, None, {"step": step, "loss": loss})
        for row, step, loss, msg, ts, quality in zip(
            cols.step_rows, cols.steps, cols.losses, cols.messages, cols.step_ts,
            cols.step_quality, strict=True)
    )
    n_steps = len(events)

    in_traceback: set[int] = set()
    for i, ts, quality in zip(cols.cand_rows, cols.cand_ts, cols.cand_quality, strict=True):
        if i in in_traceback:
            continue
        line = lines[i]
        if TRACEBACK_OPEN in line:
            block = collect_traceback(lines, i, _split)
            in_traceback.update(set(block.own) - set(block.exc_lines))
            events.append(traceback_event(block, ts, quality, None, host, job_id))
            continue
        got = classify(line)
        if got is None:
            continue
        kind, attrs = got
        stamp = _PY_STAMP.match(line)
        events.append(ParsedEvent(
            line_no=i + 1, kind=kind, message=cap(line[stamp.end():].lstrip() if stamp else line),
            ts=ts, ts_quality=quality, host=attrs.pop("node", None) or host, job_id=job_id,
            rank=attrs.pop("rank", None), attrs=attrs,
        ))
    if len(events) > n_steps and n_steps:
        events.sort(key=attrgetter("line_no"))  # two sorted runs: a linear merge
    return fp


def parse_line(line: str, ctx: ParseContext | None = None) -> list[ParsedEvent]:
    """The events of a single line read on its own (for table-driven tests)."""
    return parse(line, ctx or ParseContext(path="<line>")).events


