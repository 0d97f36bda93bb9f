"""Slurm parsers: sacct dumps (and attempts), the slurmctld log. Table-driven."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from accounting import check_accounting

from faultline.pipeline.parsers import sacct, slurmctld
from faultline.pipeline.records import ParseContext, ParsedEvent
from faultline.schemas.event_kinds import EVENT_KINDS
from faultline.schemas.tables import ATTEMPTS

CTX = ParseContext(path="slurm/sacct.txt")


def local_us(text: str, tz: str = "UTC") -> int:
    t = dt.datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=ZoneInfo(tz))
    return round(t.timestamp() * 1_000_000)


# --- sacct -----------------------------------------------------------------------------------

MINIMAL = """\
JobID|JobName|State|Start|End|NodeList|ExitCode|Reason|AdminComment
81234|llama3-405b|NODE_FAIL|2024-07-01T08:00:12|2024-07-01T12:00:31|node[0000-2047]|0:0|None|
81234.batch|batch|CANCELLED|2024-07-01T08:00:12|2024-07-01T12:00:31|node0000|0:15||
81234.extern|extern|COMPLETED|2024-07-01T08:00:12|2024-07-01T12:00:31|node[0000-2047]|0:0||
81234.0|python|FAILED|2024-07-01T08:00:20|2024-07-01T12:00:30|node[0000-2047]|1:0||
81235|llama3-405b|CANCELLED by 0|2024-07-01T12:20:05|2024-07-03T02:00:00|node[0000-2047]|0:15|\
None|planned: NIC firmware rollout
"""


def test_minimal_corpus_dump():
    fp = sacct.parse(MINIMAL, CTX)
    check_accounting(fp)
    assert fp.rejects == []
    a, b = fp.events
    assert (a.kind, a.line_no, a.line_end, a.job_id) == ("job_record", 2, 5, "81234")
    assert a.attrs["state"] == "NODE_FAIL"
    assert (a.attrs["start"], a.attrs["end"]) == (local_us("2024-07-01T08:00:12"),
                                                  local_us("2024-07-01T12:00:31"))
    assert (a.ts, a.ts_quality) == (local_us("2024-07-01T12:00:31"), "assumed_tz")
    assert (a.attrs["nodes"], a.attrs["nodelist"]) == (2048, "node[0000-2047]")
    assert a.attrs["exit_code"] == "0:0" and a.attrs["reason"] is None
    assert [s["step"] for s in a.attrs["steps"]] == ["batch", "extern", "0"]
    assert a.attrs["steps"][2] == {"step": "0", "state": "FAILED", "exit_code": "1:0"}
    assert (b.attrs["state"], b.attrs["cancelled_by"]) == ("CANCELLED", "0")
    assert b.attrs["admin_comment"] == "planned: NIC firmware rollout"
    assert (b.line_no, b.line_end) == (6, 6)
    assert fp.routine_lines == 1  # the header


@pytest.mark.parametrize(("name", "text"), [
    ("parsable2_pipe",
     "JobID|State|Start|End\n1|COMPLETED|2024-07-01T00:00:00|2024-07-01T01:00:00\n"),
    ("parsable_trailing",
     "JobID|State|Start|End|\n1|COMPLETED|2024-07-01T00:00:00|2024-07-01T01:00:00|\n"),
    ("custom_two_char", "JobID|#State|#Start|#End\n"
                        "1|#COMPLETED|#2024-07-01T00:00:00|#2024-07-01T01:00:00\n"),
    ("comma", "JobID,State,Start,End\n1,COMPLETED,2024-07-01T00:00:00,2024-07-01T01:00:00\n"),
    ("reordered", "End;Start;State;JobID\n2024-07-01T01:00:00;2024-07-01T00:00:00;COMPLETED;1\n"),
    ("crlf", "JobID|State|Start|End\r\n1|COMPLETED|2024-07-01T00:00:00|2024-07-01T01:00:00\r\n"),
    ("leading_blank", "\n\nJobID|State|Start|End\n1|COMPLETED|2024-07-01T00:00:00|"
                      "2024-07-01T01:00:00"),
])
def test_header_and_delimiter_variants(name, text):
    fp = sacct.parse(text, CTX)
    check_accounting(fp)
    (e,) = fp.events
    assert (e.job_id, e.attrs["state"]) == ("1", "COMPLETED")
    assert (e.attrs["start"], e.attrs["end"]) == (local_us("2024-07-01T00:00:00"),
                                                  local_us("2024-07-01T01:00:00"))
    assert fp.rejects == []


@pytest.mark.parametrize(("job_id", "base", "step"), [
    ("81234", "81234", None),
    ("81234.batch", "81234", "batch"),
    ("81234.extern", "81234", "extern"),
    ("81234.0", "81234", "0"),
    ("123_4", "123_4", None),
    ("123_4.batch", "123_4", "batch"),
    ("123_[1-3]", "123_[1-3]", None),
    ("123+0", "123+0", None),
    ("123+1.0", "123+1", "0"),
])
def test_split_job_id(job_id, base, step):
    assert sacct.split_job_id(job_id) == (base, step)


@pytest.mark.parametrize(("raw", "state", "by"), [
    ("CANCELLED by 0", "CANCELLED", "0"),
    ("CANCELLED by 1185300516", "CANCELLED", "1185300516"),
    ("CANCELLED+", "CANCELLED", None),
    ("completed", "COMPLETED", None),
    ("OUT_OF_MEMORY", "OUT_OF_MEMORY", None),
    ("NODE_FAIL", "NODE_FAIL", None),
    (None, None, None),
])
def test_normalize_state(raw, state, by):
    assert sacct.normalize_state(raw) == (state, by)


IDS = """\
JobID|JobName|User|State|Start|End|NNodes|NodeList|Elapsed|Comment
123_4|sweep|alice|COMPLETED|2024-07-01T00:00:00|Unknown|2|n[1-2]|00:10:00|
123_4.batch|batch||COMPLETED|2024-07-01T00:00:00|2024-07-01T00:10:00|1|n1||
123_[5-9]|sweep|alice|PENDING|Unknown|Unknown|1|None assigned|00:00:00|
777+0|het|bob|RUNNING|2024-07-01T00:00:00|None|1|n3||
777+1|het|bob|RUNNING||Unknown|1|n4||
"""


def test_array_and_het_ids_and_missing_times():
    fp = sacct.parse(IDS, CTX)
    check_accounting(fp)
    got = [(e.job_id, e.attrs["state"], e.attrs["start"] is not None, e.attrs["end"],
            e.attrs["nodes"], e.ts_quality) for e in fp.events]
    assert got == [
        ("123_4", "COMPLETED", True, None, 2, "assumed_tz"),
        ("123_[5-9]", "PENDING", False, None, 1, "untimed"),
        ("777+0", "RUNNING", True, None, 1, "assumed_tz"),
        ("777+1", "RUNNING", False, None, 1, "untimed"),
    ]
    first = fp.events[0]
    assert first.ts == first.attrs["start"]  # End unknown: ts = Start
    assert first.attrs["user"] == "alice" and first.attrs["extra"] == {"Elapsed": "00:10:00",
                                                                       "NNodes": "2"}
    assert first.attrs["comment"] is None


MULTILINE = """\
JobID|JobName|State|Start|End|Comment|ExitCode
5|train|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00|line one
line two

