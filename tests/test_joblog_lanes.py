"""The job-log fast lanes (and the trainer's ``train_step`` columns) give exactly the
events of the per-line path, row for row, attrs byte for byte.

Each line below is parsed twice: in a batch large enough for the vectorized path (where
:mod:`faultline.pipeline.parsers.joblog_lanes` builds the events of the lines it
recognizes as columns) and by :func:`joblog.parse_lines` (the general, per-line path).
Every field of every event must agree, as objects, as columns, and in the tables
:func:`fileparse.parse_batch` writes (clock-backwards flags, event ids, row order, line
accounting, a grown file's window). The in-shape lines are the formats of
``tests/test_parse_joblog.py`` (PyTorch ``ProcessGroupNCCL.cpp``, NCCL ``bootstrap.cc``
wordings) and real slurmstepd and torch elastic lines (more of them, with what each
reads as, in ``tests/test_joblog_real_lines.py``); the variants are shapes a lane must
NOT take, or must take and still read the same (an earlier rule's literal in a host
name, non-ASCII digits, a tab, a 10-digit fraction, an oversized rank, a stamp
``parse_iso`` refuses, ``"`` and ``\\`` in an address, a line inside a traceback, a file
with no host of its own, one without collector stamps). Property tests: ``json_object``
against ``json.dumps``, the stamp expressions against ``parse_iso``, random hostile lane
lines and losses.
"""

from __future__ import annotations

import datetime as dt
import json
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joblog_paths import CTX, ROUTINE, T0, both, event_rows, lane_rows

from faultline.pipeline import colexpr, fileparse, resume, timeutil
from faultline.pipeline.linebatch import LineBatch
from faultline.pipeline.parsers import joblog, joblog_lanes, trainer
from faultline.pipeline.records import ParseContext
from faultline.pipeline.settings import IngestSettings

BOOT = f"{T0} node0042:2231:2290 [3] NCCL INFO Bootstrap : Using eth0:10.1.2.42<0>"
WATCH = (f"{T0} [rank27]:[E701 12:10:00.523400000 ProcessGroupNCCL.cpp:632] [Rank 27] "
         "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=482113, "
         "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for "
         "600081 milliseconds before timing out.")
PROG = (f"{T0} [rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 "
        "(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog "
        "at work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.")
