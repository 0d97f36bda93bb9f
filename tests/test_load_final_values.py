"""New events are inserted with the host and GPU the whole corpus gives them, whatever
order the files arrive in (pipeline/load_incoming.py).

The load decides host aliases and GPU inventories from the stored rows plus the shards'
rows before inserting the latter (an UPDATE of freshly inserted rows would send them
all to DuckDB's write-ahead log). Table-driven over the order files arrive in, over
several loads: an alias or an inventory arriving after the lines it names (stored rows
updated), before them (incoming rows mapped from stored ones), a copy of a stored file
under a smaller or larger path (duplicates), and a re-parsed unchanged file next to a
new one (its shard rows stay out). Each staged load must end with the tables one load
of every file gives, and the Xid lines with the expected host, GPU index and serial.

Lines from the bundled sample corpus: node0009's ``kern.log`` Xid 79/154 lines, logged
under the BMC alias ``node0009-bmc`` that ``hosts.csv`` names, and its ``gpus.csv``.
Boot anchors (plain dmesg timed by the same record in a syslog, as in
test_layouts.py): the Xid 32 line of Bumblebee #677.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from faultline import db as fdb
from faultline.pipeline.fileparse import parse_batch
from faultline.pipeline.load import load_shards
from faultline.pipeline.settings import IngestSettings

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "corpus"
SETTINGS = IngestSettings(tz="UTC", year=2024)
COMPARED = ("files", "events", "rejects", "file_offsets")

_XID = (SAMPLE / "hosts/node0009/kern.log").read_bytes().splitlines(keepends=True)[124:126]
_BMC = b"".join(line.replace(b" node0009 ", b" node0009-bmc ") for line in _XID)
FILES = {
    "gpus": ("/c/hosts/node0009/gpus.csv", (SAMPLE / "hosts/node0009/gpus.csv").read_bytes()),
    "hosts": ("/c/hosts.csv", (SAMPLE / "hosts.csv").read_bytes()),
    "kern": ("/c/misc/kern.log", _BMC),
    "copy_after": ("/c/z/kern.log", _BMC),  # same bytes, a larger path
    "copy_before": ("/c/a/kern.log", _BMC),  # same bytes, a smaller path
}
XID32 = "NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000"
ANCHORS = {  # plain dmesg (uptime only) and a syslog line of the same kernel record
    "dmesg": ("/c/hosts/node1/dmesg", f"[24128.828315] {XID32}\n".encode()),
    "syslog": ("/c/hosts/node1/kern.log",
               f"Dec 30 10:00:00 node1 kernel: [24128.828315] {XID32}\n".encode()),
    "gone": ("/c/hosts/node1/kern.log", b"Dec 30 10:00:00 node1 kernel: booted\n"),
}
FILES.update(ANCHORS)
MAPPED = ("node0009", 1, "1650641391458")  # gpus.csv: index 1 is 00000000:2A:00.0

CASES = {
    # name: (files of each load, expected {path: (host, gpu_index, gpu_serial)} of xids)
    "all at once": ([["gpus", "hosts", "kern"]], {"/c/misc/kern.log": MAPPED}),
    "alias last": ([["gpus", "kern"], ["hosts"]], {"/c/misc/kern.log": MAPPED}),
    "lines last": ([["gpus", "hosts"], ["kern"]], {"/c/misc/kern.log": MAPPED}),
    "inventory last": ([["hosts", "kern"], ["gpus"]], {"/c/misc/kern.log": MAPPED}),
    "one at a time": ([["kern"], ["gpus"], ["hosts"]], {"/c/misc/kern.log": MAPPED}),
    "no alias": ([["gpus"], ["kern"]], {"/c/misc/kern.log": ("node0009-bmc", None, None)}),
    "unchanged file parsed again": ([["gpus", "kern"], ["hosts", "kern"]],
                                    {"/c/misc/kern.log": MAPPED}),
    "copy in the same load": ([["gpus", "hosts", "kern", "copy_after"]],
                              {"/c/misc/kern.log": MAPPED}),
    "copy later, larger path": ([["gpus", "hosts", "kern"], ["copy_after"]],
                                {"/c/misc/kern.log": MAPPED}),
    "copy later, smaller path": ([["gpus", "kern"], ["hosts", "copy_before"]],
                                 {"/c/a/kern.log": MAPPED}),
}


def _load(con, names: list[str], staging: Path) -> None:
    parsed = parse_batch([(*FILES[n], 1_700_000_000.0) for n in names], SETTINGS)
    for table in ("files", "events", "rejects", "file_offsets", "resumed"):
        (staging / table).mkdir(parents=True)
        pq.write_table(getattr(parsed, table), staging / table / "b-n1.parquet")
    load_shards(con, staging)


def _loaded(tmp_path: Path, name: str, loads: list[list[str]]):
    con = fdb.connect(tmp_path / f"{name}.duckdb")
    for k, names in enumerate(loads):
        with fdb.transaction(con):
            _load(con, names, tmp_path / f"{name}-{k}")
    return con


def _rows(con) -> dict[str, list[str]]:
    return {t: sorted(map(str, con.execute(f'SELECT * FROM "{t}"').fetchall()))
            for t in COMPARED}


@pytest.mark.parametrize("case", CASES)
def test_staged_loads_give_the_tables_of_one_load(tmp_path: Path, case: str) -> None:
    loads, xids = CASES[case]
    con = _loaded(tmp_path, "staged", loads)
    got = con.execute("SELECT path, host, gpu_index, gpu_serial FROM events "
                      "WHERE kind = 'xid' ORDER BY path, line_no").fetchall()
    assert got == [(p, *v) for p, v in xids.items() for _ in range(2)]  # two Xid lines
    every = sorted({n for names in loads for n in names})
    assert _rows(con) == _rows(_loaded(tmp_path, "once", [every]))


def test_a_copy_points_at_the_smallest_path(tmp_path: Path) -> None:
    con = _loaded(tmp_path, "staged", CASES["copy later, smaller path"][0])
    dup = con.execute("SELECT path, duplicate_of, event_lines FROM files "
                      "WHERE duplicate_of IS NOT NULL").fetchall()
    assert dup == [("/c/misc/kern.log", "/c/a/kern.log", 0)]
    paths = con.execute("SELECT DISTINCT path FROM events WHERE path LIKE '%kern.log'"
                        ).fetchall()
    assert paths == [("/c/a/kern.log",)]


ANCHOR_CASES = {  # name: (files of each load, the dmesg line's ts_quality at the end)
    "anchor in the same load": ([["dmesg", "syslog"]], "boot_relative"),
    "anchor later": ([["dmesg"], ["syslog"]], "boot_relative"),
    "dmesg later": ([["syslog"], ["dmesg"]], "boot_relative"),
    "no anchor": ([["dmesg"]], "untimed"),
    "anchor replaced": ([["dmesg", "syslog"], ["gone"]], "untimed"),
}


@pytest.mark.parametrize("case", ANCHOR_CASES)
def test_boot_relative_lines_are_timed_from_stored_and_new_anchors(tmp_path: Path,
                                                                    case: str) -> None:
    loads, quality = ANCHOR_CASES[case]
    con = _loaded(tmp_path, "staged", loads)
    got = con.execute("SELECT ts_quality, epoch(ts) FROM events "
                      "WHERE path = '/c/hosts/node1/dmesg'").fetchall()
    syslog = 1735552800.0  # Dec 30 10:00:00 2024 UTC, the syslog line's time
    assert got == [(quality, syslog if quality == "boot_relative" else None)]
    every = sorted({ANCHORS[n][0]: n for names in loads for n in names}.values())
    assert _rows(con) == _rows(_loaded(tmp_path, "once", [every]))