line four|1:0
5.batch|batch|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00||1:0
6|train|COMPLETED|2024-07-01T02:00:00|2024-07-01T03:00:00|ok|0:0
"""


def test_embedded_newlines_are_rejoined():
    fp = sacct.parse(MULTILINE, CTX)
    check_accounting(fp)
    a, b = fp.events
    assert (a.line_no, a.line_end) == (2, 6)
    assert a.attrs["comment"] == "line one\nline two\n\nline four"
    assert a.attrs["exit_code"] == "1:0"
    assert (b.line_no, b.line_end, b.attrs["comment"]) == (7, 7, "ok")
    assert sacct.rejoined(MULTILINE)[1] == (
        "5|train|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00|"
        "line one\\nline two\\n\\nline four|1:0")


@pytest.mark.parametrize(("text", "rejected", "reasons", "jobs"), [
    ("JobID|State|End\n1|COMPLETED|2024-07-01T00:00:00|extra|fields\n2|FAILED|2024-07-01T00:00:00\n",
     [2], {"sacct_field_count"}, ["2"]),
    ("JobID|State|End\n1|COMPLETED\n2|FAILED|2024-07-01T00:00:00\n",
     [2], {"sacct_field_count"}, ["2"]),
    ("JobID|State|End\n1|COMPLETED|2024-07-01T00:00:00\n2|FAILED\n",
     [3], {"sacct_truncated_row"}, ["1"]),
    ("JobID|State|End\n|COMPLETED|2024-07-01T00:00:00\n", [2], {"sacct_no_jobid"}, []),
    ("AVAIL|NODES(A/I) |STATE\nup|0/0 |idle\n", [1, 2], {"sacct_no_header"}, []),
    ("Account|User|State\nroot|root|COMPLETED\n", [1, 2], {"sacct_no_header"}, []),
])
def test_malformed_rows_are_rejected(text, rejected, reasons, jobs):
    fp = sacct.parse(text, CTX)
    check_accounting(fp)
    assert sorted(r.line_no for r in fp.rejects) == rejected
    assert {r.reason for r in fp.rejects} == reasons
    assert [e.job_id for e in fp.events] == jobs


def test_steps_without_their_job_row_and_requeued_duplicates():
    text = """\
