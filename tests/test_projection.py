"""Failure rates with exact Poisson intervals, and report --project.

The intervals are held to a reference computed here another way (a root search on
scipy's Poisson CDF, not the chi-square quantiles faultline.projection uses, nor the
SQL bisection of the failure_rates view); the 16,384-GPU identity is checked on Table 5's
published numbers, and the identity at the measured size on real databases (the ingested
sample and the ``small`` preset; the llama3 preset is too large to ingest in the test
suite); the ETTR model against hand-computed examples."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math

import duckdb
import pytest
from conftest import REPO_ROOT
from scipy.optimize import brentq
from scipy.stats import poisson
from typer.testing import CliRunner

from faultline import db as fdb
from faultline import projection as pj
from faultline import uptime
from faultline.cli import app
from faultline.schemas.ddl import all_ddl
from faultline.schemas.taxonomy import load_taxonomy

COUNTS = [0, 1, 2, 3, 7, 30, 148, 419]


def reference_interval(k: int) -> tuple[float, float]:
    """Exact 95% bounds by definition: P(X >= k | low) = 2.5%, P(X <= k | high) = 2.5%."""
    low = 0.0 if k == 0 else brentq(lambda m: poisson.sf(k - 1, m) - 0.025, 1e-12, 10 * k + 10)
    high = brentq(lambda m: poisson.cdf(k, m) - 0.025, 1e-12, 10 * k + 20)
    return low, high


@pytest.mark.parametrize("k", COUNTS)
def test_interval_matches_reference(k):
    low, high = pj.poisson_interval(k)
    ref_low, ref_high = reference_interval(k)
    assert low == pytest.approx(ref_low, rel=1e-7, abs=1e-12)
    assert high == pytest.approx(ref_high, rel=1e-7)


def test_interval_known_values():
    # Published table values (e.g. Garwood 1936; Ulm 1990): 0 -> (0, 3.689),
    # 1 -> (0.0253, 5.572), 10 -> (4.795, 18.39).
    assert pj.poisson_interval(0) == (0.0, pytest.approx(3.6889, abs=1e-4))
    assert pj.poisson_interval(1) == (pytest.approx(0.02532, abs=1e-5),
                                      pytest.approx(5.5716, abs=1e-4))
    assert pj.poisson_interval(10) == (pytest.approx(4.7954, abs=1e-4),
                                       pytest.approx(18.390, abs=1e-3))
    with pytest.raises(ValueError):
        pj.poisson_interval(-1)


def _db_with(failures: int, nodes: int = 2, days: float = 10.0) -> duckdb.DuckDBPyConnection:
    """An in-memory database with one run of one attempt and ``failures`` Faulty GPU
    interruptions (no inventory: 8 GPUs per host is assumed)."""
    con = duckdb.connect()
    for stmt in all_ddl():
        con.execute(stmt)
    fdb.load_taxonomy_tables(con, load_taxonomy())
    t0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    con.execute("INSERT INTO attempts (run, job_id, started_at, ended_at, state, nodes, "
                "nodelist, attempt) VALUES ('r', '1', ?, ?, 'COMPLETED', ?, 'n[1-2]', 1)",
                [t0, t0 + dt.timedelta(days=days), nodes])
    for i in range(failures):
        con.execute("INSERT INTO interruptions (interruption_id, run, job_id, failed_at, "
                    "planned, component, category, rule_id, confidence, taxonomy_version) "
                    "VALUES (?, 'r', '1', ?, false, 'Faulty GPU', 'GPU', 'test', 1, 'x')",
                    [f"i{i}", t0 + dt.timedelta(hours=i % 200)])
    return con


@pytest.mark.parametrize("k", COUNTS)
def test_view_interval_matches_reference(k):
    con = _db_with(k)
    row = con.execute("SELECT failures, unit, rate_per_1000, rate_low, rate_high, "
                      "gpu_days, host_days, gpus_per_host, gpus_per_host_from "
                      "FROM failure_rates WHERE component = 'Faulty GPU'").fetchone()
    failures, unit, rate, low, high, gpu_days, host_days, gph, gph_from = row
    assert (failures, unit, gph, gph_from) == (k, "gpu_days", 8, "assumed")
    assert host_days == pytest.approx(20.0) and gpu_days == pytest.approx(160.0)
    ref_low, ref_high = reference_interval(k)
    assert rate == pytest.approx(1000 * k / 160.0)
    assert low * 160.0 / 1000 == pytest.approx(ref_low, rel=1e-7, abs=1e-12)
    assert high * 160.0 / 1000 == pytest.approx(ref_high, rel=1e-7)


def test_zero_failures_rate_zero_finite_upper_bound():
    con = _db_with(3)
    rows = con.execute("SELECT component, unit, failures, rate_per_1000, rate_low, "
                       "rate_high FROM failure_rates WHERE failures = 0").fetchall()
    assert {r[0] for r in rows} == {c.component for c in load_taxonomy().components
                                    if c.kind != "planned"} - {"Faulty GPU"}
    for component, unit, _, rate, low, high in rows:
        per = 160.0 if unit == "gpu_days" else 20.0
        assert rate == 0 and low == 0, component
        assert math.isfinite(high) and high == pytest.approx(1000 * 3.68888 / per, rel=1e-4)
    data = pj.projection(con, 1000)
    # No checkpoint lines: the cost is the stated assumption, the interval unknown.
    assert data["ettr"]["checkpoint_cost_from"] == "assumed"
    assert data["ettr"]["checkpoint_cost_s"] == pj.DEFAULT_CHECKPOINT_COST_S
    assert data["ettr"]["checkpoint_interval_s"] is None
    assert data["ettr"]["projected"] is None
    zero = next(c for c in data["components"] if c["component"] == "NIC")
    assert zero["expected_per_day"] == 0 and 0 < zero["expected_high"] < math.inf


def test_table5_identity_at_16384_gpus():
    """From Table 5 alone: 419 unexpected in 54 days on 16,384 GPUs projects back to
    7.76 a day at 16,384 GPUs, component by component."""
    tax = load_taxonomy()
    meta = tax.meta["table5"]
    counts = {c.component: c.published_interruptions for c in tax.table5}
    assert sum(counts.values()) == meta["unexpected_total"] == 419
    gpu_days = meta["gpus"] * meta["days"]
    # No downtime information: the 54 days are running days (D = 0, p = 0).
    out = pj.project_counts(counts, gpu_days, meta["gpus"], down_days=0.0,
                            planned_fraction=0.0)
    assert round(out["total"]["expected_per_day"], 2) == meta["failures_per_day"] == 7.76
    assert out["total"]["expected_per_day"] == pytest.approx(419 / 54, rel=1e-12)
    assert out["total"]["expected_per_running_day"] == out["total"]["expected_per_day"]
    assert out["total"]["mtbi_hours"] == pytest.approx(54 * 24 / 419)
    for c in out["components"]:
        assert c["expected_per_day"] == pytest.approx(counts[c["component"]] / 54)
    low, high = reference_interval(419)
    assert out["total"]["expected_low"] == pytest.approx(low / 54, rel=1e-6)
    assert out["total"]["expected_high"] == pytest.approx(high / 54, rel=1e-6)
    # Linear in size: 100,000 GPUs see 100000/16384 times as many.
    big = pj.project_counts(counts, gpu_days, 100_000)
    assert big["total"]["expected_per_day"] == pytest.approx(419 / 54 * 100_000 / 16_384)


def test_calendar_identity_pure():
    """419 failures in 52.47 running days of 16,384 GPUs, 1.2 days of standstill after
    them and 0.33 days of planned stops make 54 calendar days: projected back to
    16,384 GPUs the model gives 419 / 54 a calendar day, exactly, and 419 / 52.47 per
    running day; the interval maps through the same monotone function."""
    counts = {"Faulty GPU": 148, "Software Bug": 271}
    running, down, planned, calendar = 52.47, 1.2, 0.33, 54.0
    out = pj.project_counts(counts, 16384 * running, 16384, down_days=down / 419,
                            planned_fraction=planned / calendar)
    t = out["total"]
    assert t["expected_per_day"] == pytest.approx(419 / calendar, rel=1e-12)
    assert t["expected_per_running_day"] == pytest.approx(419 / running, rel=1e-12)
    assert t["mtbi_hours"] == pytest.approx(24 * calendar / 419)
    low, high = pj.poisson_interval(419)
    f = lambda lam: (1 - planned / calendar) / (1 / lam + down / 419)  # noqa: E731
    assert t["expected_low"] == pytest.approx(f(low / running), rel=1e-12)
    assert t["expected_high"] == pytest.approx(f(high / running), rel=1e-12)
    assert sum(c["expected_per_day"] for c in out["components"]) == pytest.approx(
        t["expected_per_day"], rel=1e-12)
    gpu = out["components"][0]
    assert gpu["expected_per_day"] == pytest.approx(148 / 419 * t["expected_per_day"])
    # A component's bound: it at its bound, the rest at their point estimate.
    glow, ghigh = pj.poisson_interval(148)
    for bound, key in ((glow, "expected_low"), (ghigh, "expected_high")):
        lam = (bound + 271) / running
        assert gpu[key] == pytest.approx(f(lam) * bound / (bound + 271), rel=1e-12)
    # A component that is the whole count has the total's interval.
    alone = pj.project_counts({"Faulty GPU": 419}, 16384 * running, 16384,
                              down / 419, planned / calendar)
    c = alone["components"][0]
    for key in ("expected_per_day", "expected_low", "expected_high"):
        assert c[key] == pytest.approx(t[key], rel=1e-12)
    # The downtime caps the rate: at any size at most (1 - p) / D a calendar day.
    huge = pj.project_counts(counts, 16384 * running, 1e12, down / 419, planned / calendar)
    assert huge["total"]["expected_per_day"] < (1 - planned / calendar) * 419 / down
    assert pj.per_calendar_day(0.0, 1.0, 0.5) == 0.0


@pytest.mark.parametrize(("span", "attempts", "want"), [
    # (start, end, ended_by, first_step) ... -> running, down_u, down_p, down_other
    ((0, 30), [(0, 10, "unexpected", 1), (12, 20, "planned", 13), (25, 30, None, 26)],
     (23, 2, 5, 0)),
    # clipped to the span (1, 29): the first attempt's startup and the tail fall out
    ((1, 29), [(0, 10, "unexpected", 1), (12, 30, None, 13)], (9 + 17, 2, 0, 0)),
    # overlapping attempts count once; the gap follows the one that ended last
    ((1, 29), [(0, 10, "planned", 1), (2, 15, "unexpected", 3), (18, 30, None, 19)],
     (14 + 11, 3, 0, 0)),
    # a gap after an attempt without interruption, and a trailing uncovered stretch
    ((1, 29), [(0, 10, None, 1), (14, 20, "unexpected", 15)], (9 + 6, 0, 0, 4 + 9)),
    # an attempt wholly before the span adds nothing, its gap only the part inside
    ((5, 20), [(0, 3, "unexpected", 1), (7, 20, None, 8)], (13, 2, 0, 0)),
])
def test_uptime_partition(span, attempts, want):
    up = uptime.partition(span, [uptime.Attempt(*a) for a in attempts])
    got = (up.running_s, up.down_unexpected_s, up.down_planned_s, up.down_other_s)
    assert got == pytest.approx(want)
    assert sum(got) == pytest.approx(up.calendar_s)


def test_uptime_startup_after_unexpected():
    up = uptime.partition((0.0, 100.0), [
        uptime.Attempt(0, 10, "unexpected", 1), uptime.Attempt(12, 40, "planned", 16),
        uptime.Attempt(50, 70, "unexpected", 58), uptime.Attempt(71, 100, None, 73)])
    assert up.startup_s == pytest.approx((4 + 2) / 2)  # after the unexpected ones only
    assert up.planned_fraction == pytest.approx(10 / 100)
    assert uptime.partition((5.0, 5.0), []).calendar_s == 0


def test_ettr_hand_computed():
    # One failure per 10 h, 600 s restart, 60 s per checkpoint, a checkpoint per hour:
    # (1 - (600 + 1800) / 36000) / (1 + 60 / 3600) = 0.933333 / 1.016667 = 0.918033.
    m = pj.Ettr(failures_per_s=1 / 36000, restart_s=600, checkpoint_cost_s=60)
    assert m.at(3600) == pytest.approx(0.918033, abs=1e-6)
    # Young/Daly: sqrt(2 * 60 * 36000) = 2078.46 s, ETTR there
    # (1 - 1639.23 / 36000) / (1 + 60 / 2078.46) = 0.954466 / 1.028868 = 0.927686.
    opt = m.optimal_interval_s()
    assert opt == pytest.approx(2078.46, abs=0.01)
    assert m.at(opt) == pytest.approx(0.927686, abs=1e-6)
    assert m.at(opt) > max(m.at(0.8 * opt), m.at(1.2 * opt), m.at(3600))
    assert pj.Ettr(0.0, 600, 60).optimal_interval_s() is None
    assert pj.Ettr(1 / 60, 600, 60).at(600) == 0.0  # fails faster than it restarts
    # With 1,800 s of standstill after each failure and 5% of the calendar planned:
    # running share 0.95 / (1 + 1800 / 36000) = 0.904762, times 0.918033 = 0.830601;
    # the optimum interval does not move (the running share does not depend on it).
    d = pj.Ettr(1 / 36000, 600, 60, down_s=1800, planned_fraction=0.05)
    assert d.at(3600) == pytest.approx(0.830601, abs=1e-6)
    assert d.optimal_interval_s() == pytest.approx(opt)


@pytest.fixture(scope="module")
def sample(ingested_sample):
    with fdb.connect(ingested_sample, read_only=True) as c:
        yield c


def test_sample_rates_and_measured_identity(sample):
    data = pj.projection(sample, 100_000)
    m = data["measured"]
    assert m["unexpected"] == sample.execute(
        "SELECT count(*) FROM interruptions WHERE run = ? AND NOT planned",
        [data["run"]]).fetchone()[0]
    # Exposure: each attempt's nodes times its time within the report's calendar
    # (first to last training step), which cuts the first startup and the last tail.
    attempts = sample.execute("SELECT nodes, started_at, ended_at FROM attempts "
                              "WHERE run = ?", [data["run"]]).fetchall()
    first, last = sample.execute("SELECT first_step, last_step FROM "
                                 "effective_training_time WHERE run = ?",
                                 [data["run"]]).fetchone()
    hours = sum(n * max((min(e, last) - max(s, first)).total_seconds(), 0)
                for n, s, e in attempts) / 3600
    assert m["host_days"] == pytest.approx(hours / 24, rel=1e-12)
    whole = sum(n * (e - s).total_seconds() for n, s, e in attempts) / 3600
    assert whole - hours > 0.01  # the clipping is not a no-op on the sample
    assert m["gpus_per_host_from"] == "inventory" and m["gpus_per_host"] == 8
    # The calendar is the report's: its days and its per-day figure.
    ett = sample.execute("SELECT days, failures_per_day FROM effective_training_time "
                         "WHERE run = ?", [data["run"]]).fetchone()
    assert m["days"] == pytest.approx(ett[0], rel=1e-12)
    assert m["unexpected_per_day"] == pytest.approx(ett[1], rel=1e-12)
    parts = m["running_days"] + m["down_unexpected_days"] + m["down_planned_days"] + \
        m["down_other_days"]
    assert parts == pytest.approx(m["days"], rel=1e-12)
    # The view's exposure is the same running time (the sample's attempts never overlap).
    assert m["gpu_days"] / m["gpus"] == pytest.approx(m["running_days"], rel=1e-12)
    assert sum(c["failures"] for c in data["components"]) == m["unexpected"]
    assert data["total"]["expected_low"] < data["total"]["expected_per_day"] < \
        data["total"]["expected_high"]


def test_cli_project_json_shape(ingested_sample):
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project",
                                 "100000", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["gpus"] == 100000
    assert {"gpus", "days", "unexpected", "unexpected_per_day"} <= set(data["measured"])
    for c in data["components"]:
        assert {"component", "failures", "rate_per_1000_gpu_days", "rate_low", "rate_high",
                "expected_per_day", "expected_low", "expected_high"} <= set(c)
        assert c["rate_low"] <= c["rate_per_1000_gpu_days"] <= c["rate_high"]
    assert {"expected_per_day", "expected_low", "expected_high", "mtbi_hours"} <= set(
        data["total"])
    assert {"measured", "projected", "checkpoint_interval_s",
            "optimal_checkpoint_interval_s"} <= set(data["ettr"])
    assert data["ettr"]["checkpoint_interval_from"] == "checkpoint lines"
    assert data["ettr"]["checkpoint_cost_from"] == "checkpoint lines"


def test_checkpoint_cost_and_interval_are_measured(sample):
    """The save time is the median of the run's checkpoint lines' seconds=, the
    interval the median gap between a job's consecutive checkpoint lines."""
    import statistics

    data = pj.projection(sample, 1024)
    rows = sample.execute("""
        SELECT e.job_id, e.ts, e.attrs->>'seconds' FROM events e
        WHERE e.kind = 'checkpoint'
          AND e.job_id IN (SELECT job_id FROM attempts WHERE run = ?) ORDER BY 1, 2
    """, [data["run"]]).fetchall()
    assert statistics.median(float(r[2]) for r in rows if r[2] is not None) == \
        pytest.approx(data["ettr"]["checkpoint_cost_s"])
    gaps = [(b[1] - a[1]).total_seconds() for a, b in itertools.pairwise(rows)
            if a[0] == b[0] and b[1] > a[1]]
    assert statistics.median(gaps) == pytest.approx(data["ettr"]["checkpoint_interval_s"])
    e = data["ettr"]
    lam = data["total"]["expected_per_running_day"] / 86400
    assert e["optimal_checkpoint_interval_s"] == pytest.approx(
        math.sqrt(2 * e["checkpoint_cost_s"] / lam))


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_cli_project_formats(ingested_sample, fmt):
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project",
                                 "16384", "--format", fmt])
    assert r.exit_code == 0, r.output
    assert "Faulty GPU" in r.stdout
    if fmt == "csv":
        assert r.stdout.splitlines()[0].startswith("run,gpus,component,failures,")
        assert r.stdout.splitlines()[-1].split(",")[2] == "Total"
    else:
        assert "16,384 GPUs" in r.stdout and "Young/Daly" in r.stdout