# Real lines (tests/test_joblog_real_lines.py has more, with what each reads as), after
# the collector's stamp; the hostile variants below are edits of them.
# https://github.com/qiskit-community/spank-plugins/pull/17 (scancel: no reason given)
CANCEL_AT = "2025-02-13T15:47:35"
CANCEL = f"{T0} slurmstepd: error: *** STEP 3.0 ON c1 CANCELLED AT {CANCEL_AT} ***"
# Slurm's own wording (src/slurmd/slurmstepd/req.c, _handle_signal_container); no real line
# with this reason was found to quote, so job, host and time are the simulator's
CANCEL_DUE = (f"{T0} slurmstepd: error: *** JOB 1274608 ON gpu-061 CANCELLED AT "
              f"{CANCEL_AT} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
# https://github.com/pytorch/pytorch/issues/126544 (BSD-3-Clause)
ELASTIC = (f"{T0} E0517 08:24:03.805000 140617718325696 torch/distributed/elastic/"
           "multiprocessing/api.py:826] failed (exitcode: -6) local_rank: 0 (pid: 970611) of "
           "binary: /tmp/venv/bin/python3")

# (id, line, whether a lane takes it)
CASES = [
    ("bootstrap", BOOT, True),
    ("bootstrap_nospace_fqdn",
     f"{T0} gpu-a1.cluster.local:77:78 [0] NCCL INFO Bootstrap: Using ib0:10.9.0.5<0>", True),
    ("bootstrap_ipv6", f"{T0} n1:5:6 [7] NCCL INFO Bootstrap : Using ib0:fe80::1%ib0<0>", True),
    ("bootstrap_offset_stamp", BOOT.replace("Z ", "+02:00 "), True),
    ("bootstrap_local_stamp", BOOT.replace("Z ", " "), True),
    ("bootstrap_out_of_range_stamp", BOOT.replace("2024-", "1970-"), False),
    ("bootstrap_no_such_day", BOOT.replace("2024-07-01", "2023-02-29"), False),
    ("bootstrap_offset_24h", BOOT.replace("Z ", "+23:60 "), False),
    ("bootstrap_hostile_address", BOOT.replace("10.1.2.42", "a\"b\\\\c\\\"d"), True),
    ("bootstrap_host_with_rule_literal", BOOT.replace("node0042", "ChildFailedError"), False),
    ("bootstrap_host_nccl_error", BOOT.replace("node0042", "ncclSystemError"), False),
    ("bootstrap_tab_after_stamp", BOOT.replace("Z ", "Z\t"), False),
    ("bootstrap_long_fraction", BOOT.replace(".000001Z", ".0000012345Z"), False),
    ("bootstrap_arabic_digits", BOOT.replace(":2231:", ":\u0662\u0663:"), False),
    ("bootstrap_separator_char", BOOT.replace("10.1.2.42", "10.1\x1c2.42"), False),
    ("bootstrap_two_ports", BOOT.replace("<0>", "<0>x<1>"), False),
    ("bootstrap_rank_prefix", BOOT.replace("node0042:", "[rank3]:node0042:"), False),
    ("bootstrap_huge_pid", BOOT.replace(":2231:", ":1234567890123456789012:"), False),
    ("watchdog", WATCH, True),
    ("watchdog_pg", WATCH.replace("[Rank 27]", "[PG 0 Rank 27]"), False),
    ("watchdog_big_rank", WATCH.replace("[rank27]", "[rank12345678901]"), False),
    ("watchdog_negative_seq", WATCH.replace("SeqNum=482113", "SeqNum=-1"), False),
    ("watchdog_ib_literal", WATCH + " Got completion from peer", False),
    ("watchdog_warning_level", WATCH.replace("[E701", "[W701"), True),
    ("progress", PROG, True),
    ("progress_pg_named_id", PROG.replace("[PG 0 ", "[PG ID "), True),
    ("progress_guid", PROG.replace("[PG 0 (default_pg) Rank 1]", "[PG ID 2 PG GUID 3 Rank 1]"),
     False),
    ("progress_timeout", PROG.replace("Exception (either an error or timeout) detected by "
                                      "watchdog at work", "Timeout at NCCL work"), False),
    ("progress_too_long", PROG[:-1] + " " + "x" * 1200 + ".", False),
    ("cancel_step", CANCEL, True),
    ("cancel_job_due", CANCEL_DUE, True),
    ("cancel_due_no_see", CANCEL_DUE.replace(", SEE SLURMCTLD LOG FOR DETAILS", ""), True),
    ("cancel_due_two_spaces", CANCEL_DUE.replace("NODE FAILURE", "TIME  LIMIT"), True),
    ("cancel_due_one_letter", CANCEL_DUE.replace("NODE FAILURE", "X"), False),
    ("cancel_due_lowercase", CANCEL_DUE.replace("DUE TO", "DUE to"), False),
    ("cancel_no_such_day", CANCEL.replace("T15:47:35", "T24:47:35"), True),
    ("cancel_at_out_of_range", CANCEL.replace("AT 2025-", "AT 1969-"), True),
    ("cancel_at_zoned", CANCEL.replace(CANCEL_AT, CANCEL_AT + "Z"), False),
    ("cancel_no_host", CANCEL.replace("ON c1 ", ""), False),
    ("cancel_host_later_rules_literal", CANCEL.replace("ON c1", "ON ncclSystemError"), True),
    ("cancel_srun_prefix", CANCEL.replace("slurmstepd: ", "slurmstepd-c1: "), False),
    ("cancel_rank_prefix", CANCEL.replace("slurmstepd", "[rank3]:slurmstepd"), False),
    ("elastic_failed", ELASTIC, True),
    ("elastic_failed_positive", ELASTIC.replace("exitcode: -6", "exitcode: 1"), True),
    ("elastic_failed_unknown_signal", ELASTIC.replace("exitcode: -6", "exitcode: -99"), True),
    ("elastic_failed_sigkill", ELASTIC.replace("exitcode: -6", "exitcode: -9"), True),
    ("elastic_failed_minus_zero", ELASTIC.replace("exitcode: -6", "exitcode: -0"), True),
    ("elastic_failed_no_binary", ELASTIC.split(" of binary")[0], False),
    ("elastic_failed_binary_rule_literal", ELASTIC + "/ChildFailedError", True),
    ("elastic_failed_binary_later_rules_literal", ELASTIC + "/ncclInternalError", True),
    ("elastic_failed_nccl_prefix", ELASTIC.replace("E0517 ", "n1:5:6 [7] E0517 "), False),
    ("elastic_failed_arabic_digits", ELASTIC.replace("pid: 970611", "pid: \u0663"), False),
]
@pytest.mark.parametrize(("line", "taken"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_lane_reads_a_line_as_the_general_path_does(line, taken):
    lines = [*ROUTINE, line, *ROUTINE[:3]]
    fast, slow = both(lines, CTX)
    assert fast == slow
    assert (len(ROUTINE) in lane_rows(lines)) is taken


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin"])
def test_a_zone_less_stamp_takes_a_lane_only_in_utc(tz):
    line = BOOT.replace("Z ", " ")
    lines = [*ROUTINE, line, *ROUTINE[:3]]
    ctx = ParseContext(path=CTX.path, host=CTX.host, job_id=CTX.job_id, tz=tz)
    fast, slow = both(lines, ctx)
    assert fast == slow and fast[0][5] == "assumed_tz"
    assert (len(ROUTINE) in lane_rows(lines, tz == "UTC")) is (tz == "UTC")



@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles", "Europe/Berlin"])
@pytest.mark.parametrize("at", ["2024-07-01T12:00:02", "2024-03-10T02:30:00",  # LA's gap
                                "2024-11-03T01:30:00", "2024-10-27T02:30:00",  # folds
                                "2024-02-30T01:00:00", "1999-12-31T23:30:00"])
def test_a_cancel_lines_local_time_reads_in_the_files_zone(tz, at):
    lines = [*ROUTINE, CANCEL.replace(CANCEL_AT, at), *ROUTINE[:3]]
    ctx = ParseContext(path=CTX.path, host=CTX.host, job_id=CTX.job_id, tz=tz)
    fast, slow = both(lines, ctx)
    assert fast == slow
    batch = LineBatch([lines])
    hits = batch.series.str.contains(joblog.CANDIDATE_RE).arg_true().to_numpy()
    frame = joblog_lanes.lane_frame(batch, hits, joblog._RULE_CHECKS, np.array([True]),
                                    np.array([tz == "UTC"]), [tz])
    assert frame["row"].to_list() == [len(ROUTINE)]

def test_lanes_are_used_and_agree_in_a_batch_of_many_files():
    files = [([*ROUTINE[:k], BOOT, WATCH, PROG, *ROUTINE[:5]],
              ParseContext(path=f"jobs/1/n{k}.log", host=f"n{k}", job_id="1"))
             for k in range(1, 40)]
    many = joblog.parse_many(files)
    for (lines, ctx), fp in zip(files, many, strict=True):
        assert event_rows(fp) == event_rows(joblog.parse_lines(lines, ctx))
        assert [e.kind for e in fp.events] == ["nccl_bootstrap", "nccl_watchdog",
                                               "nccl_watchdog_progress"]


def test_lanes_without_lines_leave_the_frame_as_one_with_every_lane_would_be():
    """A lane whose anchor no line holds is skipped (most batches hold two or three
    lanes' lines); the frame keeps its columns and types whichever lanes had lines,
    and a batch whose candidates no lane takes gives the empty frame."""
    other = f"{T0} [rank3]:RuntimeError: NCCL error: unhandled system error"
    def frame(lines):
        batch = LineBatch([lines])
        hits = batch.series.str.contains(joblog.CANDIDATE_RE).arg_true().to_numpy()
        assert len(hits)
        return joblog_lanes.lane_frame(batch, hits, joblog._RULE_CHECKS, np.array([True]),
                                       np.array([True]))
    full = frame([*ROUTINE, BOOT, WATCH, PROG, CANCEL, ELASTIC])
    assert full["kind"].to_list() == ["nccl_bootstrap", "nccl_watchdog",
                                      "nccl_watchdog_progress", "job_cancelled",
                                      "process_exit"]
    for lines in ([*ROUTINE, BOOT], [*ROUTINE, CANCEL, other], [*ROUTINE, other]):
        got = frame(lines)
        assert got.schema == full.schema and got.columns == list(joblog_lanes.FRAME_COLUMNS)
        assert got.height == sum(ln in (BOOT, CANCEL) for ln in lines)


@pytest.mark.parametrize("ctx", [
    ParseContext(path="jobs/81234/unknown.log", job_id="81234"),  # no host of its own
    CTX,
], ids=["hostless", "host"])
def test_lane_lines_inside_a_traceback_and_hostless_files_agree(ctx):
    lines = [*ROUTINE, f"{T0} Traceback (most recent call last):", f"{T0}   {BOOT}", WATCH,
             f"{T0} RuntimeError: boom", PROG, *ROUTINE[:3]]
    fast, slow = both(lines, ctx)
    assert fast == slow


def test_a_file_without_collector_stamps_takes_the_general_path():
    bare = [ln.split(" ", 1)[1] for ln in ROUTINE] + [BOOT.split(" ", 1)[1], BOOT]
    fast, slow = both(bare, CTX)
    assert fast == slow


def test_every_rule_before_a_lane_has_literals():
    for lane in joblog_lanes.LANES.values():
        assert joblog_lanes.earlier_needles(lane.rule_id, joblog._RULE_CHECKS) is not None


# --- the batch's tables: columns and the per-line path give the same rows -----------------

def _general_many(files):
    return [joblog.parse_lines(lines, ctx) for lines, ctx in files]


def _tables(items, settings=None, general=False):
    settings = settings or IngestSettings()
    with pytest.MonkeyPatch.context() as mp:
        if general:
            mp.setitem(fileparse.BATCH_PARSERS, "job", _general_many)
        got = fileparse.parse_batch(items, settings)
    return got.files.to_pylist(), got.events.to_pylist()


def _stamp(line: str, stamp: str) -> str:
    return stamp + line[len(T0):]


def _mixed_log() -> list[str]:
    """Lane lines among general ones: a clock going back (on a lane line, on a general
    line, and after an inherited one), a traceback with another rank's lane lines
    inside it, lane-shaped lines the lanes refuse, a lane line after the traceback."""
    back = "2024-07-01T11:59:00.000000Z"
    return [
        *ROUTINE[:70], BOOT, _stamp(WATCH, back), f"{T0} [rank3]:exitcode  : 1",
        "[rank3]: no stamp here: exitcode  : 2",
        _stamp(PROG, "2024-07-01T11:58:00.000000Z"),
        f"{T0} [rank2]:Traceback (most recent call last):",
        f'{T0} [rank2]:  File "/train.py", line 10, in <module>',
        WATCH.replace("[rank27]", "[rank5]"), PROG,
        f"{T0} [rank2]:RuntimeError: CUDA error: an illegal memory access",
        BOOT.replace("2024-", "1970-"), BOOT.replace("Z ", "+23:60 "),
        _stamp(BOOT, "2024-07-01T12:00:04.5+02:00"), *ROUTINE[:5],
        _stamp(WATCH, "2024-07-01T12:30:00.000000Z"), _stamp(PROG, "2024-07-01 12:00:01"),
        _stamp(BOOT, "2024-07-01T12:29:58.500000Z"),  # 1.5 s back: flagged
        _stamp(PROG, "2024-07-01T12:29:59.500000Z"),  # 0.5 s back: not
    ]


def _item(path: str, lines: list[str]) -> tuple:
    return path, ("\n".join(lines) + "\n").encode(), 1_719_900_000.0


@pytest.mark.parametrize("tz", ["UTC", "America/Los_Angeles"])
def test_the_batch_tables_equal_the_per_line_paths_row_for_row(tz):
    mixed = _mixed_log()
    items = [
        _item("jobs/81234/node0007.log", mixed),
        _item("jobs/81234/node0008.log", [*ROUTINE, BOOT, WATCH, PROG]),
        _item("jobs/81234/slurm-81234.out", [ln[len(T0) + 1:] for ln in mixed]),
        _item("jobs/81234/node0009.log", ROUTINE),
        _item("jobs/81234/node0010.log", [*ROUTINE[:3], BOOT]),  # too small for lanes
    ]
    settings = IngestSettings(tz=tz)
    files, events = _tables(items, settings)
    want_files, want_events = _tables(items, settings, general=True)
    assert files == want_files
    assert events == want_events
    attrs = [json.loads(e["attrs"]) for e in events if e["path"].endswith("node0007.log")]
    assert sum("clock_backwards_us" in a for a in attrs) >= 2


def test_a_grown_files_window_shifts_the_column_events():
    lines = _mixed_log()
    path, data, mtime = _item("jobs/81234/node0007.log", lines)
    read_to, prefix, _sha = resume.offsets(data)
    later = "2024-07-01T12:40:00.000000Z"
    grown = [*lines, *ROUTINE[:80], _stamp(BOOT, later), _stamp(WATCH, later),
             _stamp(PROG, "2024-07-01T11:00:00.000000Z")]
    n = len(lines)
    state = resume.Resume(read_to=read_to, prefix_sha256=prefix, lines=n, restart=n - 3,
                          window=n - 12, source="job", shape="collector",
                          prior_max_ts=1_719_837_000_000_000).to_json()
    item = (path, _item(path, grown)[1], mtime, None, state)
    got = _tables([item])
    want = _tables([item], general=True)
    assert got == want
    files, events = got
    assert files[0]["lines"] == len(grown)
    assert min(e["line_no"] for e in events) >= n - 3
    assert [e["line_no"] for e in events][-3:] == [len(grown) - 2, len(grown) - 1,
                                                    len(grown)]
    assert "clock_backwards_us" in events[-1]["attrs"]
    assert all(e["event_id"].endswith(f":{e['line_no']}:0") for e in events[-3:])


# --- attrs JSON: the expressions write what json.dumps writes -----------------------------

ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(ASCII, min_size=1, max_size=20), st.lists(st.integers(-2**62, 2**62),
                                                          min_size=1, max_size=20))
def test_json_object_is_json_dumps_byte_for_byte(texts, ints):
    n = min(len(texts), len(ints))
    frame = pl.DataFrame({"s": texts[:n], "i": ints[:n]}, schema={"s": pl.String,
                                                                 "i": pl.Int64})
    got = frame.select(colexpr.json_object({
        "zeta": ("str", pl.col("s")), "alpha": ("int", pl.col("i")),
        "mid": ("str", pl.lit("c10d.x")),
    }).alias("j"))["j"].to_list()
    assert got == [json.dumps({"zeta": s, "alpha": i, "mid": "c10d.x"}, sort_keys=True,
                              default=str) for s, i in zip(texts, ints, strict=False)]


ADDRESS = st.text(alphabet=[chr(c) for c in range(0x21, 0x7F) if chr(c) != "<"],
                  min_size=1, max_size=64)
STAMPS = st.builds(
    lambda t, sep, frac, zone: t.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + frac + zone,
    st.datetimes(min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2110, 1, 1)),
    st.sampled_from("T "), st.sampled_from(["", ".5", ",123", ".123456", ".123456789"]),
    st.sampled_from(["Z", "", "+02:00", "-0530", "+23:59", "-24:00", "+00:99"]))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(STAMPS, ADDRESS, st.sampled_from([BOOT, WATCH, PROG])),
                min_size=1, max_size=6))
