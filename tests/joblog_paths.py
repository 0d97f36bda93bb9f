"""The two ways a job-log line is read, side by side, for the lane tests.

A batch large enough for the vectorized path builds the events of the lines a lane of
:mod:`faultline.pipeline.parsers.joblog_lanes` takes as columns; :func:`joblog.parse_lines`
is the general, per-line path. :func:`both` parses one file both ways (and as columns)
and checks what must agree whatever the line; :func:`lane_rows` says which rows a lane
took, so a test can tell a line read by a lane from one left to the general path.
"""

from __future__ import annotations

import numpy as np

from faultline.pipeline.fileparse import attrs_json
from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import joblog, joblog_lanes
from faultline.pipeline.records import ParseContext

CTX = ParseContext(path="jobs/81234/node0007.log", host="node0007", job_id="81234",
                   job_window=(1_719_835_200_000_000, 1_719_900_000_000_000))
T0 = "2024-07-01T12:00:03.000001Z"  # the collector's stamp, prefixed to every line
# enough routine lines around a line under test for the file to take the batch path
ROUTINE = [f"{T0} [rank0]:step 12 ok"] * (joblog.SMALL_FILE_LINES + 8)


def row(e) -> tuple:
    """One event as a comparable tuple, attrs as stored."""
    return (e.line_no, e.line_end, e.kind, e.message, e.ts, e.ts_quality, e.host, e.xid,
            e.device, e.job_id, e.rank, attrs_json(e.attrs))


def event_rows(fp) -> list[tuple]:
    return [row(e) for e in fp.events]


def columnar_rows(fp) -> list[tuple]:
    """A columnar parse's events (objects and columns) in line order, attrs as stored."""
    rows = event_rows(fp)
    if fp.columns is not None:
        rows += [(line_no, line_no, kind, message, ts, quality, host, None, None, job_id,
                  rank, attrs)
                 for line_no, kind, ts, quality, host, rank, message, attrs, job_id
                 in fp.columns.select(joblog_lanes.EVENT_COLUMNS).iter_rows()]
    return sorted(rows, key=lambda r: r[0])


def both(lines: list[str], ctx: ParseContext) -> tuple[list[tuple], list[tuple]]:
    """(batched, with lanes; general path alone) events of one file; the batched
    parse as objects and as columns must agree, attrs byte for byte."""
    fast = joblog.parse_many([(lines, ctx)])[0]
    cols = joblog.parse_many([(lines, ctx)], columnar=True)[0]
    slow = joblog.parse_lines(lines, ctx)
    assert fast.lines == slow.lines and fast.event_lines == slow.event_lines
    assert cols.event_lines == slow.event_lines
    assert columnar_rows(cols) == event_rows(fast)
    return event_rows(fast), event_rows(slow)


def lane_rows(lines: list[str], tz_utc: bool = True) -> set[int]:
    """The rows of a one-file batch a lane takes."""
    batch = LineBatch([lines])
    hits = batch.series.str.contains(joblog.CANDIDATE_RE).arg_true().to_numpy()
    frame = joblog_lanes.lane_frame(batch, hits, joblog._RULE_CHECKS, np.array([True]),
                                    np.array([tz_utc]))
    return set(frame["row"].to_list())
