"""A small corpus is loaded on one DuckDB thread (pipeline/run.py, _duckdb_settings):
the same tables as on every thread, and the settings (threads, the block allocator's
memory) are in force during the load and the root causes."""

from __future__ import annotations

import os

import duckdb

from faultline.pipeline import run
from faultline.schemas.tables import TABLES


def _ingest(corpus, db, monkeypatch
            ) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """The tables (each table's rows as sorted text), and DuckDB's ``threads`` and
    ``block_allocator_memory`` settings seen at the start of the load and of the root
    causes."""
    opened = []
    real_open = run._open
    monkeypatch.setattr(run, "_open", lambda path: opened.append(real_open(path)) or opened[-1])
    seen: list[str] = []
    kept: list[str] = []

    def on_phase(name: str) -> None:
        if name in ("load", "root causes"):
            con = opened[-1]
            seen.append(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
            kept.append(con.execute("SELECT current_setting('block_allocator_memory')")
                        .fetchall()[0][0])

    run.ingest([corpus], db, on_phase=on_phase)
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {t.name: sorted(map(str, con.execute(f'SELECT * FROM "{t.name}"')
                                     .fetchall())) for t in TABLES}
    return tables, seen, kept


def test_small_corpus_loads_on_one_thread_with_the_same_tables(tmp_path, repo_root,
                                                                monkeypatch):
    corpus = repo_root / "fixtures" / "sample" / "corpus"
    one, seen_one, kept_one = _ingest(corpus, tmp_path / "one.duckdb", monkeypatch)
    assert [int(t) for t in seen_one] == [1, 1]
    with duckdb.connect() as con:  # the setting as DuckDB prints it back
        con.execute(f"SET block_allocator_memory = '{run.BLOCK_ALLOCATOR}'")
        block = con.execute("SELECT current_setting('block_allocator_memory')").fetchall()[0][0]
    assert block != duckdb.connect().execute(
        "SELECT current_setting('block_allocator_memory')").fetchall()[0][0]  # not the default
    assert kept_one == [block, block]
    monkeypatch.setattr(run, "ONE_DUCKDB_THREAD_BYTES", 0)  # every corpus is "large"
    every, seen_every, kept_every = _ingest(corpus, tmp_path / "every.duckdb", monkeypatch)
    cores = len(os.sched_getaffinity(0))
    assert [int(t) for t in seen_every] == [duckdb.connect().execute(
        "SELECT current_setting('threads')").fetchall()[0][0]] * 2
    assert cores == 1 or int(seen_every[0]) > 1
    assert kept_every == [block, block]
    assert one["events"] and one["interruptions"]
    assert one == every