def test_lane_lines_with_hostile_fields_agree_with_the_general_path(shapes):
    lines = list(ROUTINE)
    for stamp, address, line in shapes:
        lines.append(stamp + line[len(T0):].replace("10.1.2.42", address))
    fast, slow = both(lines, CTX)
    assert fast == slow
    files, events = _tables([_item("jobs/81234/node0007.log", lines)])
    assert (files, events) == _tables([_item("jobs/81234/node0007.log", lines)],
                                      general=True)


# a reason as slurmstepd might word it, hostile: commas, stars, runs of spaces
DUE = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ ,*", min_size=1, max_size=30)
AT = st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\Z",
                   fullmatch=True)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(AT, DUE, ADDRESS, st.integers(-70, 300)), min_size=1, max_size=6),
       st.sampled_from(["UTC", "Europe/Berlin"]))
def test_cancel_and_exit_lines_with_hostile_fields_agree_with_the_general_path(shapes, tz):
    lines = list(ROUTINE)
    for at, due, binary, code in shapes:
        lines.append(CANCEL_DUE.replace(CANCEL_AT, at)
                     .replace("NODE FAILURE", due))
        lines.append(CANCEL.replace(CANCEL_AT, at))
        lines.append(ELASTIC.replace("/tmp/venv/bin/python3", binary)
                     .replace("exitcode: -6", f"exitcode: {code}"))
    ctx = ParseContext(path=CTX.path, host=CTX.host, job_id=CTX.job_id, tz=tz)
    fast, slow = both(lines, ctx)
    assert fast == slow
    assert set(range(len(ROUTINE), len(lines))) == lane_rows(lines, tz == "UTC") | {
        r for r in range(len(ROUTINE), len(lines), 3) if "DUE TO" in lines[r]}
    item = _item("jobs/81234/node0007.log", lines)
    settings_ = IngestSettings(tz=tz)
    assert _tables([item], settings_) == _tables([item], settings_, general=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), ASCII),
                          st.one_of(st.none(), st.integers(-2**62, 2**62))),
                min_size=1, max_size=20))
