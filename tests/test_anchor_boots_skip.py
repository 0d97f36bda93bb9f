"""anchor_boots (pipeline/load.py) on stored rows: lines that carry only an uptime
are reset and re-anchored on every load; a corpus with none of them is left as is."""

from __future__ import annotations

import pytest

from faultline import db
from faultline.pipeline.load import anchor_boots

XID79 = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1912, GPU has fallen off the bus."

CASES = [  # (attrs of the stored kernel event, its ts_quality before, after)
    # plain dmesg anchored by a file that is gone: reset to untimed
    ('{"boot_seq": 0, "uptime_us": 24128828315}', "boot_relative", "untimed"),
    # a syslog line with its own time and uptime: not a boot-relative line
    ('{"uptime_us": 24128828315}', "exact", "exact"),
    # no attrs at all
    (None, "exact", "exact"),
]


@pytest.mark.parametrize(("attrs", "before", "after"), CASES)
def test_stored_lines_after_anchor_boots(tmp_path, attrs, before, after):
    con = db.connect(tmp_path / "a.duckdb")
    con.execute("""
        INSERT INTO events (event_id, ts, ts_quality, host, source, kind, message, path,
                            line_no, line_end, sha256, attrs)
        VALUES ('e1', TIMESTAMPTZ '2024-12-30 10:00:00+00', ?, 'node1', 'kernel', 'xid',
                ?, '/c/node1/var/log/dmesg', 1, 1, 'ab', ?)
    """, [before, XID79, attrs])
    anchor_boots(con)
    got = con.execute("SELECT ts_quality, ts IS NULL FROM events").fetchall()
    con.close()
    assert got == [(after, after == "untimed")]
