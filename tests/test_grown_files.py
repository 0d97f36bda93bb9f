"""A grown file parsed from where the last run stopped gives the rows of a full read.

Parse level, table-driven over cut points: for a kernel log of each self-timed shape
and a job log with interleaved rank tracebacks, the file cut at many places (line
ends and mid-line: a partial last line) is parsed and loaded, the final file is
continued from the stored rows (resume_plan -> parse_batch with the plan -> load), and
the files, events, rejects and file_offsets rows must equal those of one full read.
The ingest-level cases (appends, rotation, truncation...) are in test_reruns_grow.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_parse_joblog import INTERLEAVED

from faultline import db as fdb
from faultline.pipeline import resume_plan
from faultline.pipeline.fileparse import parse_batch
from faultline.pipeline.load import load_shards, resumed_paths
from faultline.pipeline.settings import IngestSettings

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "sample" / "corpus"
SETTINGS = IngestSettings(tz="UTC", year=2024)
COMPARED = ("files", "events", "rejects", "file_offsets")


def _job_with_tracebacks() -> bytes:
    """A sample job log with the interleaved rank tracebacks of test_parse_joblog
    spliced into its middle and again at its end (a block the cut can split)."""
    lines = (SAMPLE / "jobs/1214274/node0005.log").read_bytes().splitlines(keepends=True)
    block = INTERLEAVED.encode()
    half = len(lines) // 2
    return b"".join(lines[:half]) + block + b"".join(lines[half:]) + block


CASES = {
    # path in the corpus layout -> bytes
    "hosts/node0000/kern.log": (SAMPLE / "hosts/node0000/kern.log").read_bytes(),  # rfc3164
    "hosts/node0001/kern.log": (SAMPLE / "hosts/node0001/kern.log").read_bytes(),  # rfc3339
    "hosts/node0011/kern.log": (SAMPLE / "hosts/node0011/kern.log").read_bytes(),
    "jobs/1214274/node0005.log": _job_with_tracebacks(),
}


def _load(con, parsed, staging: Path) -> None:
    for name in ("files", "events", "rejects", "file_offsets", "resumed"):
        table = getattr(parsed, name)
        (staging / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, staging / name / "b-n1.parquet")
    load_shards(con, staging)


def _rows(con) -> dict[str, list]:
    return {t: sorted(map(str, con.execute(f'SELECT * FROM "{t}"').fetchall()))
            for t in COMPARED}


def _cuts(data: bytes) -> list[int]:
    """Every 23rd line end, some mid-line offsets, and ends near the last line (in
    the job log: inside, and just after, the traceback block at the end)."""
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    picked = ends[::23] + [e - 7 for e in ends[4::41]] + ends[-14:-1:3]
    return sorted({c for c in picked if 0 < c < len(data)})


@pytest.mark.parametrize("rel", sorted(CASES))
def test_a_window_parse_equals_a_full_read_at_every_cut(rel, tmp_path):
    data = CASES[rel]
    path = str(tmp_path / "corpus" / rel)
    mtime = 1735689600.0
    full = fdb.connect(":memory:")
    _load(full, parse_batch([(path, data, mtime)], SETTINGS), tmp_path / "full")
    expected = _rows(full)
    assert expected["file_offsets"], "the file must be one a re-run can continue"
    continued = 0
    for k, cut in enumerate(_cuts(data)):
        con = fdb.connect(":memory:")
        _load(con, parse_batch([(path, data[:cut], mtime)], SETTINGS), tmp_path / f"a{k}")
        plans = resume_plan.plan(con, [path], SETTINGS.fingerprint, {path: len(data)})
        assert path in plans, cut
        spec = plans[path].to_json()
        parsed = parse_batch([(path, data, mtime, None, spec)], SETTINGS)
        _load(con, parsed, tmp_path / f"b{k}")
        continued += resumed_paths(con) == [path]
        got = _rows(con)
        for t in COMPARED:
            assert got[t] == expected[t], (rel, cut, t)
    assert continued == len(_cuts(data)), "every cut is continued, none read whole"