def test_json_object_writes_nulls_and_leaves_out_missing_keys_as_json_dumps(values):
    frame = pl.DataFrame(values, schema={"s": pl.String, "i": pl.Int64}, orient="row")
    got = frame.select(colexpr.json_object({
        "a": ("int?", pl.col("i")), "b": ("str-", pl.col("s")), "c": ("str?", pl.col("s")),
        "d": ("int-", pl.col("i")),
    }).alias("j"))["j"].to_list()
    want = []
    for text, num in values:
        d = {"a": num, "c": text}
        if text is not None:
            d["b"] = text
        if num is not None:
            d["d"] = num
        want.append(json.dumps(d, sort_keys=True))
    assert got == want


# --- stamps: the expressions read what parse_iso reads ------------------------------------

LAYOUT = st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                       r"(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?\Z", fullmatch=True)
LEAP = st.builds(lambda s: s[:17] + "60" + s[19:], STAMPS)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(LAYOUT, STAMPS, LEAP), min_size=1, max_size=30), st.booleans())
def test_stamps_read_as_parse_iso_reads_them(stamps, utc_local):
    frame = pl.DataFrame({"stamp": stamps, "utc": [utc_local] * len(stamps),
                          "i": range(len(stamps))})
    got = colexpr.with_iso_us(frame, "stamp", "utc").sort("i")
    want = []
    for s in stamps:
        p = timeutil.parse_iso(s, ZoneInfo("UTC"))
        ok = p is not None and timeutil.in_range(p[0]) and (p[1] or utc_local)
        want.append(p[0] if ok else None)
    assert got["ts"].to_list() == want
    for s, z, t in zip(stamps, got["zoned"].to_list(), want, strict=True):
        if t is not None:
            assert z is timeutil.parse_iso(s, ZoneInfo("UTC"))[1]