def _report_json(db, *args: str) -> dict:
    r = CliRunner().invoke(app, ["report", "--db", str(db), "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _assert_identity(db) -> None:
    """report --project <measured GPUs> gives back the report's unexpected per day, to
    1e-9; the projection per running day (the old definition, exposure = running time)
    does not, so this check can fail."""
    per_day = _report_json(db)["failures_per_day"]
    first = _report_json(db, "--project", "8")
    gpus = round(first["measured"]["gpus"])
    assert first["measured"]["gpus"] == pytest.approx(gpus, rel=1e-9)
    proj = _report_json(db, "--project", str(gpus))
    assert proj["measured"]["unexpected_per_day"] == pytest.approx(per_day, rel=1e-12)
    assert proj["total"]["expected_per_day"] == pytest.approx(per_day, rel=1e-9)
    old = proj["total"]["expected_per_running_day"]
    assert abs(old - per_day) / per_day > 1e-3, (old, per_day)
    lo, hi = proj["total"]["expected_low"], proj["total"]["expected_high"]
    assert lo < per_day < hi


def test_identity_at_measured_size_on_the_sample(ingested_sample):
    _assert_identity(ingested_sample)


def test_identity_at_measured_size_on_the_small_preset(tmp_path):
    out, db = tmp_path / "sim", tmp_path / "small.duckdb"
    r = CliRunner().invoke(app, ["simulate", "--preset", "small", "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["ingest", str(out / "corpus"), "--db", str(db)])
    assert r.exit_code == 0, r.output
    _assert_identity(db)


def test_cli_project_errors(ingested_sample):
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project",
                                 "100", "--run", "no-such-run"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project", "0"])
    assert r.exit_code == 2


def test_cli_project_with_html_writes_the_page_and_prints_the_projection(ingested_sample,
                                                                         tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project",
                                 "2048", "--format", "csv", "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("run,gpus,component,") and "Root causes" not in r.stdout
    assert 'id="chart-scale"' in out.read_text(encoding="utf-8")


def test_readme_shows_the_real_projection(ingested_sample):
    """The README's `report --project 100000` block is this code's output on the demo
    database (the bundled sample), at the 100 columns it was captured at."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    cmd = "$ faultline report --db faultline-demo.duckdb --project 100000\n"
    start = readme.index(cmd) + len(cmd)
    shown = readme[start:readme.index("```", start)]
    r = CliRunner().invoke(app, ["report", "--db", str(ingested_sample), "--project",
                                 "100000"], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    assert r.stdout == shown
