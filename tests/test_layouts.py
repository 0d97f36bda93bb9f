"""The same simulated cluster in other corpus layouts (``simulate --layout``): the truth
follows every file, and an ingest of each layout gives the canonical verdicts."""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faultline.cli import app
from faultline.pipeline.run import ingest
from faultline.pipeline.text import count_lines, decode, split_lines
from faultline.simulate.layouts import LAYOUTS, get_layout

OTHER = ("varlog", "central-syslog", "rsyslog-tree", "journal-json")


def _simulate(out: Path, layout: str) -> Path:
    result = CliRunner().invoke(app, ["simulate", "--preset", "sample", "--out", str(out),
                                      "--layout", layout])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    return {name: _simulate(root / name, name) for name in ("canonical", *OTHER)}


def _truth(out: Path, name: str) -> list[dict]:
    with (out / "truth" / name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    return split_lines(decode(gzip.decompress(data) if path.suffix == ".gz" else data))


def test_unknown_layout_is_bad_usage(tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--preset", "sample", "--out",
                                      str(tmp_path), "--layout", "flat"])
    assert result.exit_code == 2
    assert "unknown layout 'flat'" in result.output
    with pytest.raises(ValueError, match="known: canonical"):
        get_layout("flat")


@pytest.mark.parametrize("name", OTHER)
def test_layout_truth_follows_every_file_and_signal(layouts, name):
    out = layouts[name]
    rows = {r["path"]: r for r in _truth(out, "files.csv")}
    on_disk = {str(p.relative_to(out / "corpus")) for p in (out / "corpus").rglob("*")
               if p.is_file()}
    assert set(rows) == on_disk
    for rel, r in rows.items():
        data = (out / "corpus" / rel).read_bytes()
        plain = gzip.decompress(data) if r["compressed"] == "1" else data
        assert int(r["lines"]) == count_lines(plain), rel
    cache: dict[str, list[str]] = {}
    for s in _truth(out, "signals.csv"):
        lines = cache.setdefault(s["path"], _lines(out / "corpus" / s["path"]))
        assert lines[int(s["line_no"]) - 1].startswith(s["text"][:60]), s
    summary = json.loads((out / "truth" / "summary.json").read_text())
    canonical = json.loads((layouts["canonical"] / "truth" / "summary.json").read_text())
    assert summary["layout"] == name
    assert summary["interruptions"] == canonical["interruptions"]
    assert summary["by_component"] == canonical["by_component"]


def test_layouts_put_files_where_they_say(layouts):
    assert not (layouts["varlog"] / "corpus" / "hosts").exists()
    dmesg = sorted((layouts["varlog"] / "corpus").glob("*/var/log/dmesg"))
    assert dmesg  # the dmesg -T hosts write plain dmesg: seconds since boot, no wall clock
    assert all(ln.startswith("[") and "] " in ln and ln[1:ln.index("]")].strip()
               .replace(".", "").isdigit() for ln in _lines(dmesg[0])[:50])
    central = layouts["central-syslog"] / "corpus"
    assert [p.name for p in (central / "syslog").iterdir()] == ["messages"]
    assert list(central.glob("inventory/*/sel.txt"))
    tree = layouts["rsyslog-tree"] / "corpus" / "rsyslog"
    no_host = [p for p in tree.glob("*/kern.log")
               if all(re.match(r"[A-Z][a-z]{2} [ \d]\d [\d:]{8} (?:kernel|[\w.-]+\[\d+\]): ", ln)
                      for ln in _lines(p)[:20])]
    assert no_host  # "Dec 29 06:00:45 kernel: [...] ...": the host only in the path
    journal = sorted((layouts["journal-json"] / "corpus" / "journal").glob("*.json"))
    first = json.loads(_lines(journal[0])[0])
    assert {"__REALTIME_TIMESTAMP", "_HOSTNAME", "MESSAGE", "_BOOT_ID"} <= set(first)
    assert set(LAYOUTS) >= {"canonical", *OTHER}


