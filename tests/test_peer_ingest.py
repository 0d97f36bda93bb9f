"""Real logs from other projects (../shared/peer-data) go through the whole pipeline:
no error, every line accounted for, and the records they hold are found."""

from __future__ import annotations

import duckdb
import pytest

from faultline.pipeline.run import ingest

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def peer_db(shared_dir, tmp_path_factory):
    db = tmp_path_factory.mktemp("peer") / "peer.duckdb"
    ingest([shared_dir / "peer-data"], db)
    con = duckdb.connect(str(db), read_only=True)
    yield con
    con.close()


def test_every_file_is_ingested_and_every_line_counted(peer_db, shared_dir):
    on_disk = {str(p) for p in (shared_dir / "peer-data").rglob("*") if p.is_file()}
    rows = peer_db.execute("SELECT path, lines, routine_lines + event_lines + reject_lines "
                           "FROM files").fetchall()
    assert {r[0] for r in rows} == on_disk
    assert all(lines == total for _, lines, total in rows)
    for path, lines, _ in rows:
        with open(path, "rb") as f:
            data = f.read()
        assert lines == data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


def _count(con, sql: str, *args) -> int:
    return con.execute(sql, list(args)).fetchone()[0]


def test_xids_are_found(peer_db):
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='xid' AND xid=119 AND "
                  "device='0000:9b:00.0' AND path LIKE '%dmesg-with-xid-119.log'") == 5
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='xid' AND xid=13 AND "
                  "device='0000:38:00.0' AND path LIKE '%memory/testdata/%'") == 16
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='xid' AND xid=43 AND "
                  "path LIKE '%memory/testdata/%'") == 1


def test_oom_kills_and_nccl_segfaults_are_found(peer_db):
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='oom_kill' AND "
                  "path LIKE '%memory/testdata/%'") == 6
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='segfault' AND "
                  "message LIKE '%libnccl.so.2%'") == 2


def test_link_flaps_are_found(peer_db):
    flap = "%1dev_6flap_syslog"
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='ib_link_down' AND "
                  "path LIKE ?", flap) == 6
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind='ib_link_up' AND "
                  "path LIKE ?", flap) == 6
    assert _count(peer_db, "SELECT count(*) FROM events WHERE kind LIKE 'ib_link%' AND "
                  "path LIKE '%0flap_syslog'") == 0


def test_sacct_records_and_attempts_are_found(peer_db):
    jobs = _count(peer_db, "SELECT count(*) FROM events WHERE kind='job_record' AND "
                  "path LIKE '%midnight-edge-case.txt'")
    assert jobs == 306
    states = dict(peer_db.execute(
        "SELECT attrs->>'state', count(*) FROM events WHERE kind='job_record' AND "
        "path LIKE '%midnight-edge-case.txt' GROUP BY 1").fetchall())
    assert states["FAILED"] == 259 and states["OUT_OF_MEMORY"] == 2
    assert _count(peer_db, "SELECT count(*) FROM attempts") > 0
    assert _count(peer_db, "SELECT count(*) FROM rejects WHERE path LIKE "
                  "'%with-invalid-lines.txt'") >= 1


def test_files_that_are_no_log_are_rejected_with_a_reason(peer_db):
    rows = peer_db.execute("SELECT source, reject_lines = lines FROM files WHERE path LIKE "
                           "'%/LICENSE'").fetchall()
    assert rows and all(src == "unknown" and all_rejected for src, all_rejected in rows)
    reasons = {r[0] for r in peer_db.execute("SELECT DISTINCT reason FROM rejects").fetchall()}
    assert "unrecognized file format" in reasons
