"""docs/queries.md: every SQL block runs on the sample database, returns rows with the
columns the doc promises, and a few results agree with sums computed here in Python."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC

import pytest
from conftest import REPO_ROOT

from faultline import db as fdb

DOC = REPO_ROOT / "docs" / "queries.md"

# Heading of each query -> the columns it must return, in order. A query added to the
# doc without an entry here fails test_every_query_is_known.
COLUMNS = {
    "Breakdown: Table 5 for your cluster":
        ["run", "component", "category", "interruptions", "percent"],
    "Top failing GPUs": ["host", "gpu", "serial", "interruptions", "components"],
    "GPUs with the most Xid events":
        ["host", "gpu", "serial", "xid_events", "xids", "first_seen", "last_seen"],
    "Recurring culprits": ["scope", "culprit_host", "culprit_gpu", "culprit_gpu_serial",
                           "interruptions", "components"],
    "Failures per day": ["run", "day", "unexpected", "planned"],
    "Time lost by component": ["component", "interruptions", "downtime_hours",
                               "lost_work_hours", "total_hours"],
    "Mean time between failures by component":
        ["run", "component", "interruptions", "mtbf_hours"],
    "Failure rates with 95% intervals": ["run", "component", "failures", "unit", "rate",
                                         "low", "high", "per_1000_gpu_days"],
    "Interruptions per day at another size": ["run", "failures", "gpu_days",
                                              "per_1000_gpu_days", "per_running_day_at_100k",
                                              "running_minutes_between_at_100k"],
    "Effective training time": ["run", "first_step", "last_step", "days", "downtime_hours",
                                "lost_work_hours", "effective_percent", "unexpected",
                                "failures_per_day"],
    "Evidence chain of one interruption": ["role", "ts", "host", "kind", "xid", "gpu_index",
                                           "message", "path", "line_no", "event_id"],
    "Xid histogram": ["xid", "name", "role", "component", "events", "hosts"],
    "How root causes were decided":
        ["rule_id", "interruptions", "mean_confidence", "components"],
    "Lines that could not be read": ["reason", "path", "lines", "first_line"],
}


def queries() -> dict[str, str]:
    """Each ``### heading`` with the ```sql block under it."""
    found = re.findall(r"^### (.+?)\n(?:(?!^### ).)*?```sql\n(.+?)```",
                       DOC.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {heading.strip(): sql for heading, sql in found}


@pytest.fixture(scope="module")
def con(ingested_sample):
    with fdb.connect(ingested_sample, read_only=True) as c:
        yield c


@pytest.fixture(scope="module")
def results(con) -> dict[str, list[dict]]:
    out = {}
    for heading, sql in queries().items():
        rows = con.execute(sql).fetchall()
        cols = [d[0] for d in con.description]
        out[heading] = [dict(zip(cols, r, strict=True)) for r in rows]
        out[heading + " columns"] = cols  # type: ignore[assignment]
    return out


def _interruptions(con) -> list[dict]:
    rows = con.execute("SELECT * FROM interruptions").fetchall()
    cols = [d[0] for d in con.description]
    return [dict(zip(cols, r, strict=True)) for r in rows]


def test_every_query_is_known():
    assert list(queries()) == list(COLUMNS)
    # Every sql block was picked up under some heading.
    assert DOC.read_text(encoding="utf-8").count("```sql") == len(COLUMNS)


@pytest.mark.parametrize("heading", list(COLUMNS))
def test_query_runs_and_returns_its_columns(results, heading):
    assert results[heading + " columns"] == COLUMNS[heading]
    assert results[heading], f"{heading}: no rows on the sample"


def test_failures_per_day_sum_to_the_interruptions(results, con):
    rows = _interruptions(con)
    per_day = results["Failures per day"]
    assert sum(r["unexpected"] for r in per_day) == sum(not i["planned"] for i in rows)
    assert sum(r["planned"] for r in per_day) == sum(i["planned"] for i in rows)
    days = Counter(i["failed_at"].astimezone(UTC).date().isoformat() for i in rows)
    assert {r["day"]: r["unexpected"] + r["planned"] for r in per_day} == dict(days)


def test_top_failing_gpus_count_each_gpu(results, con):
    expected = Counter((i["culprit_host"], i["culprit_gpu"], i["culprit_gpu_serial"])
                       for i in _interruptions(con) if i["culprit_gpu"] is not None)
    got = {(r["host"], r["gpu"], r["serial"]): r["interruptions"]
           for r in results["Top failing GPUs"]}
    assert got == dict(expected)
    counts = [r["interruptions"] for r in results["Top failing GPUs"]]
    assert counts == sorted(counts, reverse=True)


def test_time_lost_by_component_adds_up(results, con):
    rows = _interruptions(con)
    total = sum((i["downtime_seconds"] or 0) + (i["lost_seconds"] or 0) for i in rows) / 3600
    by_component = results["Time lost by component"]
    # Each row is rounded to 0.01 h, so the sum may be off by half that per row.
    assert sum(r["total_hours"] for r in by_component) == pytest.approx(
        total, abs=0.005 * len(by_component))
    assert sum(r["interruptions"] for r in by_component) == len(rows)


def test_breakdown_counts_match_the_interruptions(results, con):
    counts = Counter(i["component"] for i in _interruptions(con))
    breakdown = results["Breakdown: Table 5 for your cluster"]
    got = {r["component"]: r["interruptions"] for r in breakdown if r["interruptions"]}
    assert got == dict(counts)


def test_xid_histogram_counts_every_xid_event(results, con):
    xids = [r[0] for r in con.execute("SELECT xid FROM events WHERE kind = 'xid'").fetchall()]
    histogram = results["Xid histogram"]
    assert sum(r["events"] for r in histogram) == len(xids)
    assert {r["xid"]: r["events"] for r in histogram} == dict(Counter(xids))
    assert all(r["name"] for r in histogram)  # the sample's Xids are all in the catalog


def test_evidence_chain_starts_at_the_root_event(results, con):
    worst = con.execute("SELECT root_event_id FROM interruptions "
                        "ORDER BY lost_seconds DESC NULLS LAST LIMIT 1").fetchall()[0][0]
    chain = results["Evidence chain of one interruption"]
    assert chain[0]["role"] == "root" and chain[0]["event_id"] == worst
    assert "symptom" not in {r["role"] for r in chain}


def test_effective_training_time_is_the_views(results, con):
    (effective,) = con.execute("SELECT effective FROM effective_training_time").fetchall()[0]
    row = results["Effective training time"][0]
    assert row["effective_percent"] == pytest.approx(round(100 * effective, 1))
    wall_h = (row["last_step"] - row["first_step"]).total_seconds() / 3600
    lost_h = row["downtime_hours"] + row["lost_work_hours"]
    assert 100 * (wall_h - lost_h) / wall_h == pytest.approx(row["effective_percent"],
                                                            abs=0.2)


def test_failure_rates_count_every_unexpected_interruption(results, con):
    rows = _interruptions(con)
    main = Counter(i["run"] for i in rows).most_common(1)[0][0]
    got = {r["component"]: r["failures"] for r in results["Failure rates with 95% intervals"]}
    assert sum(got.values()) == sum(not i["planned"] and i["run"] == main for i in rows)
    for r in results["Failure rates with 95% intervals"]:
        assert r["low"] <= r["rate"] < r["high"], r
    totals = {r["run"]: r["failures"] for r in results["Interruptions per day at another size"]}
    assert totals == dict(Counter(i["run"] for i in rows if not i["planned"]))
