"""Every table of a faultline database as sorted text rows: two databases built from the
same files compare equal exactly when their contents are the same."""

from __future__ import annotations

from pathlib import Path

import duckdb

from faultline.schemas.tables import TABLES


def snapshot(db: Path) -> dict[str, list[str]]:
    """``{table: sorted rows}`` for every table the schema defines."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {t.name: sorted(map(str, con.execute(
            f'SELECT * FROM "{t.name}"').fetchall())) for t in TABLES}
