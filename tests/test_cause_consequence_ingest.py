"""Cause or consequence end to end: handmade and sample corpora through ``faultline
ingest``, ``explain`` and ``report`` (the rules themselves: test_cause_consequence.py).

Real wordings used below:

* ``NVRM: Xid (PCI:0000:38:00): 43, pid=2924364, name=pt_main_thread, Ch 00000008``:
  leptonai/gpud (Apache-2.0), components/memory/testdata/dmesg.decode.iso.log at
  4a8de33a3f02e207f39e9023d67125592d599731 (../shared/peer-data/gpud); here with other
  PCI addresses and pids, one per host and GPU.
* ``error: Nodes <host> not responding, setting DOWN``, ``Killing JobId=<id> on failed
  node <host>``, ``update_node: node <host> state set to DRAINING``: SchedMD/slurm
  (GPL-2.0) ping_nodes.c / job_mgr.c / node_mgr.c, as quoted in
  ../shared/reference/log_signatures.md section 4.18.
* ``Temperature GPU3_Temp | Upper Critical going high | Asserted | Reading 95 >
  Threshold 90 degrees C``: ipmitool ``sel elist`` shape (log_signatures.md, BMC SEL).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import random
import shutil
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.hostlist import try_expand_hostlist

# --- end to end through the CLI -------------------------------------------------------

def _stamp(t: float, fmt: str) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime(fmt)


def _corpus(root: Path) -> dict:
    """Two interruptions of one run on four hosts, then a last attempt:

    job 100: node0003 stops answering one second before the end; Xid 43 on the other
    three hosts 3-5 s after it, a DRAINING state change (no reason) later.
    job 101: BMC over-temperature on node0002 GPU 3 (no Xid): the culprit's serial
    comes from node0002's gpus.csv."""
    t0 = 1_735_000_000  # 2024-12-24T00:26:40Z
    end1, end2 = t0 + 3600, t0 + 7800
    iso = "%Y-%m-%dT%H:%M:%S"
    nodes = "node[0001-0004]"
    (root / "slurm").mkdir(parents=True)
    head = ("JobID|JobName|User|Partition|State|Start|End|Elapsed|NNodes|NodeList|"
            "ExitCode|Reason|AdminComment\n")
    rows = [("100", "NODE_FAIL", t0, end1), ("101", "FAILED", end1 + 300, end2),
            ("102", "COMPLETED", end2 + 300, end2 + 4000)]
    (root / "slurm" / "sacct.txt").write_text(head + "".join(
        f"{j}|llama|trainer|train|{st}|{_stamp(a, iso)}|{_stamp(b, iso)}|01:00:00|4|"
        f"{nodes}|1:0|None|\n" for j, st, a, b in rows))
    ctld = [
        (t0, f"sched: Allocate JobId=100 NodeList={nodes} #CPUs=768 Partition=train"),
        (end1 - 1, "error: Nodes node0003 not responding, setting DOWN"),
        (end1, "Killing JobId=100 on failed node node0003"),
        (end1 + 90, "update_node: node node0003 state set to DRAINING"),
        (end1 + 300, f"sched: Allocate JobId=101 NodeList={nodes} #CPUs=768 "
                     "Partition=train"),
        (end2, "_job_complete: JobId=101 WEXITSTATUS 1"),
    ]
    (root / "slurm" / "slurmctld.log").write_text("".join(
        f"[{_stamp(t, iso)}.000] {m}\n" for t, m in ctld))
    for i, host in enumerate(("node0001", "node0002", "node0003", "node0004")):
        d = root / "hosts" / host
        d.mkdir(parents=True)
        lines = [f"{_stamp(t0 + 10, iso)}.000000+00:00 {host} kernel: nvidia-nvlink: "
                 "Nvlink Core is being initialized, major device number 234"]
        if host != "node0003":
            lines.append(f"{_stamp(end1 + 3 + i, iso)}.412000+00:00 {host} kernel: NVRM: "
                         f"Xid (PCI:0000:{0x18 + i:02x}:00): 43, pid={2924364 + i}, "
                         "name=pt_main_thread, Ch 00000008")
        (d / "kern.log").write_text("\n".join(lines) + "\n")
        (d / "gpus.csv").write_text("index, pci.bus_id, uuid, serial\n" + "".join(
            f"{g}, 00000000:{0x18 + g:02X}:00.0, GPU-{i}{g}aaaaaa-0000-0000-0000-000000000000"
            f", 16{i}000000000{g}\n" for g in range(8)))
        sel = ""
        if host == "node0002":
            sel = (f"   1 | {_stamp(end2 - 400, '%m/%d/%Y')} | {_stamp(end2 - 400, '%H:%M:%S')}"
                   " | Temperature GPU3_Temp | Upper Critical going high | Asserted | "
                   "Reading 95 > Threshold 90 degrees C\n")
        (d / "sel.txt").write_text(sel)
    return {"end1": end1, "end2": end2}


