"""``faultline explain`` on the ingested sample, as a user runs it in an 80-column
terminal: every evidence message whole (wrapped, never cut), a line the cascade wrote on
many hosts printed once with the host count, and a straggler verdict with its reasoning
(which ranks reported the watchdog timeout, which never did), checked against the
events themselves."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.explain import _ranges, _shape, group_evidence

runner = CliRunner()
NARROW = {"COLUMNS": "80"}


def explain(db: Path, iid: str) -> str:
    r = runner.invoke(app, ["explain", "--db", str(db), iid], env=NARROW)
    assert r.exit_code == 0, r.output
    return r.output


def squash(text: str) -> str:
    return "".join(text.split())


def test_long_messages_are_printed_whole(ingested_sample):
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        iid, message = con.execute("""
            SELECT x.interruption_id, e.message FROM interruption_evidence x
            JOIN events e USING (event_id) WHERE x.role <> 'symptom'
            ORDER BY length(e.message) DESC, 1 LIMIT 1""").fetchall()[0]
    assert len(message) > 160  # longer than the old cut and than the terminal
    out = explain(ingested_sample, iid)
    assert squash(message) in squash(out)
    assert "…" not in out and "..." not in out
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize(("files", "wording"), [
    ("> 1", "the same line on {n} hosts"),  # each host's own log wrote it
    ("= 1", "one line naming {n} hosts"),  # slurmctld wrote one line about them all
])
def test_a_line_seen_on_many_hosts_is_shown_once_with_the_host_count(
        ingested_sample, files, wording):
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        iid, kind, n, message = con.execute(f"""
            SELECT x.interruption_id, e.kind, count(DISTINCT e.host), any_value(e.message)
            FROM interruption_evidence x JOIN events e USING (event_id)
            WHERE x.role <> 'symptom'
            GROUP BY x.interruption_id, x.role, e.kind, e.message
            HAVING count(DISTINCT e.host) > 2
               AND count(DISTINCT (e.path, e.line_no)) {files}
            ORDER BY 3 DESC, 1 LIMIT 1""").fetchall()[0]
        roles = con.execute("""
            SELECT count(DISTINCT x.role) FROM interruption_evidence x
            JOIN events e USING (event_id) WHERE x.interruption_id = ?
              AND x.role <> 'symptom' AND e.kind = ? AND e.message = ?""",
                            [iid, kind, message]).fetchall()[0][0]
    out = explain(ingested_sample, iid)
    assert squash(out).count(squash(f"{kind}: {message}")) == roles  # once per role
    assert wording.format(n=n) in " ".join(out.split())


def test_same_line_with_other_numbers_on_other_hosts_groups_too():
    rows = [{"role": "corroborating", "kind": "nccl_ib_error", "xid": None, "ts": t,
             "host": h, "event_id": f"e{t}", "message": m} for t, h, m in (
        (2, "node0014", "[2024-12-29 07:39:05] node0014:229754:229817 [3] NCCL WARN "
         "NET/IB : Got completion from peer 10.1.0.23<40835> with status=12"),
        (1, "node0000", "[2024-12-29 07:39:03] node0000:18759:18819 [0] NCCL WARN "
         "NET/IB : Got completion from peer 10.1.0.23<32999> with status=12"),
        (3, "node0000", "NCCL WARN something else entirely"))]
    groups = group_evidence(rows)
    assert [(g["hosts"], g["events"], g["identical"]) for g in groups] == [
        (["node0000", "node0014"], 2, False), (["node0000"], 1, True)]
    assert groups[0]["event_id"] == "e1"  # the earliest is the one shown
    assert _shape("Xid 79 on node1", "node1") != _shape("Xid 79 on node1", "node2")


def test_rank_ranges():
    assert _ranges([8, 0, 1, 2, 3, 10, 11]) == "0-3, 8, 10-11"
    assert _ranges([]) == ""


def test_straggler_verdict_shows_which_ranks_reported_and_which_never(ingested_sample):
    with duckdb.connect(str(ingested_sample), read_only=True) as con:
        iid, job, host, started, failed = con.execute("""
            SELECT i.interruption_id, i.job_id, coalesce(i.culprit_host, i.surfaced_host),
                   a.started_at, i.failed_at
            FROM interruptions i JOIN attempts a
              ON a.run = i.run AND a.job_id = i.job_id AND a.ended_at = i.failed_at
            WHERE i.rule_id = 'nccl.watchdog_straggler' ORDER BY 1 LIMIT 1
        """).fetchall()[0]
        per_host = dict(con.execute("""
            SELECT host, list(DISTINCT rank ORDER BY rank) FROM events
            WHERE kind = 'nccl_watchdog' AND job_id = ?
              AND ts BETWEEN ? AND ? + INTERVAL 300 SECOND GROUP BY host
        """, [job, started, failed]).fetchall())
    full = max(len(r) for r in per_host.values())
    mine = per_host.get(host, [])
    out = " ".join(explain(ingested_sample, iid).split())
    assert "why: only NCCL watchdog timeouts" in out
    assert f"so the straggler is {host}" in out
    if mine:  # reported from fewer ranks than every other host
        base = min(mine) // 8 * 8
        missing = sorted(set(range(base, base + full)) - set(mine))
        assert f"{host}: {len(mine)} of {full} (ranks {_ranges(mine)})" in out
        assert f"never reported: ranks {_ranges(missing)}" in out
    else:
        assert re.search(rf"never reported a timeout: [^;]*\b{host}\b", out)
    assert f"reported on every rank: {sum(len(r) == full for r in per_host.values())} "\
           "hosts" in out
