"""sacct parser on real-shaped dumps from facebookresearch/gcm (../shared/peer-data/gcm).

The folder holds ``sacct -P`` dumps (``|`` and the two-character ``|#`` delimiter),
free-text fields with embedded newlines next to gcm's expected re-joined output
(``*-expected.txt``, newline written as a literal ``\\n``), a malformed row, and one
``sinfo`` dump: sinfo is not sacct, so the sacct parser rejects every line of it
(``sacct_no_header``) and :func:`sacct.looks_like_sacct` says no: a sniffer must not
route it here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from faultline.pipeline.parsers import sacct
from faultline.pipeline.records import FileParse, ParseContext
from faultline.pipeline.text import count_lines, decode, split_lines

pytestmark = pytest.mark.shared

MULTILINE_PAIRS = ("sample-sacct-one-multiline", "sample-sacct-fake-line-break",
                   "sample-sacct-multiple-multiline")


@pytest.fixture(scope="module")
def data_dir(shared_dir) -> Path:
    d = shared_dir / "peer-data" / "gcm" / "gcm" / "tests" / "data"
    if not d.is_dir():
        pytest.fail(f"{d} is missing")
    return d


def _parse(path: Path) -> FileParse:
    return sacct.parse(decode(path.read_bytes()), ParseContext(path=str(path)))


def _check_accounting(fp: FileParse, path: Path) -> None:
    covered = {n for e in fp.events for n in range(e.line_no, e.line_end + 1)}
    rejected = {r.line_no for r in fp.rejects}
    assert not covered & rejected
    assert fp.lines == count_lines(path.read_bytes())
    assert fp.lines == fp.routine_lines + fp.event_lines + fp.reject_lines


def test_every_file_parses_and_adds_up(data_dir):
    files = sorted(data_dir.glob("*.txt"))
    assert len(files) == 11
    for path in files:
        _check_accounting(_parse(path), path)


def test_sinfo_is_not_sacct(data_dir):
    path = data_dir / "sample-sinfo-output.txt"
    first = split_lines(path.read_text())[0]
    assert not sacct.looks_like_sacct(first)
    fp = _parse(path)
    assert fp.events == []
    assert {r.reason for r in fp.rejects} == {"sacct_no_header"}
    assert len(fp.rejects) == fp.lines == 5


def test_midnight_dump_jobs_and_states(data_dir):
    fp = _parse(data_dir / "sample-sacct-output-midnight-edge-case.txt")
    assert fp.rejects == []
    assert len(fp.events) == 306  # 1,186 rows fold into 306 jobs
    assert Counter(e.attrs["state"] for e in fp.events) == {
        "FAILED": 259, "CANCELLED": 24, "COMPLETED": 18, "REQUEUED": 2, "OUT_OF_MEMORY": 2,
        "TIMEOUT": 1,
    }
    assert Counter(e.attrs.get("cancelled_by") for e in fp.events
                   if e.attrs["state"] == "CANCELLED") == {"1185300516": 23, "1185200358": 1}
    assert fp.event_lines == 1186 and fp.routine_lines == 1  # every row folded; the header
    arrays = [e.job_id for e in fp.events if "_" in e.job_id]
    assert "39461339_226" in arrays
    steps = Counter(s["step"] for e in fp.events for s in e.attrs.get("steps", []))
    assert (steps["batch"], steps["extern"]) == (292, 294)
    # Jobs across midnight keep their own Start and End.
    first = fp.events[0]
    assert (first.job_id, first.attrs["end"] > first.attrs["start"]) == ("39125549", True)
    assert all(e.ts == e.attrs["end"] and e.ts_quality == "assumed_tz" for e in fp.events)


def test_midnight_small_dump(data_dir):
    fp = _parse(data_dir / "sample-sacct-output-midnight-edge-case-small.txt")
    assert [(e.job_id, e.attrs["state"], e.attrs["cancelled_by"], len(e.attrs["steps"]))
            for e in fp.events] == [("39125549", "CANCELLED", "1185300516", 3),
                                    ("39125551", "CANCELLED", "1185300516", 3),
                                    ("39125552", "CANCELLED", "1185300516", 2)]


@pytest.mark.parametrize("stem", MULTILINE_PAIRS)
def test_multiline_rows_rejoin_like_gcm(data_dir, stem):
    text = decode((data_dir / f"{stem}.txt").read_bytes())
    expected = (data_dir / f"{stem}-expected.txt").read_text()
    assert "\n".join(sacct.rejoined(text)) == expected
    # The expected file is itself a valid dump: same jobs, one line per row.
    ours = sacct.parse(text, ParseContext(path=stem))
    theirs = sacct.parse(expected, ParseContext(path=f"{stem}-expected"))
    assert [e.job_id for e in ours.events] == [e.job_id for e in theirs.events]
    assert ours.rejects == theirs.rejects == []


@pytest.mark.parametrize(("stem", "states", "spans"), [
    ("sample-sacct-one-multiline", ["CANCELLED", "FAILED", "REQUEUED"], [(2, 2), (3, 3), (4, 5)]),
    ("sample-sacct-fake-line-break", ["CANCELLED", "FAILED", "REQUEUED"],
     [(2, 2), (3, 3), (4, 5)]),
    ("sample-sacct-multiple-multiline", ["CANCELLED", "FAILED", "REQUEUED", "REQUEUED",
                                         "REQUEUED"], [(2, 2), (3, 3), (4, 5), (6, 7), (8, 9)]),
])
def test_multiline_jobs(data_dir, stem, states, spans):
    fp = _parse(data_dir / f"{stem}.txt")
    assert [e.attrs["state"] for e in fp.events] == states
    assert [(e.line_no, e.line_end) for e in fp.events] == spans
    requeued = fp.events[2]
    assert requeued.job_id == "201844"
    assert requeued.attrs["nodes"] == 32 and requeued.attrs["user"] == "test_user"
    assert requeued.attrs["extra"]["SubmitLine"].startswith("sbatch --job-name job_name || ")
    assert "\n" in requeued.attrs["extra"]["SubmitLine"]
    # The delimiter of these dumps is the two characters "|#".
    assert requeued.attrs["extra"]["Partition"] == "learn"


def test_malformed_row_is_rejected(data_dir):
    path = data_dir / "sample-sacct-output-with-invalid-lines.txt"
    fp = _parse(path)
    assert fp.events == []
    assert [(r.line_no, r.reason) for r in fp.rejects] == [(2, "sacct_truncated_row")]
    assert fp.routine_lines == 1