def test_teardown_xids_on_many_hosts_through_ingest_and_explain(tmp_path):
    _corpus(tmp_path / "c")
    db = tmp_path / "db.duckdb"
    runner = CliRunner()
    r = runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", str(db)])
    assert r.exit_code == 0, r.output
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""
            SELECT job_id, component, rule_id, culprit_host, culprit_gpu,
                   culprit_gpu_serial, culprit_gpu_uuid, surfaced_host, interruption_id
            FROM interruptions ORDER BY failed_at""").fetchall()
        assert [r[:8] for r in rows] == [
            ("100", "Host Maintenance", "sched.not_responding", None, None, None, None,
             "node0003"),
            ("101", "GPU Thermal Interface + Sensor", "bmc.gpu_thermal", "node0002", 3,
             "1610000000003", "GPU-13aaaaaa-0000-0000-0000-000000000000", "node0002"),
        ]
        roles = dict(con.execute("""
            SELECT e.kind || coalesce(':' || e.xid, '') || '@' || e.host, x.role
            FROM interruption_evidence x JOIN events e USING (event_id)
            WHERE x.interruption_id = ? AND e.kind IN ('xid', 'node_drain')""",
                                 [rows[0][8]]).fetchall())
        assert roles == {"xid:43@node0001": "symptom", "xid:43@node0002": "symptom",
                         "xid:43@node0004": "symptom", "node_drain@node0003": "symptom"}
        assert con.execute("SELECT count(*) FROM interruption_evidence WHERE role = "
                           "'contradicting'").fetchone()[0] == 0
        draining = con.execute("SELECT message FROM events WHERE kind = 'node_drain'"
                               ).fetchone()[0]
        sha = hashlib.sha256(draining.encode()).hexdigest()
        assert con.execute("SELECT count(*) FROM text_predictions WHERE text_sha256 = ?",
                           [sha]).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM recurring_culprits").fetchone()[0] == 0
    r = runner.invoke(app, ["explain", "--db", str(db), rows[0][8]],
                      env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "Host Maintenance" in r.output and "sched.not_responding" in r.output
    assert "no hardware suspect" in r.output and "surfaced on: node0003" in r.output
    root_line = next(ln for ln in r.output.splitlines()
                     if ln.strip().startswith("root ") and "root cause" not in ln)
    assert "not responding" in root_line and "Xid" not in root_line
    r = runner.invoke(app, ["explain", "--db", str(db), rows[1][8]],
                      env={"COLUMNS": "250"})
    assert "serial 1610000000003" in r.output and "hardware suspect" in r.output
    r = runner.invoke(app, ["report", "--db", str(db), "--format", "json"])
    got = {row["component"]: row["interruptions"] for row in json.loads(r.output)["rows"]
           if row["interruptions"]}
    assert got == {"Host Maintenance": 1, "GPU Thermal Interface + Sensor": 1}


def test_teardown_xids_on_every_host_leave_the_sample_components_right(tmp_path,
                                                                      repo_root):
    """The sample corpus, plus what a real driver prints when Slurm kills a job: Xid 43
    on every GPU of every host of each failed attempt, 2-8 s after its end. Every
    interruption keeps the component of the truth (before the rule, the watchdog
    interruption became a Software Bug)."""
    root = tmp_path / "sample"
    shutil.copytree(repo_root / "fixtures" / "sample", root)
    with (root / "corpus" / "slurm" / "sacct.txt").open(newline="") as f:
        nodes = {r["JobID"]: r["NodeList"] for r in csv.DictReader(f, delimiter="|")}
    with (root / "truth" / "interruptions.csv").open(newline="") as f:
        truth = list(csv.DictReader(f))
    rng = random.Random(7)
    lines: dict[str, list[tuple[float, str]]] = {}
    for t in truth:
        if t["planned"] == "True":
            continue
        end = dt.datetime.fromisoformat(t["failed_at"]).timestamp()
        for host in try_expand_hostlist(nodes[t["job_id"]]):
            for g in range(8):
                ts = end + rng.uniform(2, 8)
                stamp = dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()
                lines.setdefault(host, []).append((ts, (
                    f"{stamp} {host} kernel: NVRM: Xid (PCI:0000:{0x18 + g:02x}:00): 43, "
                    f"pid={rng.randrange(2000, 99999)}, name=pt_main_thread, Ch 00000008")))
    for host, rows in lines.items():
        (root / "corpus" / "hosts" / host / "teardown.log").write_text(
            "\n".join(text for _ts, text in sorted(rows)) + "\n")
    db = tmp_path / "db.duckdb"
    r = CliRunner().invoke(app, ["ingest", str(root / "corpus"), "--db", str(db)])
    assert r.exit_code == 0, r.output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events WHERE kind = 'xid' AND xid = 43"
                           ).fetchone()[0] == sum(map(len, lines.values()))
        got = con.execute("SELECT job_id, component FROM interruptions "
                          "WHERE run LIKE '%llama3-405b' ORDER BY failed_at").fetchall()
    assert [(t["job_id"], t["component"]) for t in truth] == got
