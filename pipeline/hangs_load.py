"""Build ``collective_hangs`` from the ``flight_recorder_dump`` events, in the load step.

The analysis needs every rank's dump of a job at once, so it runs once the shards are
merged (:func:`faultline.pipeline.load.load_shards`), per job, on the dumps' summaries;
ranks map to hosts and GPUs through the job's own lines: the events of that job and rank
(their host, and the GPU index the inventory gave their PCI address, from NCCL's busId),
else the dump file's host.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

from faultline.classifiers.hangs import Hang, RankDump, analyse
from faultline.schemas.tables import COLLECTIVE_HANGS


def rebuild(con: duckdb.DuckDBPyConnection) -> int:
    """Replace ``collective_hangs``; returns its rows."""
    rows = con.execute("""
        SELECT coalesce(job_id, ''), rank, path, host, attrs FROM events
        WHERE kind = 'flight_recorder_dump' AND rank IS NOT NULL ORDER BY path""").fetchall()
    con.execute("DELETE FROM collective_hangs")
    by_job: dict[str, list[RankDump]] = {}
    dump_host: dict[tuple[str, int], str] = {}
    for job, rank, path, host, attrs in rows:
        by_job.setdefault(job, []).append(RankDump(rank, path, json.loads(attrs)))
        if host:
            dump_host.setdefault((job, rank), host)
    out = []
    for job, dumps in sorted(by_job.items()):
        hangs = analyse(job, dumps)
        places = places_of(con, job, {r for h in hangs for r in h.culprit_ranks}, dump_host)
        out.extend(_row(h, places) for h in hangs)
    if out:
        table = pa.Table.from_pylist(out, schema=COLLECTIVE_HANGS.arrow_schema)
        con.register("new_hangs", table)
        con.execute("INSERT INTO collective_hangs SELECT * FROM new_hangs")
        con.unregister("new_hangs")
    return len(out)


def places_of(con: duckdb.DuckDBPyConnection, job: str, ranks: set[int],
              dump_host: dict[tuple[str, int], str]) -> dict[int, tuple[str | None, int | None]]:
    """rank -> (host, GPU index) from the job's events of that rank."""
    if not ranks:
        return {}
    found = con.execute("""
        SELECT rank, mode(host) AS host, max(gpu_index) AS gpu FROM events
        WHERE coalesce(job_id, '') = ? AND rank IN (SELECT unnest(?::INTEGER[]))
          AND host IS NOT NULL AND kind <> 'flight_recorder_dump'
        GROUP BY rank""", [job, sorted(ranks)]).fetchall()
    places = {r: (h, g) for r, h, g in found}
    for r in ranks:
        if r not in places and (job, r) in dump_host:
            places[r] = (dump_host[(job, r)], None)
    return places


def _row(h: Hang, places: dict[int, tuple[str | None, int | None]]) -> dict:
    host, gpu = places.get(h.culprit_ranks[0], (None, None)) if h.culprit_ranks else (None, None)
    return {"job_id": h.job_id, "pg_id": h.pg_id, "pg_name": h.pg_name, "pg_desc": h.pg_desc,
            "is_p2p": h.is_p2p, "collective_seq_id": h.collective_seq_id, "op": h.op,
            "sizes": json.dumps(h.sizes), "dtypes": json.dumps(h.dtypes), "ranks": h.ranks,
            "missing_ranks": h.missing_ranks, "verdict": h.verdict,
            "culprit_ranks": h.culprit_ranks, "culprit_host": host, "culprit_gpu": gpu,
            "evidence_path": h.evidence_path, "dumps": h.dumps}
