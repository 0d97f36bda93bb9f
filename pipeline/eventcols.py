"""Events kept as columns, from a file's parse to the batch's ``events`` table.

The job-log lanes (:mod:`faultline.pipeline.parsers.joblog_lanes`) give most job-log
events as a polars frame per file (``FileParse.columns``) instead of one Python object
each. Here they get what :mod:`faultline.pipeline.fileparse` gives the object events:
the clock-backwards flag (:func:`flag_clock_backwards`, one column pass over the
batch's files), then the file's identity columns and ``event_id``, and a place among
the batch's other rows (:class:`LaneParts`): each file's rows in the order the
per-line path made them, so the table is the one it would have built, row for row.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa

from faultline.pipeline.records import FileParse
from faultline.schemas.tables import EVENTS

BACKWARDS_US = 1_000_000  # a clock that goes back by more than this is flagged
# what flag_clock_backwards reads of the column events, for a batch that has none
_NO_COLUMNS = pl.DataFrame(schema={"ts": pl.Int64, "ts_quality": pl.String,
                                   "line_no": pl.Int64})


def flag_clock_backwards(items: list[tuple[FileParse, int | None]]) -> None:
    """The clock check of every ``(file's parse, last)`` of a batch at once, for the
    events kept as objects and as columns alike: in each file's line order, an event
    with a time of its own (not ``inherited``) more than a second before the largest
    such time above it (or ``last``, a grown window's) gets
    ``attrs["clock_backwards_us"]``. The objects' attrs are set in place, the columns'
    rewritten (flagged rows are rare)."""
    refs, gen_k, gen_line, gen_ts = [], [], [], []
    for k, (fp, _last) in enumerate(items):
        for e in fp.events:
            if e.ts is None or e.ts_quality == "inherited":
                continue
            refs.append(e)
            gen_k.append(k)
            gen_line.append(e.line_no)
            gen_ts.append(e.ts)
    heights = [0 if fp.columns is None else fp.columns.height for fp, _ in items]
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum(heights, out=offsets[1:])
    lanes = gathered([fp for fp, _ in items])
    lanes = _NO_COLUMNS if lanes is None else lanes
    lane_k = np.repeat(np.arange(len(items), dtype=np.int64), heights)
    timed = (lanes["ts"].is_not_null() & (lanes["ts_quality"] != "inherited")).to_numpy()
    lane_i = np.flatnonzero(timed)  # the timed column events, by place in ``lanes``
    n_lane, n_gen = len(lane_i), len(refs)
    # one row per timed event (column ones first: a line's first event), and one
    # before each file's first line for its ``last``
    with_prior = [k for k, (_, last) in enumerate(items) if last is not None]
    k = np.concatenate([lane_k[lane_i], np.asarray(gen_k, dtype=np.int64),
                        np.asarray(with_prior, dtype=np.int64)])
    line = np.concatenate([lanes["line_no"].to_numpy()[lane_i],
                           np.asarray(gen_line, dtype=np.int64),
                           np.zeros(len(with_prior), np.int64)])
    lane_ts = lanes["ts"].fill_null(0).to_numpy()  # (with nulls: floats)
    ts = np.concatenate([lane_ts[lane_i], np.asarray(gen_ts, dtype=np.int64),
                         np.asarray([items[j][1] for j in with_prior], dtype=np.int64)])
    # the events' own order among themselves on a line (a stable sort's)
    seq = np.arange(len(k), dtype=np.int64)
    order = np.lexsort((seq, line, k))
    k, ts, seq = k[order], ts[order], seq[order]
    # the largest time above each row within its file: a running maximum of the times'
    # ranks lifted by file (every file's above every earlier file's), shifted a row
    values, rank = np.unique(ts, return_inverse=True)
    lift = k * len(values)
    above = np.zeros_like(rank)
    above[1:] = np.maximum.accumulate(rank + lift)[:-1]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    last = values[np.clip(above - lift, 0, len(values) - 1)]
    hit = ~first & (seq < n_lane + n_gen) & (ts < last - BACKWARDS_US)
    flagged = zip(k[hit].tolist(), seq[hit].tolist(), ts[hit].tolist(), last[hit].tolist(),
                  strict=True)
    rewrite: dict[int, dict[int, int]] = {}
    for f, i, t, before in flagged:
        if i >= n_lane:
            refs[i - n_lane].attrs["clock_backwards_us"] = before - t
        else:
            rewrite.setdefault(f, {})[int(lane_i[i]) - int(offsets[f])] = before - t
    for f, rows in rewrite.items():
        fp = items[f][0]
        assert fp.columns is not None
        attrs = fp.columns["attrs"].to_list()
        for i, amount in rows.items():
            attrs[i] = json.dumps({**json.loads(attrs[i]), "clock_backwards_us": amount},
                                  sort_keys=True, default=str)
        fp.columns = fp.columns.with_columns(pl.Series("attrs", attrs, dtype=pl.String))


def gathered(fps: list[FileParse]) -> pl.DataFrame | None:
    """The rows of every ``fps[k].columns`` in turn, as one frame (None: there are
    none). Runs of consecutive slices of one batch frame (``FileParse.column_span``)
    are taken as one slice of it: a batch of 1,024 job logs is then one slice, where
    concatenating their frames cost 3-4 us a file, twice a batch."""
    pieces: list[pl.DataFrame] = []
    run: pl.DataFrame | None = None  # the batch frame of the current run
    start = end = 0
    for fp in fps:
        cols = fp.columns
        if cols is None or not cols.height:
            continue
        span = fp.column_span
        if span is not None and span[2] is cols:
            if span[0] is run and span[1] == end:
                end += cols.height
                continue
            if run is not None:
                pieces.append(run.slice(start, end - start))
            run, start, end = span[0], span[1], span[1] + cols.height
            continue
        if run is not None:
            pieces.append(run.slice(start, end - start))
            run = None
        pieces.append(cols)
    if run is not None:
        pieces.append(run.slice(start, end - start))
    if not pieces:
        return None
    return pieces[0] if len(pieces) == 1 else pl.concat(pieces, rechunk=False)


class LaneParts:
    """The column events of a batch's files, and what their rows need of the file."""

    def __init__(self) -> None:
        self.files: list[int] = []  # the file's row in the batch's ``files``
        self.parses: list[FileParse] = []  # its parse, with the columns
        self.heights: list[int] = []
        self.paths: list[str] = []
        self.shas: list[str] = []
        self.sources: list[str] = []

    def add(self, file_row: int, fp: FileParse, path: str, sha: str, source: str) -> None:
        """A file whose parse has column events (``fp.columns``)."""
        assert fp.columns is not None
        self.files.append(file_row)
        self.parses.append(fp)
        self.heights.append(fp.columns.height)
        self.paths.append(path)
        self.shas.append(sha)
        self.sources.append(source)

    def table(self) -> pa.Table:
        """The column events as ``events`` rows (``event_id``: ``<sha[:20]>:<line>:0``,
        a lane line holding one event)."""
        local = pl.Series(np.repeat(np.arange(len(self.parses)), self.heights))
        rows = gathered(self.parses)
        assert rows is not None
        frame = rows.rechunk().with_columns(
            pl.Series(self.paths, dtype=pl.String).gather(local).alias("path"),
            pl.Series(self.shas, dtype=pl.String).gather(local).alias("sha256"),
            pl.Series(self.sources, dtype=pl.String).gather(local).alias("source"),
        )
        out = frame.select(
            pl.concat_str(pl.col("sha256").str.slice(0, 20), pl.lit(":"),
                          pl.col("line_no").cast(pl.String), pl.lit(":0")).alias("event_id"),
            pl.col("ts").cast(pl.Datetime("us", "UTC")),
            "ts_quality", "host", "source", "kind",
            pl.lit(None, pl.Int32).alias("xid"), pl.lit(None, pl.Int32).alias("gpu_index"),
            pl.lit(None, pl.String).alias("gpu_serial"), pl.lit(None, pl.String).alias("device"),
            "job_id", "message", "path", "line_no", pl.col("line_no").alias("line_end"),
            "sha256", pl.col("rank").cast(pl.Int32), "attrs",
        )
        return pa.Table.from_batches(out.to_arrow().cast(EVENTS.arrow_schema).to_batches(),
                                     schema=EVENTS.arrow_schema)

    def merge(self, general: pa.Table, event_file: list[int], n_files: int) -> pa.Table:
        """``general`` (the object events' rows, ``event_file`` their files' rows) and
        the column events in one table: a file with column events has its rows in line
        order (the per-line path's), every other file's rows stay as they are."""
        lanes = self.table()
        gen_file = np.asarray(event_file, dtype=np.int64)
        has_lanes = np.zeros(n_files, dtype=bool)
        has_lanes[self.files] = True
        gen_line = general.column("line_no").to_numpy()
        file_key = np.concatenate([np.repeat(
            np.asarray(self.files, dtype=np.int64), self.heights),
            gen_file])
        line_key = np.concatenate([lanes.column("line_no").to_numpy(),
                                   np.where(has_lanes[gen_file], gen_line, 0)])
        # column events first on a line (a line's first event), then the others in order
        seq = np.arange(len(file_key), dtype=np.int64)
        order = np.lexsort((seq, line_key, file_key))
        return pa.concat_tables([lanes, general]).take(pa.array(order))