@pytest.mark.parametrize("stamp", [
    "2024-07-01T23:59:60.000000Z", "2024-07-01T24:00:00.000000Z", "2023-02-29T00:00:00.000000Z",
    "2024-04-31T00:00:00.000000Z", "2024-00-10T00:00:00.000000Z", "1999-12-31T23:59:59.999999Z",
    "2100-01-01T00:00:00.000000Z", "2024-07-01T12:00:03.000001Z", "2024-07-01 23:59:60Z",
    "2024-07-01T12:00:03+24:00", "2024-07-01T12:00:03-23:59", "2024-07-01T12:00:03,1234567Z",
])
def test_hostile_stamps_read_as_parse_iso_reads_them(stamp):
    got = colexpr.with_iso_us(pl.DataFrame({"stamp": [stamp], "utc": [True]}), "stamp",
                              "utc")["ts"].to_list()
    p = timeutil.parse_iso(stamp, ZoneInfo("UTC"))
    assert got == [p[0] if p is not None and timeutil.in_range(p[0]) else None]


def test_a_batch_of_lane_events_only_equals_the_per_line_paths():
    lines = [*ROUTINE, BOOT, WATCH, _stamp(PROG, "2024-07-01T11:00:00.000000Z")]
    items = [_item("jobs/81234/node0008.log", lines)]
    got = _tables(items)
    assert got == _tables(items, general=True)
    assert len(got[1]) == 3 and "clock_backwards_us" in got[1][2]["attrs"]