def _verdicts(db: Path) -> dict[tuple[str, str], tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {(j, t): rest for j, t, *rest in con.execute(
            "SELECT job_id, strftime(failed_at, '%Y-%m-%dT%H:%M'), component, planned, "
            "culprit_host, culprit_gpu_serial FROM interruptions").fetchall()}


@pytest.mark.slow
def test_every_layout_gives_the_canonical_interruptions(layouts, tmp_path):
    canonical = tmp_path / "canonical.duckdb"
    ingest([layouts["canonical"] / "corpus"], canonical)
    want = _verdicts(canonical)
    assert len(want) == 26
    for name in OTHER:
        db = tmp_path / f"{name}.duckdb"
        ingest([layouts[name] / "corpus"], db)
        got = _verdicts(db)
        assert got == want, name
        with duckdb.connect(str(db), read_only=True) as con:
            hosts = dict(con.execute("SELECT host_from, count(*) FROM files "
                                     "WHERE source IN ('kernel', 'sel', 'inventory') "
                                     "GROUP BY ALL").fetchall())
            (untimed,), = con.execute("SELECT count(*) FROM events WHERE source = 'kernel' "
                                      "AND ts_quality = 'untimed'").fetchall()
        assert "none" not in hosts, (name, hosts)
        assert untimed == 0, name


# --- boot anchors from the corpus (pipeline/load.py: anchor_boots) -------------------------

XID32 = "NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000"  # Bumblebee #677
LINUX = "Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007)"


def _write(root: Path, rel: str, lines: list[str]) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_plain_dmesg_is_anchored_by_the_corpus(tmp_path):
    c = tmp_path / "corpus"
    # node1: the same record in its syslog (with the kernel's [secs] stamp)
    _write(c, "node1/var/log/dmesg", [f"[24128.828315] {XID32}"])
    _write(c, "node1/var/log/kern.log", [
        f"Dec 30 10:00:00 node1 kernel: [24128.828315] {XID32}"])
    # node2: its boot starts in the file and Slurm says when it booted
    _write(c, "node2/var/log/dmesg", [f"[    0.000000] {LINUX}", f"[  100.000000] {XID32}"])
    # node4: the same messages in its dmesg -T (no uptime there, seconds only)
    xid43 = ("NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, "
             "Ch 00000008")  # akash-network/support#244 (dmesg -T capture)
    _write(c, "node4/var/log/dmesg", [f"[ 5000.250000] {XID32}", f"[ 5068.250000] {xid43}"])
    _write(c, "node4/var/log/dmesg-T.txt", [f"[Mon Dec 30 10:00:00 2024] {XID32}",
                                             f"[Mon Dec 30 10:01:08 2024] {xid43}"])
    # node5: one message only: not enough to anchor by text
    _write(c, "node5/var/log/dmesg", [f"[ 5000.250000] {XID32}"])
    _write(c, "node5/var/log/dmesg-T.txt", [f"[Mon Dec 30 10:00:00 2024] {XID32}"])
    # node3: one boot in the file, two in Slurm's log: which one is unknown
    _write(c, "node3/var/log/dmesg", [f"[    0.000000] {LINUX}", f"[  200.000000] {XID32}"])
    _write(c, "slurm/slurmctld.log", [
        "[2024-12-29T13:18:13.600] validate_node_specs: Node node2 unexpectedly rebooted "
        "boot_time=1735478198 last response=1735476413",
        "[2024-12-29T13:18:13.600] validate_node_specs: Node node3 unexpectedly rebooted "
        "boot_time=1735478198 last response=1735476413",
        "[2024-12-30T13:18:13.600] validate_node_specs: Node node3 unexpectedly rebooted "
        "boot_time=1735564598 last response=1735564413",
    ])
    db = tmp_path / "a.duckdb"
    ingest([c], db, year=2024)
    q = ("SELECT host, ts_quality, epoch_us(ts) FROM events WHERE kind = 'xid' "
         "AND path LIKE '%/dmesg' ORDER BY host, line_no")
    with duckdb.connect(str(db), read_only=True) as con:
        got = con.execute(q).fetchall()
        syslog_ts, = con.execute("SELECT epoch_us(ts) FROM events WHERE kind = 'xid' "
                                 "AND path LIKE '%kern.log'").fetchone()
    boot4 = 1735552800_000000 - 5000_250000  # both messages say so
    assert got == [("node1", "boot_relative", syslog_ts),
                   ("node2", "boot_relative", 1735478198_000000 + 100_000_000),
                   ("node3", "untimed", None),
                   ("node4", "boot_relative", boot4 + 5000_250000),
                   ("node4", "boot_relative", boot4 + 5068_250000),
                   ("node5", "untimed", None)]
    ingest([c], db, year=2024)  # a re-run changes nothing
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(q).fetchall() == got


@pytest.mark.parametrize("argv,msg", [
    (["--host-from-path", "/(?P<hst>[^/]+)/"], "named group"),
    (["--host-from-path", "(?P<host>["], "--host-from-path"),
    (["--json-fields", "mesage=log"], "unknown key"),
    (["--json-fields", "message"], "KEY=FIELD"),
])
def test_bad_layout_options_are_bad_usage(tmp_path, argv, msg):
    (tmp_path / "c").mkdir()
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "c"), "--db",
                                      str(tmp_path / "x.duckdb"), *argv])
    assert result.exit_code == 2
    assert msg in " ".join(result.output.split())
    assert not (tmp_path / "x.duckdb").exists()


def test_nccl_lines_make_hosts_known_without_sacct_or_hosts_csv(tmp_path):
    """A central rsyslog tree (``<host>/kern.log``, lines without a host field) and job
    logs whose NCCL lines name the hosts, no job records: the path component that NCCL
    names gives the kernel file its host (files.host_from = path_known). The NCCL line
    is CORPUS.md's bring-up example; the kernel line is gpud's dmesg -T capture
    (../shared/peer-data/gpud, Apache-2.0) without its host."""
    job = tmp_path / "corpus" / "jobs" / "81234" / "rank-logs.txt"
    job.parent.mkdir(parents=True)
    job.write_text("2024-07-01T12:00:00.123456Z node0042:2231:2290 [3] NCCL INFO "
                   "Bootstrap : Using eth0:10.1.2.42<0>\n")
    kern = tmp_path / "corpus" / "central" / "node0042" / "kern.log"
    kern.parent.mkdir(parents=True)
    kern.write_text("[Mon Jul  1 12:00:00 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=2231, "
                    "name=python3, GPU has fallen off the bus.\n")
    db = tmp_path / "x.duckdb"
    ingest([tmp_path / "corpus"], db, tz="UTC")
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT host, host_from FROM files WHERE path = ?",
                          [str(kern)]).fetchone()
        xid_host = con.execute("SELECT host FROM events WHERE kind = 'xid'").fetchone()
    assert row == ("node0042", "path_known")
    assert xid_host == ("node0042",)