JobID|JobName|State|Start|End
9.batch|batch|FAILED|2024-07-01T00:00:00|2024-07-01T01:00:00
10|run|REQUEUED|2024-07-01T00:00:00|2024-07-01T01:00:00
10|run|COMPLETED|2024-07-01T01:05:00|2024-07-01T05:00:00
10.batch|batch|COMPLETED|2024-07-01T01:05:00|2024-07-01T05:00:00
11|other|COMPLETED|2024-07-01T00:00:00|2024-07-01T01:00:00
10.extern|extern|COMPLETED|2024-07-01T01:05:00|2024-07-01T05:00:00
"""
    fp = sacct.parse(text, CTX)
    check_accounting(fp)
    got = [(e.job_id, e.line_no, e.line_end, e.attrs["state"], e.attrs.get("from_step", False),
            [s["step"] for s in e.attrs.get("steps", [])]) for e in fp.events]
    assert got == [
        ("9", 2, 2, "FAILED", True, ["batch"]),
        ("10", 3, 3, "REQUEUED", False, []),
        ("10", 4, 5, "COMPLETED", False, ["batch", "extern"]),
        ("11", 6, 6, "COMPLETED", False, []),
    ]
    assert fp.routine_lines == 2  # header, and the detached 10.extern (folded into attrs)


def test_sacct_times_zone():
    text = "JobID|Start|End\n1|2024-11-03T01:30:00|2024-07-01T12:00:00+02:00\n"
    fp = sacct.parse(text, ParseContext(path="s", tz="America/New_York"))
    (e,) = fp.events
    assert e.attrs["start"] == local_us("2024-11-03T01:30:00-04:00")  # first occurrence
    assert (e.ts, e.ts_quality) == (local_us("2024-07-01T12:00:00+02:00"), "exact")


@pytest.mark.parametrize("text", ["", "\n", "\x00\ufffd\r\n" * 5, MINIMAL.replace("\n", "\r\n"),
                                  MINIMAL[:-40], MINIMAL.replace("NODE_FAIL", "NODE\x00FAIL")])
def test_sacct_accounting_on_dirty_input(text):
    check_accounting(sacct.parse(text, CTX))


def test_looks_like_sacct():
    assert sacct.looks_like_sacct("JobID|JobName|State")
    assert sacct.looks_like_sacct("Account|#AdminComment|#JobID|#End")
    assert not sacct.looks_like_sacct("AVAIL|ACTIVE_FEATURES|CPUS|NODES(A/I) |STATE")
    assert not sacct.looks_like_sacct("[2024-07-01T12:00:29.114] error: Nodes x not responding")


# --- attempts ----------------------------------------------------------------------------------

RUNS = """\
JobID|JobName|User|State|Start|End|NodeList|ExitCode|Reason|AdminComment
100|llama|alice|NODE_FAIL|2024-07-01T00:00:00|2024-07-01T10:00:00|n[1-4]|0:0|None|
101|llama|alice|CANCELLED by 0|2024-07-01T10:30:00|2024-07-02T10:00:00|n[1-4]|0:15|None|planned: fw
101|llama|alice|COMPLETED|2024-07-02T11:00:00|2024-07-02T20:00:00|n[1-4]|0:0|None|
102|llama|bob|FAILED|2024-07-01T05:00:00|2024-07-01T06:00:00|n9|1:0|None|
103|llama|alice|FAILED|2024-07-05T00:00:00|2024-07-05T01:00:00|n[1-4]|1:0|None|
104|llama|alice|RUNNING|2024-07-05T02:00:00|Unknown|n[1-4]|0:0|None|
105|llama|alice|COMPLETED|2024-07-09T00:00:00|2024-07-09T01:00:00|n[1-4]|0:0|None|
106|llama|alice|PENDING|Unknown|Unknown|None assigned|0:0|None|
"""


def test_attempts_group_runs_by_name_user_and_24h_gaps():
    rows = sacct.attempts(sacct.parse(RUNS, CTX).events)
    assert all(list(r) == ATTEMPTS.column_names for r in rows)
    got = [(r["run"], r["job_id"], r["attempt"], r["state"]) for r in rows]
    assert got == [
        ("alice/llama", "100", 1, "NODE_FAIL"),
        ("alice/llama", "101", 2, "CANCELLED"),
        ("alice/llama", "101", 3, "COMPLETED"),  # requeued: same JobID, new attempt
        ("alice/llama#2", "103", 1, "FAILED"),  # 3 days after the run's end
        ("alice/llama#2", "104", 2, "RUNNING"),
        ("alice/llama#2", "105", 3, "COMPLETED"),  # the run is open while 104 runs
        ("bob/llama", "102", 1, "FAILED"),
    ]
    first = rows[0]
    assert (first["started_at"], first["ended_at"]) == (local_us("2024-07-01T00:00:00"),
                                                        local_us("2024-07-01T10:00:00"))
    assert (first["nodes"], first["nodelist"], first["user"]) == (4, "n[1-4]", "alice")
    assert rows[1]["admin_comment"] == "planned: fw"
    assert rows[4]["ended_at"] is None


def test_attempts_without_user_column_use_the_job_name():
    rows = sacct.attempts(sacct.parse(MINIMAL, CTX).events)
    assert [(r["run"], r["job_id"], r["attempt"]) for r in rows] == [
        ("llama3-405b", "81234", 1), ("llama3-405b", "81235", 2)]


def test_attempts_ignore_other_kinds():
    other = ParsedEvent(line_no=1, kind="node_down", message="", attrs={"start": 1})
    assert sacct.attempts([other]) == []


# --- slurmctld ----------------------------------------------------------------------------------

SCTX = ParseContext(path="slurm/slurmctld.log")

# (id, line, [(kind, host, job_id, attrs subset)])
CTLD = [
    ("not_responding_down", "[2024-07-01T12:00:29.114] error: Nodes node0042 not responding, "
     "setting DOWN",
     [("node_not_responding", "node0042", None, {"set_down": True})]),
    ("not_responding_list", "[2024-07-01T12:00:29.114] error: Nodes node[0041-0042],gpu7 not "
     "responding",
     [("node_not_responding", h, None, {"set_down": False, "nodelist": "node[0041-0042],gpu7"})
      for h in ("node0041", "node0042", "gpu7")]),
    ("killing", "[2024-07-01T12:00:31.002] Killing JobId=81234 on failed node node0042",
     [("job_killed", "node0042", "81234", {})]),
    ("killing_array", "[2024-07-01T12:00:31.002] Killing JobId=123_4(130) on failed node n7",
     [("job_killed", "n7", "123_4", {})]),
    ("requeue", "[2024-07-01T12:00:31.003] requeue job JobId=81234 due to failure of node "
     "node0042",
     [("job_requeue", "node0042", "81234", {})]),
    ("requeue_other", "[2024-07-01T12:00:31.003] Requeuing JobId=81236",
     [("job_requeue", None, "81236", {})]),
    ("unexpected_reboot", "[2024-07-01T12:14:02.870] validate_node_specs: Node node0042 "
     "unexpectedly rebooted boot_time=1719835900 last response=1719835229",
     [("node_reboot", "node0042", None, {"unexpected": True, "boot_time": 1719835900,
                                         "last_response": 1719835229})]),
    ("reboot_requested", "[2024-07-03T01:00:00.000] reboot request queued for nodes n[1-2]",
     [("node_reboot", h, None, {"unexpected": False, "phase": "requested"})
      for h in ("n1", "n2")]),
    ("reboot_complete", "[2024-07-03T01:20:00.000] Node n1 reboot complete",
     [("node_reboot", "n1", None, {"unexpected": False, "phase": "complete"})]),
    ("reason", "[2024-07-01T12:01:10.551] update_node: node node0042 reason set to: Xid 79 GPU "
     "fell off bus",
     [("node_drain", "node0042", None, {"reason": "Xid 79 GPU fell off bus"})]),
    ("state_draining", "[2024-07-01T12:01:10.552] update_node: node node0042 state set to "
     "DRAINING",
     [("node_drain", "node0042", None, {"state": "DRAINING"})]),
    ("state_drain", "[2024-07-01T12:01:10.552] update_node: node node0042 state set to DRAIN",
     [("node_drain", "node0042", None, {"state": "DRAIN"})]),
    ("state_down", "[2024-07-01T12:01:10.553] update_node: node node0042 state set to DOWN",
     [("node_down", "node0042", None, {"state": "DOWN"})]),
    ("state_idle", "[2024-07-01T13:00:00.000] update_node: node node0042 state set to IDLE",
     [("node_resume", "node0042", None, {"state": "IDLE"})]),
    ("now_responding", "[2024-07-01T13:00:00.000] Node node0042 now responding",
     [("node_resume", "node0042", None, {"rule": "ctld.now_responding"})]),
    ("returned", "[2024-07-01T13:00:00.000] node node0042 returned to service",
     [("node_resume", "node0042", None, {"rule": "ctld.returned_to_service"})]),
    ("reservation", "[2024-07-03T01:59:40.000] sched: Created reservation=maint_nic_fw "
     "start=2024-07-03T02:00:00 end=2024-07-03T02:45:00 nodes=node[0000-0002] users=root",
     [("reservation", None, None, {
         "action": "created", "name": "maint_nic_fw", "start": local_us("2024-07-03T02:00:00"),
         "end": local_us("2024-07-03T02:45:00"), "nodes": ["node0000", "node0001", "node0002"],
         "users": ["root"]})]),
    ("reservation_full", "[2024-07-03T01:59:40.000] sched: Updated reservation=maint "
     "accounts= users=root,ops nodes=n[1-2] cores=0 licenses=(null) tres=cpu=0 watts=n/a "
     "start=2024-07-03T02:00:00 end=2024-07-03T04:00:00 MaxStartDelay= flags=MAINT,IGNORE_JOBS",
     [("reservation", None, None, {"action": "updated", "users": ["root", "ops"],
                                   "flags": ["MAINT", "IGNORE_JOBS"]})]),
    ("kill", "[2024-07-03T02:00:00.410] _slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=81235 uid 0",
     [("operator_kill", None, "81235", {"uid": 0})]),
    ("routine", "[2024-07-03T02:00:00.410] _job_complete: JobId=81235 done", []),
    ("routine_sched", "[2024-07-03T02:00:00.410] sched: Allocate JobId=81236 NodeList=n1", []),
    ("state_other", "[2024-07-03T02:00:00.410] update_node: node n1 state set to FUTURE", []),
]


@pytest.mark.parametrize(("line", "want"), [c[1:] for c in CTLD], ids=[c[0] for c in CTLD])
def test_slurmctld_line(line, want):
    events = slurmctld.parse_line(line, SCTX)
    got = [(e.kind, e.host, e.job_id, {k: e.attrs.get(k) for k in attrs})
           for e, (_, _, _, attrs) in zip(events, want, strict=False)]
    assert got == want and len(events) == len(want)
    stamp = line[1:line.index("]")]
    for e in events:
        assert (e.ts, e.ts_quality, e.line_no) == (local_us(stamp), "assumed_tz", 1)
        assert e.attrs["rule"] in {rid for rid, _, _ in slurmctld.RULES}


def test_every_slurmctld_rule_has_a_case():
    seen = {e.attrs["rule"] for _, line, _ in CTLD for e in slurmctld.parse_line(line, SCTX)}
    assert seen == {rid for rid, _, _ in slurmctld.RULES}
    assert all(k in EVENT_KINDS for _, k, _ in slurmctld.RULES)
    assert set(slurmctld.STATE_KINDS.values()) <= set(EVENT_KINDS)


@pytest.mark.parametrize(("stamp", "tz", "want", "quality", "shape"), [
    ("2024-07-01T12:00:00.123", "UTC", "2024-07-01T12:00:00.123+00:00", "assumed_tz",
     "iso8601_ms"),
    ("2024-07-01T12:00:00", "UTC", "2024-07-01T12:00:00+00:00", "assumed_tz", "iso8601"),
    ("2024-07-01T12:00:00.123+00:00", "Europe/Berlin", "2024-07-01T12:00:00.123+00:00", "exact",
     "rfc5424_ms"),
    ("2024-07-01T12:00:00-05:00", "UTC", "2024-07-01T12:00:00-05:00", "exact", "rfc5424"),
    ("2024-07-01T12:00:00.123", "Europe/Berlin", "2024-07-01T12:00:00.123+02:00", "assumed_tz",
     "iso8601_ms"),
])
def test_slurmctld_time_formats(stamp, tz, want, quality, shape):
    ctx = ParseContext(path="c", tz=tz)
    fp = slurmctld.parse(f"[{stamp}] Node n1 now responding\n", ctx)
    (e,) = fp.events
    assert (e.ts, e.ts_quality, fp.shape) == (local_us(want), quality, shape)


def test_slurmctld_rejects_and_accounting():
    text = ("[2024-07-01T12:00:29.114] error: Nodes n[1-3] not responding\r\n"
            "no stamp here\r\n"
            "[2024-13-40T99:00:00] bad time\r\n"
            "[Jul 01 12:00:00] short format\r\n"
            "\r\n"
            "[2024-07-01T12:00:30.000] debug:  routine \x00\ufffd\r\n"
            "[2024-07-01T12:00:31.002] Killing JobId=1 on failed node n2")
    fp = slurmctld.parse(text, SCTX)
    check_accounting(fp)
    assert [(r.line_no, r.reason) for r in fp.rejects] == [
        (2, "no_timestamp"), (3, "bad_timestamp"), (4, "bad_timestamp")]
    assert [(e.line_no, e.host) for e in fp.events] == [(1, "n1"), (1, "n2"), (1, "n3"),
                                                       (7, "n2")]
    assert (fp.lines, fp.event_lines, fp.reject_lines, fp.routine_lines) == (7, 2, 3, 2)


@pytest.mark.parametrize("text", ["", "\n", "\x00", "[", "[]", "[2024-07-01T12:00:00"])
def test_slurmctld_tiny_inputs(text):
    check_accounting(slurmctld.parse(text, SCTX))