# --- the trainer's train_step events as columns -------------------------------------------

def _trainer_tables(items, settings=None, general=False):
    settings = settings or IngestSettings()
    with pytest.MonkeyPatch.context() as mp:
        if general:
            mp.setitem(fileparse.BATCH_PARSERS, "trainer", trainer.parse_many)
        got = fileparse.parse_batch(items, settings)
    return got.files.to_pylist(), got.events.to_pylist()


def _train_log(losses) -> list[str]:
    out = ["starting up (no time yet)", "step=1 loss=2.5 before any time"]
    for n, loss in enumerate(losses, 2):
        out.append(f"2024-07-01 11:{n % 60:02d}:00,004 INFO step={n} loss={loss} grad_norm=0.4")
    out += [
        "2024-07-01 11:30:00,002 ERROR non-finite loss (nan) at step 90",
        "2024-07-01 11:30:00,002 INFO step=90 loss=nan grad_norm=0.4",
        "2024-07-01 11:20:00,002 INFO step=91 loss=1.5",  # clock back 10 min
        "2024-07-01 11:20:00,003 INFO checkpoint saved step=91 path=/ckpt/s91 seconds=4",
        "2024-07-01 11:20:01,000 ERROR Traceback (most recent call last):",
        '  File "/train.py", line 3, in <module>',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "step=92 loss=1.25 (no stamp: inherited)",
        "2024-07-01 11:19:59,000 INFO step=93 loss=1e-05",  # back 2 s, after an inherited
    ]
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.sampled_from([1e-05, 2.9e20, 0.0001, 1e16, -0.0, 3.0])),
                min_size=1, max_size=80), st.sampled_from(["UTC", "America/New_York"]))
def test_train_step_columns_equal_the_objects_row_for_row(losses, tz):
    items = [_item("jobs/81234/train.log", _train_log(losses)),
             _item("jobs/81235/train.log", _train_log(losses[::-1])),
             _item("jobs/81236/train.log", ["2024-07-01 11:00:00,004 INFO hello"])]
    got = _trainer_tables(items, IngestSettings(tz=tz))
    assert got == _trainer_tables(items, IngestSettings(tz=tz), general=True)
    kinds = [e["kind"] for e in got[1]]
    assert kinds.count("train_step") >= len(losses) and "nonfinite_loss" in kinds
    assert {f["source"] for f in got[0]} == {"trainer"}
